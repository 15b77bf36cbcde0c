// Package logtest is the test suite that every implementation of a
// partition log (storage.Log, storage.MemLog, and any later one) must pass.
// It checks the promises that the layers above storage rely on: contiguous
// offsets, epoch stamping and fencing, exact replica appends, reads by
// offset, long-poll waiting, truncation and concurrent appends.
package logtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
)

// MaxBatchBytes is the batch size limit that open must configure: the suite
// checks that a larger batch is refused.
const MaxBatchBytes = 16 << 10

// Log is what the suite tests: the log of one partition replica.
type Log interface {
	Append(ctx context.Context, batch record.Batch, epoch int32) (storage.AppendResult, error)
	AppendExact(ctx context.Context, batch record.Batch) (storage.AppendResult, error)
	Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error)
	Wait(ctx context.Context, offset int64) error
	TruncateTo(ctx context.Context, offset int64) error
	LogStartOffset() int64
	LogEndOffset() int64
	DurableEndOffset() int64
	LastEpoch() int32
	Close() error
}

// waitFor bounds every wait of the suite; nothing it waits for should take
// more than a fraction of it.
const waitFor = 10 * time.Second

// Run runs the suite. open returns a new, empty log with MaxBatchBytes as
// its batch limit; the suite closes it, and open should clean up anything
// else with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) Log) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l Log)
	}{
		{"EmptyLog", testEmptyLog},
		{"OffsetsContiguous", testOffsetsContiguous},
		{"AppendStampsEpochAndTime", testAppendStamps},
		{"AppendRejects", testAppendRejects},
		{"AppendExactAccepts", testAppendExactAccepts},
		{"AppendExactRejects", testAppendExactRejects},
		{"NullAndEmptyKeys", testNullAndEmptyKeys},
		{"Headers", testHeaders},
		{"ReadMiddleOfBatch", testReadMiddleOfBatch},
		{"ReadMaxBytes", testReadMaxBytes},
		{"ReadLimit", testReadLimit},
		{"ReadAtEnd", testReadAtEnd},
		{"ReadOutOfRange", testReadOutOfRange},
		{"ReadUsesBuf", testReadUsesBuf},
		{"WaitReturnsWhenDataExists", testWaitImmediate},
		{"WaitBlocksUntilAppend", testWaitBlocks},
		{"WaitContextDeadline", testWaitDeadline},
		{"WaitClosed", testWaitClosed},
		{"Closed", testClosed},
		{"TruncateToMiddle", testTruncateToMiddle},
		{"TruncateToStart", testTruncateToStart},
		{"TruncateInsideBatch", testTruncateInsideBatch},
		{"TruncateOutOfRange", testTruncateOutOfRange},
		{"LastEpochAfterTruncate", testLastEpochAfterTruncate},
		{"ConcurrentAppends", testConcurrentAppends},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := open(t)
			t.Cleanup(func() { assert.NoError(t, l.Close()) })
			tc.fn(t, l)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// newBatch encodes records into an unstamped batch.
func newBatch(t *testing.T, records ...record.Record) record.Batch {
	t.Helper()
	b, err := record.AppendBatch(nil, records)
	require.NoError(t, err)
	return b
}

// values makes a batch of n records with values "<prefix>-<i>".
func values(t *testing.T, prefix string, n int) record.Batch {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(prefix), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return newBatch(t, recs...)
}

func mustAppend(t *testing.T, l Log, b record.Batch, epoch int32) storage.AppendResult {
	t.Helper()
	res, err := l.Append(ctxFor(t), b, epoch)
	require.NoError(t, err)
	return res
}

// readAll reads every batch from offset to the durable end, whole and in
// order, checking that Read returns only whole, valid batches.
func readAll(t *testing.T, l Log, from int64) []record.Batch {
	t.Helper()
	var out []record.Batch
	for off := from; ; {
		buf, err := l.Read(ctxFor(t), off, 1<<20, 1<<62, nil)
		require.NoError(t, err, "read at %d", off)
		if len(buf) == 0 {
			return out
		}
		require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
			require.NoError(t, b.Validate())
			out = append(out, append(record.Batch(nil), b...))
			return true
		}), "read at %d returned something other than whole batches", off)
		next := out[len(out)-1].NextOffset()
		require.Greater(t, next, off, "read at %d made no progress", off)
		off = next
	}
}

