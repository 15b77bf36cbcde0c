package record_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
)

// batchCases are record sets that every round trip test encodes.
func batchCases() []struct {
	name    string
	records []record.Record
} {
	many := make([]record.Record, 500)
	for i := range many {
		many[i] = record.Record{
			Key:   []byte(fmt.Sprintf("key-%d", i)),
			Value: bytes.Repeat([]byte{byte(i)}, i%37),
		}
		if i%7 == 0 {
			many[i].Key = nil
		}
		if i%5 == 0 {
			many[i].Headers = []record.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}
		}
	}
	return []struct {
		name    string
		records []record.Record
	}{
		{"null key", []record.Record{{Key: nil, Value: []byte("v")}}},
		{"empty key", []record.Record{{Key: []byte{}, Value: []byte("v")}}},
		{"empty value", []record.Record{{Key: []byte("k"), Value: []byte{}}}},
		{"nil value", []record.Record{{Key: []byte("k"), Value: nil}}},
		{"everything empty", []record.Record{{Key: []byte{}, Value: nil}}},
		{"headers", []record.Record{{
			Key:   []byte("k"),
			Value: []byte("v"),
			Headers: []record.Header{
				{Key: "trace", Value: []byte("abc")},
				{Key: "", Value: []byte("empty name")},
				{Key: "empty value", Value: []byte{}},
				{Key: "trace", Value: []byte("duplicate names keep their order")},
			},
		}}},
		{"null and empty keys side by side", []record.Record{
			{Key: nil, Value: []byte("a")},
			{Key: []byte{}, Value: []byte("b")},
			{Key: nil, Value: nil},
			{Key: []byte{0xff, 0xff, 0xff, 0xff}, Value: []byte("key that looks like -1")},
		}},
		{"binary", []record.Record{{Key: []byte{0, 1, 2}, Value: bytes.Repeat([]byte{0xff}, 1000)}}},
		{"many records", many},
	}
}

func mustBatch(t *testing.T, records []record.Record) record.Batch {
	t.Helper()
	b, err := record.AppendBatch(nil, records)
	require.NoError(t, err)
	return record.Batch(b)
}

// assertSameRecords checks got against want field by field, keeping null
// and empty keys apart. Offsets and timestamps are checked by the caller.
func assertSameRecords(t *testing.T, want, got []record.Record) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		assert.Equal(t, w.Key == nil, g.Key == nil, "record %d: null key", i)
		assert.Equal(t, string(w.Key), string(g.Key), "record %d: key", i)
		assert.Equal(t, string(w.Value), string(g.Value), "record %d: value", i)
		require.Len(t, g.Headers, len(w.Headers), "record %d: headers", i)
		for j := range w.Headers {
			assert.Equal(t, w.Headers[j].Key, g.Headers[j].Key, "record %d header %d", i, j)
			assert.Equal(t, string(w.Headers[j].Value), string(g.Headers[j].Value), "record %d header %d", i, j)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range batchCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBatch(t, tc.records)
			require.NoError(t, b.Validate())
			assert.Equal(t, int32(len(tc.records)), b.RecordCount())
			assert.Equal(t, int64(0), b.BaseOffset())
			assert.Equal(t, int32(0), b.LeaderEpoch())
			assert.Equal(t, int64(0), b.AppendTime())
			size := record.HeaderSize
			for i := range tc.records {
				size += tc.records[i].EncodedSize()
			}
			assert.Equal(t, size, b.Size())

			b.Stamp(1000, 7, 1_700_000_000_123)
			got, err := b.Decode()
			require.NoError(t, err)
			assertSameRecords(t, tc.records, got)
			for i, r := range got {
				assert.Equal(t, int64(1000+i), r.Offset)
				assert.Equal(t, int64(1_700_000_000_123), r.Timestamp)
			}
			for i, r := range got {
				if r.Key == nil {
					continue
				}
				// Decode's copies must not alias the batch.
				b[record.HeaderSize] ^= 0xff
				assert.Equal(t, string(tc.records[i].Key), string(r.Key))
				b[record.HeaderSize] ^= 0xff
				break
			}
		})
	}
}