// snapshot is what a rejected operation must leave unchanged.
type snapshot struct {
	start, end, durable int64
	epoch               int32
	data                []byte
}

func take(t *testing.T, l Log) snapshot {
	t.Helper()
	s := snapshot{start: l.LogStartOffset(), end: l.LogEndOffset(), durable: l.DurableEndOffset(), epoch: l.LastEpoch()}
	for _, b := range readAll(t, l, s.start) {
		s.data = append(s.data, b...)
	}
	return s
}

func assertUnchanged(t *testing.T, l Log, before snapshot, msg string) {
	t.Helper()
	after := take(t, l)
	assert.Equal(t, before.start, after.start, "%s: log start offset", msg)
	assert.Equal(t, before.end, after.end, "%s: log end offset", msg)
	assert.Equal(t, before.durable, after.durable, "%s: durable end offset", msg)
	assert.Equal(t, before.epoch, after.epoch, "%s: last epoch", msg)
	assert.Equal(t, before.data, after.data, "%s: log content", msg)
}

func decode(t *testing.T, b record.Batch) []record.Record {
	t.Helper()
	recs, err := b.Decode()
	require.NoError(t, err)
	return recs
}

func testEmptyLog(t *testing.T, l Log) {
	assert.Equal(t, int64(0), l.LogStartOffset())
	assert.Equal(t, int64(0), l.LogEndOffset())
	assert.Equal(t, int64(0), l.DurableEndOffset())
	assert.Equal(t, int32(-1), l.LastEpoch())
	assert.Empty(t, readAll(t, l, 0))
}

func testOffsetsContiguous(t *testing.T, l Log) {
	counts := []int{1, 3, 1, 7, 2, 1, 10}
	var want int64
	for i, n := range counts {
		res := mustAppend(t, l, values(t, fmt.Sprint(i), n), 0)
		assert.Equal(t, want, res.BaseOffset, "batch %d", i)
		assert.Equal(t, want+int64(n), res.NextOffset, "batch %d", i)
		want += int64(n)
		assert.Equal(t, want, l.LogEndOffset())
		assert.Equal(t, want, l.DurableEndOffset(), "an append returns only once durable")
	}
	batches := readAll(t, l, 0)
	require.Len(t, batches, len(counts))
	var next int64
	for i, b := range batches {
		assert.Equal(t, next, b.BaseOffset(), "batch %d", i)
		assert.Equal(t, int32(counts[i]), b.RecordCount(), "batch %d", i)
		for j, r := range decode(t, b) {
			assert.Equal(t, next+int64(j), r.Offset)
			assert.Equal(t, fmt.Sprintf("%d-%d", i, j), string(r.Value))
		}
		next = b.NextOffset()
	}
}

func testAppendStamps(t *testing.T, l Log) {
	b := values(t, "a", 3)
	b.Stamp(999, 99, 99) // whatever the caller put there is overwritten
	res := mustAppend(t, l, b, 4)
	assert.Equal(t, storage.AppendResult{BaseOffset: 0, NextOffset: 3, LeaderEpoch: 4, AppendTime: res.AppendTime}, res)
	assert.Positive(t, res.AppendTime)
	assert.NotEqual(t, int64(99), res.AppendTime)
	assert.Equal(t, int32(4), l.LastEpoch())

	res2 := mustAppend(t, l, values(t, "b", 1), 4)
	assert.GreaterOrEqual(t, res2.AppendTime, res.AppendTime, "append times go forward")
	res3 := mustAppend(t, l, values(t, "c", 1), 6)
	assert.Equal(t, int32(6), res3.LeaderEpoch)
	assert.Equal(t, int32(6), l.LastEpoch())

	got := readAll(t, l, 0)
	require.Len(t, got, 3)
	for i, r := range []storage.AppendResult{res, res2, res3} {
		assert.Equal(t, r.BaseOffset, got[i].BaseOffset())
		assert.Equal(t, r.LeaderEpoch, got[i].LeaderEpoch())
		assert.Equal(t, r.AppendTime, got[i].AppendTime())
		for _, rec := range decode(t, got[i]) {
			assert.Equal(t, r.AppendTime, rec.Timestamp)
		}
	}
}

func testAppendRejects(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 2), 5)
	before := take(t, l)
	ctx := ctxFor(t)

	_, err := l.Append(ctx, values(t, "low", 1), 4)
	assert.ErrorIs(t, err, storage.ErrEpochRegression)
	assertUnchanged(t, l, before, "lower epoch")

	_, err = l.Append(ctx, values(t, "neg", 1), -1)
	assert.ErrorIs(t, err, storage.ErrInvalidBatch)
	assertUnchanged(t, l, before, "negative epoch")

	big := newBatch(t, record.Record{Value: make([]byte, MaxBatchBytes)})
	_, err = l.Append(ctx, big, 5)
	assert.ErrorIs(t, err, storage.ErrBatchTooLarge)
	assertUnchanged(t, l, before, "too large")

	bad := values(t, "bad", 2)
	bad[len(bad)-1] ^= 1
	_, err = l.Append(ctx, bad, 5)
	assert.ErrorIs(t, err, storage.ErrInvalidBatch)
	assertUnchanged(t, l, before, "bad checksum")

	_, err = l.Append(ctx, record.Batch("garbage"), 5)
	assert.ErrorIs(t, err, storage.ErrInvalidBatch)
	assertUnchanged(t, l, before, "garbage")

	res := mustAppend(t, l, values(t, "ok", 1), 5)
	assert.Equal(t, before.end, res.BaseOffset, "a rejected append must not use up offsets")
}

// stamped returns a batch stamped as a leader would for the given position.
func stamped(t *testing.T, base int64, epoch int32, appendTime int64, prefix string, n int) record.Batch {
	t.Helper()
	b := values(t, prefix, n)
	b.Stamp(base, epoch, appendTime)
	return b
}

func testAppendExactAccepts(t *testing.T, l Log) {
	var sent []byte
	next := int64(0)
	for i, epoch := range []int32{0, 0, 3, 3, 8} {
		b := stamped(t, next, epoch, 1_600_000_000_000+int64(i), fmt.Sprint(i), i+1)
		res, err := l.AppendExact(ctxFor(t), b)
		require.NoError(t, err, "batch %d", i)
		assert.Equal(t, storage.AppendResult{BaseOffset: next, NextOffset: next + int64(i+1), LeaderEpoch: epoch, AppendTime: 1_600_000_000_000 + int64(i)}, res)
		sent = append(sent, b...)
		next = b.NextOffset()
		assert.Equal(t, next, l.LogEndOffset())
		assert.Equal(t, next, l.DurableEndOffset())
		assert.Equal(t, epoch, l.LastEpoch())
	}
	var got []byte
	for _, b := range readAll(t, l, 0) {
		got = append(got, b...)
	}
	assert.Equal(t, sent, got, "a replica stores the leader's exact bytes")

	// Append and AppendExact mix: the leader's next append follows.
	res := mustAppend(t, l, values(t, "leader", 1), 8)
	assert.Equal(t, next, res.BaseOffset)
}