func TestAppendBatchAppendsToDst(t *testing.T) {
	recs := []record.Record{{Key: []byte("k"), Value: []byte("v")}}
	first := mustBatch(t, recs)
	both, err := record.AppendBatch(append([]byte(nil), first...), recs)
	require.NoError(t, err)
	assert.Equal(t, []byte(first), both[:len(first)])
	assert.Equal(t, []byte(first), both[len(first):])

	var n int
	require.NoError(t, record.Batches(both, func(record.Batch) bool { n++; return true }))
	assert.Equal(t, 2, n)
}

func TestAppendBatchRejectsEmpty(t *testing.T) {
	dst := []byte("keep")
	out, err := record.AppendBatch(dst, nil)
	assert.ErrorIs(t, err, record.ErrInvalid)
	assert.Equal(t, dst, out)
}

func TestStamp(t *testing.T) {
	b := mustBatch(t, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	before := append(record.Batch(nil), b...)
	b.Stamp(math.MaxInt64-2, math.MaxInt32, 42)
	require.NoError(t, b.Validate())
	assert.True(t, b.ChecksumOK())
	assert.Equal(t, int64(math.MaxInt64-2), b.BaseOffset())
	assert.Equal(t, int64(math.MaxInt64), b.NextOffset())
	assert.Equal(t, int32(math.MaxInt32), b.LeaderEpoch())
	assert.Equal(t, int64(42), b.AppendTime())
	assert.NotEqual(t, before.CRC(), b.CRC())
	// Only the stamped fields and the checksum change.
	assert.Equal(t, []byte(before[record.HeaderSize:]), []byte(b[record.HeaderSize:]))
	assert.Equal(t, before[8:12], b[8:12], "length")

	b.Stamp(0, 0, 0)
	assert.Equal(t, before, b, "stamping the original fields restores the original bytes")
}

func TestStampedOffsetsMustNotOverflow(t *testing.T) {
	b := mustBatch(t, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	b.Stamp(math.MaxInt64-1, 0, 0)
	assert.ErrorIs(t, b.Validate(), record.ErrInvalid)
}

func TestEveryByteFlipIsDetected(t *testing.T) {
	for _, tc := range batchCases() {
		if len(tc.records) > 10 {
			continue // quadratic; the small cases cover every field
		}
		t.Run(tc.name, func(t *testing.T) {
			b := mustBatch(t, tc.records)
			b.Stamp(77, 3, 1_700_000_000_000)
			for i := range b {
				for _, mask := range []byte{0x01, 0x80, 0xff} {
					c := append(record.Batch(nil), b...)
					c[i] ^= mask
					_, _, ferr := record.Frame(c, record.MaxBatchSize)
					assert.Error(t, ferr, "Frame accepted a flip of byte %d by %#x", i, mask)
					assert.Error(t, c.Validate(), "Validate accepted a flip of byte %d by %#x", i, mask)
				}
			}
		})
	}
}

func TestChecksumCoversEveryByteButItself(t *testing.T) {
	b := mustBatch(t, []record.Record{{Key: []byte("k"), Value: []byte("value"), Headers: []record.Header{{Key: "h", Value: []byte("x")}}}})
	for i := range b {
		c := append(record.Batch(nil), b...)
		c[i] ^= 0x10
		if i >= 12 && i < 16 {
			assert.False(t, c.ChecksumOK(), "flipping CRC byte %d must fail", i)
			continue
		}
		assert.False(t, c.ChecksumOK(), "byte %d is not covered", i)
	}
}

func TestFrameShortForEveryTruncation(t *testing.T) {
	b := mustBatch(t, []record.Record{
		{Key: []byte("k"), Value: []byte("v1")},
		{Key: nil, Value: []byte("v2"), Headers: []record.Header{{Key: "h", Value: []byte("hv")}}},
	})
	b.Stamp(5, 1, 99)
	for n := 0; n < len(b); n++ {
		got, rest, err := record.Frame(b[:n], record.MaxBatchSize)
		assert.ErrorIs(t, err, record.ErrShort, "truncated to %d bytes", n)
		assert.Nil(t, got)
		assert.Len(t, rest, n, "Frame must give back the input on error")
	}
	got, rest, err := record.Frame(b, record.MaxBatchSize)
	require.NoError(t, err)
	assert.Equal(t, b, got)
	assert.Empty(t, rest)
}

func TestFrameRespectsMaxSize(t *testing.T) {
	b := mustBatch(t, []record.Record{{Value: make([]byte, 100)}})
	_, _, err := record.Frame(b, len(b)-1)
	assert.ErrorIs(t, err, record.ErrInvalid)
	_, _, err = record.Frame(b, len(b))
	assert.NoError(t, err)
}

func TestFrameLeavesTheRest(t *testing.T) {
	a := mustBatch(t, []record.Record{{Value: []byte("a")}})
	b := mustBatch(t, []record.Record{{Value: []byte("bb")}})
	b.Stamp(1, 0, 0)
	buf := append(append([]byte(nil), a...), b...)
	got, rest, err := record.Frame(buf, record.MaxBatchSize)
	require.NoError(t, err)
	assert.Equal(t, a, got)
	assert.Equal(t, []byte(b), rest)
	assert.Equal(t, len(got), cap(got), "a framed batch must not reach into the next one")
}

func TestReencodeGivesSameBytes(t *testing.T) {
	for _, tc := range batchCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := mustBatch(t, tc.records)
			b.Stamp(123456, 9, 1_700_000_000_999)
			recs, err := b.Decode()
			require.NoError(t, err)
			again := mustBatch(t, recs)
			again.Stamp(b.BaseOffset(), b.LeaderEpoch(), b.AppendTime())
			assert.Equal(t, b, again)
		})
	}
}