func testAppendExactRejects(t *testing.T, l Log) {
	_, err := l.AppendExact(ctxFor(t), stamped(t, 0, 5, 1, "first", 3))
	require.NoError(t, err)
	end := l.LogEndOffset()

	garbled := stamped(t, end, 5, 1, "x", 2)
	garbled[record.HeaderSize+2] ^= 0x40
	badCRC := stamped(t, end, 5, 1, "x", 2)
	badCRC[13] ^= 1
	short := stamped(t, end, 5, 1, "x", 2)
	short = short[:len(short)-1]
	big := newBatch(t, record.Record{Value: make([]byte, MaxBatchBytes)})
	big.Stamp(end, 5, 1)
	negative := stamped(t, end, 5, 1, "x", 1)
	negative.Stamp(-1, 5, 1)

	cases := []struct {
		name string
		b    record.Batch
		want error
	}{
		{"base offset ahead", stamped(t, end+1, 5, 1, "x", 1), storage.ErrOffsetMismatch},
		{"base offset behind", stamped(t, end-1, 5, 1, "x", 1), storage.ErrOffsetMismatch},
		{"base offset zero", stamped(t, 0, 5, 1, "x", 1), storage.ErrOffsetMismatch},
		{"base offset negative", negative, storage.ErrInvalidBatch},
		{"lower epoch", stamped(t, end, 4, 1, "x", 1), storage.ErrEpochRegression},
		{"garbled record", garbled, storage.ErrInvalidBatch},
		{"bad checksum", badCRC, storage.ErrInvalidBatch},
		{"cut short", short, storage.ErrInvalidBatch},
		{"garbage", record.Batch("not a batch at all, but longer than a header"), storage.ErrInvalidBatch},
		{"empty", record.Batch{}, storage.ErrInvalidBatch},
		{"two batches", append(stamped(t, end, 5, 1, "x", 1), stamped(t, end+1, 5, 1, "y", 1)...), storage.ErrInvalidBatch},
		{"too large", big, storage.ErrBatchTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := take(t, l)
			_, err := l.AppendExact(ctxFor(t), tc.b)
			assert.ErrorIs(t, err, tc.want)
			assertUnchanged(t, l, before, tc.name)
		})
	}
	_, err = l.AppendExact(ctxFor(t), stamped(t, end, 5, 1, "after", 1))
	assert.NoError(t, err, "the log takes the right batch after the rejections")
}

func testNullAndEmptyKeys(t *testing.T, l Log) {
	recs := []record.Record{
		{Key: nil, Value: []byte("null key")},
		{Key: []byte{}, Value: []byte("empty key")},
		{Key: []byte("k"), Value: nil},
		{Key: nil, Value: []byte{}},
		{Key: []byte{}, Value: []byte{}},
	}
	mustAppend(t, l, newBatch(t, recs...), 0)
	got := readAll(t, l, 0)
	require.Len(t, got, 1)
	out := decode(t, got[0])
	require.Len(t, out, len(recs))
	for i := range recs {
		assert.Equal(t, recs[i].Key == nil, out[i].Key == nil, "record %d: null key must stay null and empty stay empty", i)
		assert.Equal(t, string(recs[i].Key), string(out[i].Key), "record %d", i)
		assert.Equal(t, string(recs[i].Value), string(out[i].Value), "record %d", i)
	}
}

func testHeaders(t *testing.T, l Log) {
	hs := []record.Header{
		{Key: "trace-id", Value: []byte("abc")},
		{Key: "", Value: []byte("nameless")},
		{Key: "empty", Value: []byte{}},
		{Key: "trace-id", Value: []byte("second, same name")},
	}
	mustAppend(t, l, newBatch(t,
		record.Record{Key: []byte("k"), Value: []byte("v"), Headers: hs},
		record.Record{Key: []byte("k2"), Value: []byte("v2")},
	), 0)
	got := readAll(t, l, 0)
	require.Len(t, got, 1)
	out := decode(t, got[0])
	require.Len(t, out, 2)
	require.Len(t, out[0].Headers, len(hs))
	for i := range hs {
		assert.Equal(t, hs[i].Key, out[0].Headers[i].Key)
		assert.Equal(t, string(hs[i].Value), string(out[0].Headers[i].Value))
	}
	assert.Empty(t, out[1].Headers)
}

func testReadMiddleOfBatch(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 10), 0) // [0, 10)
	mustAppend(t, l, values(t, "b", 5), 0)  // [10, 15)
	mustAppend(t, l, values(t, "c", 1), 0)  // [15, 16)
	for off, base := range map[int64]int64{0: 0, 1: 0, 5: 0, 9: 0, 10: 10, 12: 10, 14: 10, 15: 15} {
		buf, err := l.Read(ctxFor(t), off, 1, 1<<62, nil)
		require.NoError(t, err)
		b, rest, err := record.Frame(buf, record.MaxBatchSize)
		require.NoError(t, err, "read at %d", off)
		assert.Empty(t, rest, "read at %d with maxBytes 1 returns one batch", off)
		assert.Equal(t, base, b.BaseOffset(), "read at %d", off)
		assert.Greater(t, b.NextOffset(), off, "the batch holds offset %d", off)
	}
}