func TestValidateRejectsMalformed(t *testing.T) {
	good := mustBatch(t, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	restamp := func(b record.Batch) record.Batch {
		b.Stamp(b.BaseOffset(), b.LeaderEpoch(), b.AppendTime())
		return b
	}
	edit := func(f func(b record.Batch) record.Batch) record.Batch {
		return f(append(record.Batch(nil), good...))
	}
	cases := []struct {
		name string
		b    record.Batch
		want error
	}{
		{"empty", record.Batch{}, record.ErrShort},
		{"header only", good[:record.HeaderSize], record.ErrInvalid},
		{"bad magic", edit(func(b record.Batch) record.Batch { b[20] = 3; return restamp(b) }), record.ErrInvalid},
		{"magic 2 without a Kafka batch", edit(func(b record.Batch) record.Batch { b[20] = 2; return restamp(b) }), record.ErrInvalid},
		{"attributes", edit(func(b record.Batch) record.Batch { b[21] = 1; return restamp(b) }), record.ErrInvalid},
		{"zero records", edit(func(b record.Batch) record.Batch {
			binary.BigEndian.PutUint32(b[30:], 0)
			return restamp(b)
		}), record.ErrInvalid},
		{"more records than bytes", edit(func(b record.Batch) record.Batch {
			binary.BigEndian.PutUint32(b[30:], 2)
			return restamp(b)
		}), record.ErrInvalid},
		{"negative base offset", edit(func(b record.Batch) record.Batch { b.Stamp(-1, 0, 0); return b }), record.ErrInvalid},
		{"negative epoch", edit(func(b record.Batch) record.Batch { b.Stamp(0, -1, 0); return b }), record.ErrInvalid},
		{"key length overruns", edit(func(b record.Batch) record.Batch {
			binary.BigEndian.PutUint32(b[record.HeaderSize:], 1000)
			return restamp(b)
		}), record.ErrInvalid},
		{"negative key length other than -1", edit(func(b record.Batch) record.Batch {
			binary.BigEndian.PutUint32(b[record.HeaderSize:], math.MaxUint32-1)
			return restamp(b)
		}), record.ErrInvalid},
		{"trailing bytes", func() record.Batch {
			b := append(append(record.Batch(nil), good...), 0, 0, 0, 0)
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
			return restamp(b)
		}(), record.ErrInvalid},
		{"bad checksum", edit(func(b record.Batch) record.Batch { b[len(b)-1] ^= 1; return b }), record.ErrChecksum},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.b.Validate(), tc.want)
		})
	}
}

func TestRecordsStopsEarly(t *testing.T) {
	b := mustBatch(t, []record.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	var seen []string
	require.NoError(t, b.Records(func(r *record.Record) bool {
		seen = append(seen, string(r.Value))
		return len(seen) < 2
	}))
	assert.Equal(t, []string{"a", "b"}, seen)
}

func TestBatchesRejectsTrailingGarbage(t *testing.T) {
	b := mustBatch(t, []record.Record{{Value: []byte("a")}})
	err := record.Batches(append(append([]byte(nil), b...), 1, 2, 3), func(record.Batch) bool { return true })
	assert.ErrorIs(t, err, record.ErrShort)
}

// TestRecordsKeptCopiesStayValid: the slices of the records Records hands
// out alias the batch, so a caller may keep copies of them while the batch
// lives, headers included.
func TestRecordsKeptCopiesStayValid(t *testing.T) {
	want := []record.Record{
		{Key: []byte("k1"), Value: []byte("a"), Headers: []record.Header{{Key: "first", Value: []byte("1")}}},
		{Key: nil, Value: []byte("b"), Headers: []record.Header{{Key: "second", Value: []byte("2")}, {Key: "x", Value: nil}}},
		{Key: []byte("k3"), Value: []byte("c")},
		{Key: []byte{}, Value: []byte("d"), Headers: []record.Header{{Key: "fourth", Value: []byte("4")}}},
	}
	b := mustBatch(t, want)
	var kept []record.Record
	require.NoError(t, b.Records(func(r *record.Record) bool {
		kept = append(kept, *r)
		return true
	}))
	assertSameRecords(t, want, kept)
}

// TestSplitFramesWithoutTheChecksum: Split hands out the same batches as
// Batches, refuses what does not frame, and leaves the checksum to the
// batch's Validate.
func TestSplitFramesWithoutTheChecksum(t *testing.T) {
	a := mustBatch(t, []record.Record{{Value: []byte("a")}})
	b := mustBatch(t, []record.Record{{Value: []byte("b")}, {Value: []byte("c")}})
	buf := append(append([]byte(nil), a...), b...)
	var split, batches []record.Batch
	require.NoError(t, record.Split(buf, func(b record.Batch) bool { split = append(split, b); return true }))
	require.NoError(t, record.Batches(buf, func(b record.Batch) bool { batches = append(batches, b); return true }))
	assert.Equal(t, batches, split)

	assert.ErrorIs(t, record.Split(append(append([]byte(nil), a...), 1, 2, 3), func(record.Batch) bool { return true }), record.ErrShort)
	bad := append([]byte(nil), buf...)
	bad[record.MagicOffset] = 9
	assert.ErrorIs(t, record.Split(bad, func(record.Batch) bool { return true }), record.ErrInvalid)

	// A flipped bit in a record: framed all the same, refused by Validate.
	corrupt := append([]byte(nil), buf...)
	corrupt[len(a)-1] ^= 1
	var got []record.Batch
	require.NoError(t, record.Split(corrupt, func(b record.Batch) bool { got = append(got, b); return true }))
	require.Len(t, got, 2)
	assert.ErrorIs(t, got[0].Validate(), record.ErrChecksum)
	assert.NoError(t, got[1].Validate())
	assert.ErrorIs(t, record.Batches(corrupt, func(record.Batch) bool { return true }), record.ErrChecksum)
}