func testReadMaxBytes(t *testing.T, l Log) {
	var sizes []int
	for i := range 8 {
		mustAppend(t, l, values(t, fmt.Sprintf("batch%02d", i), 4), 0)
	}
	all := readAll(t, l, 0)
	require.Len(t, all, 8)
	for _, b := range all {
		sizes = append(sizes, len(b))
	}
	one := sizes[0]
	for _, maxBytes := range []int{0, 1, one - 1, one, one + 1, 2*one + one/2, 3 * one, 1 << 20} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			buf, err := l.Read(ctxFor(t), 0, maxBytes, 1<<62, nil)
			require.NoError(t, err)
			var n int
			require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
				assert.Equal(t, []byte(all[n]), []byte(b), "batch %d", n)
				n++
				return true
			}))
			assert.GreaterOrEqual(t, n, 1, "a read returns at least one whole batch")
			if n > 1 {
				assert.LessOrEqual(t, len(buf), maxBytes, "more than one batch only within maxBytes")
			}
			if maxBytes >= 3*one && maxBytes < 1<<20 {
				// Implementations may stop early (a segment end), but a read
				// this large from a log this small must not.
				assert.GreaterOrEqual(t, n, 2)
			}
		})
	}

	// A batch larger than maxBytes still comes back whole.
	big := newBatch(t, record.Record{Value: make([]byte, 3000)})
	res := mustAppend(t, l, big, 0)
	buf, err := l.Read(ctxFor(t), res.BaseOffset, 100, 1<<62, nil)
	require.NoError(t, err)
	b, rest, err := record.Frame(buf, record.MaxBatchSize)
	require.NoError(t, err)
	assert.Empty(t, rest)
	assert.Equal(t, res.BaseOffset, b.BaseOffset())
	assert.Len(t, b, len(big))
}

func testReadLimit(t *testing.T, l Log) {
	var bases []int64
	for i := range 6 {
		bases = append(bases, mustAppend(t, l, values(t, fmt.Sprint(i), 3), 0).BaseOffset)
	}
	// bases: 0, 3, 6, 9, 12, 15; end 18.
	cases := []struct {
		offset, limit int64
		wantBases     []int64
	}{
		{0, 0, nil},
		{0, 1, []int64{0}},
		{0, 3, []int64{0}},
		{0, 4, []int64{0, 3}},
		{0, 9, []int64{0, 3, 6}},
		{4, 9, []int64{3, 6}},
		{9, 9, nil},
		{10, 9, nil},
		{0, 18, bases},
		{0, 100, bases},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%d", tc.offset, tc.limit), func(t *testing.T) {
			var got []int64
			off := tc.offset
			for {
				buf, err := l.Read(ctxFor(t), off, 1<<20, tc.limit, nil)
				require.NoError(t, err)
				if len(buf) == 0 {
					break
				}
				require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
					assert.Less(t, b.BaseOffset(), tc.limit)
					got = append(got, b.BaseOffset())
					off = b.NextOffset()
					return true
				}))
			}
			assert.Equal(t, tc.wantBases, got)
		})
	}
}

func testReadAtEnd(t *testing.T, l Log) {
	buf, err := l.Read(ctxFor(t), 0, 1<<20, 1<<62, nil)
	require.NoError(t, err)
	assert.Empty(t, buf, "an empty log reads as empty")
	res := mustAppend(t, l, values(t, "a", 2), 0)
	buf, err = l.Read(ctxFor(t), res.NextOffset, 1<<20, 1<<62, nil)
	require.NoError(t, err)
	assert.Empty(t, buf)
}

func testReadOutOfRange(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 2), 0)
	for _, off := range []int64{-1, -100, 3, 4, 1 << 40} {
		_, err := l.Read(ctxFor(t), off, 1<<20, 1<<62, nil)
		assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange, "offset %d", off)
	}
}

func testReadUsesBuf(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 2), 0)
	want := readAll(t, l, 0)[0]
	buf := make([]byte, 0, 1<<16)
	got, err := l.Read(ctxFor(t), 0, 1<<16, 1<<62, buf)
	require.NoError(t, err)
	assert.Equal(t, []byte(want), got)
	if len(got) > 0 {
		assert.Same(t, &buf[:1][0], &got[0], "a large enough buf is used for the result")
	}
}

func testWaitImmediate(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 3), 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, off := range []int64{0, 1, 2} {
		require.NoError(t, l.Wait(ctx, off))
	}
}

func testWaitBlocks(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 3), 0)
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, 3) }()
	require.Never(t, func() bool { return len(done) > 0 }, 100*time.Millisecond, 5*time.Millisecond,
		"Wait returned before anything was appended at its offset")

	appended := make(chan error, 1)
	next := values(t, "b", 1)
	go func() {
		_, err := l.Append(ctx, next, 0)
		appended <- err
	}()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Wait did not return after an append")
	}
	select {
	case err := <-appended:
		assert.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("append did not return")
	}
	buf, err := l.Read(ctx, 3, 1<<20, 1<<62, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, buf, "what Wait announced is readable")
}

func testWaitDeadline(t *testing.T, l Log) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Wait(ctx, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), waitFor)

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	assert.ErrorIs(t, l.Wait(ctx2, 0), context.Canceled)
}

func testWaitClosed(t *testing.T, l Log) {
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, 0) }()
	require.Never(t, func() bool { return len(done) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, l.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, storage.ErrClosed)
	case <-time.After(waitFor):
		t.Fatal("Wait did not return after Close")
	}
	assert.ErrorIs(t, l.Wait(ctx, 0), storage.ErrClosed)
}

func testClosed(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 1), 0)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "Close is idempotent")
	ctx := ctxFor(t)
	_, err := l.Append(ctx, values(t, "b", 1), 0)
	assert.ErrorIs(t, err, storage.ErrClosed)
	_, err = l.AppendExact(ctx, stamped(t, 1, 0, 1, "b", 1))
	assert.ErrorIs(t, err, storage.ErrClosed)
	_, err = l.Read(ctx, 0, 1<<20, 1<<62, nil)
	assert.ErrorIs(t, err, storage.ErrClosed)
	assert.ErrorIs(t, l.TruncateTo(ctx, 0), storage.ErrClosed)
}

func testTruncateToMiddle(t *testing.T, l Log) {
	for i := range 4 {
		mustAppend(t, l, values(t, fmt.Sprint(i), 3), 1) // 0, 3, 6, 9; end 12
	}
	kept := readAll(t, l, 0)[:2]
	require.NoError(t, l.TruncateTo(ctxFor(t), 6))
	assert.Equal(t, int64(6), l.LogEndOffset())
	assert.Equal(t, int64(6), l.DurableEndOffset())
	assert.Equal(t, int32(1), l.LastEpoch())
	assert.Equal(t, kept, readAll(t, l, 0))
	_, err := l.Read(ctxFor(t), 7, 1<<20, 1<<62, nil)
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange, "cut offsets are gone")

	require.NoError(t, l.TruncateTo(ctxFor(t), 6), "truncating to the end does nothing")
	assert.Equal(t, int64(6), l.LogEndOffset())

	res := mustAppend(t, l, values(t, "new", 2), 2)
	assert.Equal(t, int64(6), res.BaseOffset)
	assert.Equal(t, int32(2), l.LastEpoch())
	got := readAll(t, l, 0)
	require.Len(t, got, 3)
	assert.Equal(t, kept, got[:2])
	recs := decode(t, got[2])
	assert.Equal(t, "new-0", string(recs[0].Value))
	assert.Equal(t, int32(2), got[2].LeaderEpoch())

	// A replica can take the new leader's batches right after a truncation.
	require.NoError(t, l.TruncateTo(ctxFor(t), 6))
	_, err = l.AppendExact(ctxFor(t), stamped(t, 6, 3, 5, "exact", 1))
	require.NoError(t, err)
	assert.Equal(t, int64(7), l.LogEndOffset())
}

func testTruncateToStart(t *testing.T, l Log) {
	for i := range 3 {
		mustAppend(t, l, values(t, fmt.Sprint(i), 2), 3)
	}
	require.NoError(t, l.TruncateTo(ctxFor(t), 0))
	assert.Equal(t, int64(0), l.LogEndOffset())
	assert.Equal(t, int32(-1), l.LastEpoch())
	assert.Empty(t, readAll(t, l, 0))
	res := mustAppend(t, l, values(t, "again", 1), 0)
	assert.Equal(t, int64(0), res.BaseOffset, "an epoch below the cut ones is fine once they are gone")
	assert.Len(t, readAll(t, l, 0), 1)
}

func testTruncateInsideBatch(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 3), 0)
	mustAppend(t, l, values(t, "b", 3), 0)
	before := take(t, l)
	for _, off := range []int64{1, 2, 4, 5} {
		err := l.TruncateTo(ctxFor(t), off)
		assert.ErrorIs(t, err, storage.ErrNotBatchBoundary, "offset %d", off)
		assertUnchanged(t, l, before, fmt.Sprintf("truncate to %d", off))
	}
}

func testTruncateOutOfRange(t *testing.T, l Log) {
	mustAppend(t, l, values(t, "a", 3), 0)
	before := take(t, l)
	for _, off := range []int64{4, 100, -1} {
		err := l.TruncateTo(ctxFor(t), off)
		assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange, "offset %d", off)
		assertUnchanged(t, l, before, fmt.Sprintf("truncate to %d", off))
	}
}

func testLastEpochAfterTruncate(t *testing.T, l Log) {
	assert.Equal(t, int32(-1), l.LastEpoch())
	var bases []int64
	for _, e := range []int32{1, 1, 2, 4, 4, 7} {
		bases = append(bases, mustAppend(t, l, values(t, fmt.Sprint(e), 2), e).BaseOffset)
	}
	assert.Equal(t, int32(7), l.LastEpoch())
	for _, tc := range []struct {
		to   int64
		want int32
	}{{bases[5], 4}, {bases[4], 4}, {bases[3], 2}, {bases[2], 1}, {bases[1], 1}, {bases[0], -1}} {
		require.NoError(t, l.TruncateTo(ctxFor(t), tc.to))
		assert.Equal(t, tc.want, l.LastEpoch(), "after truncating to %d", tc.to)
		assert.Equal(t, tc.to, l.LogEndOffset())
	}
}

func testConcurrentAppends(t *testing.T, l Log) {
	const goroutines, perG = 16, 50
	ctx := ctxFor(t)
	type result struct {
		g, i int
		res  storage.AppendResult
	}
	results := make(chan result, goroutines*perG)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				n := 1 + (g+i)%3
				recs := make([]record.Record, n)
				for j := range recs {
					recs[j] = record.Record{Value: []byte(fmt.Sprintf("g%d-i%d-r%d", g, i, j))}
				}
				b, err := record.AppendBatch(nil, recs)
				if err != nil {
					errs <- err
					return
				}
				res, err := l.Append(ctx, b, 1)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d append %d: %w", g, i, err)
					return
				}
				results <- result{g, i, res}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(results)
	for err := range errs {
		require.NoError(t, err)
	}

	var all []result
	for r := range results {
		all = append(all, r)
	}
	require.Len(t, all, goroutines*perG)
	sort.Slice(all, func(i, j int) bool { return all[i].res.BaseOffset < all[j].res.BaseOffset })
	var next int64
	byBase := map[int64]result{}
	for _, r := range all {
		require.Equal(t, next, r.res.BaseOffset, "offsets are distinct and contiguous")
		next = r.res.NextOffset
		byBase[r.res.BaseOffset] = r
	}
	assert.Equal(t, next, l.LogEndOffset())

	seen := map[string]int{}
	var off int64
	for _, b := range readAll(t, l, 0) {
		r, ok := byBase[b.BaseOffset()]
		require.True(t, ok, "batch at %d was not returned to an appender", b.BaseOffset())
		for j, rec := range decode(t, b) {
			assert.Equal(t, off, rec.Offset)
			off++
			want := fmt.Sprintf("g%d-i%d-r%d", r.g, r.i, j)
			assert.Equal(t, want, string(rec.Value), "the appender was told the offset its records got")
			seen[string(rec.Value)]++
		}
	}
	assert.Equal(t, next, off)
	for v, n := range seen {
		assert.Equal(t, 1, n, "record %s read %d times", v, n)
	}
}
