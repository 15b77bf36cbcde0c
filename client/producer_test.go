package client

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

// ackLog collects the outcomes of SendAsync callbacks in the order the
// callbacks ran.
type ackLog struct {
	mu    sync.Mutex
	acks  []Ack
	errs  []error
	byVal map[string]result
}

type result struct {
	ack Ack
	err error
}

func newAckLog() *ackLog { return &ackLog{byVal: make(map[string]result)} }

func (l *ackLog) cb(value string) func(Ack, error) {
	return func(a Ack, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.acks = append(l.acks, a)
		l.errs = append(l.errs, err)
		l.byVal[value] = result{a, err}
	}
}

func (l *ackLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

func (l *ackLog) get(value string) (result, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.byVal[value]
	return r, ok
}

func (l *ackLog) offsets(t *testing.T) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, len(l.acks))
	for i, a := range l.acks {
		require.NoError(t, l.errs[i])
		out[i] = a.Offset
	}
	return out
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// gate holds produce answers until opened.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate() *gate                  { return &gate{ch: make(chan struct{})} }
func (g *gate) open()                 { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait() <-chan struct{} { return g.ch }

func TestProducerKeyRouting(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 4)
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1})
	ctx := testCtx(t)

	send := func(rec ProducerRecord) Ack {
		t.Helper()
		rec.Topic = "t"
		ack, err := p.Send(ctx, rec)
		require.NoError(t, err)
		return ack
	}

	t.Run("keys match the vectors, every time", func(t *testing.T) {
		for _, tc := range []struct {
			key  []byte
			want int32
		}{{[]byte("user-1"), 3}, {[]byte("user-2"), 3}, {[]byte{}, 1}} {
			for range 3 {
				ack := send(ProducerRecord{Key: tc.key, Value: []byte("v")})
				assert.Equal(t, tc.want, ack.Partition, "key %q", tc.key)
				assert.Equal(t, int32(Partition(tc.key, 4)), ack.Partition)
			}
		}
	})

	t.Run("nil keys go round robin, empty keys do not", func(t *testing.T) {
		var nilKey, emptyKey []int32
		for range 8 {
			nilKey = append(nilKey, send(ProducerRecord{Value: []byte("n")}).Partition)
			emptyKey = append(emptyKey, send(ProducerRecord{Key: []byte{}, Value: []byte("e")}).Partition)
		}
		assert.Equal(t, []int32{0, 1, 2, 3, 0, 1, 2, 3}, nilKey)
		assert.Equal(t, []int32{1, 1, 1, 1, 1, 1, 1, 1}, emptyKey)
	})

	t.Run("an explicit partition overrides the key", func(t *testing.T) {
		ack := send(ProducerRecord{Key: []byte("user-1"), Value: []byte("m"), Partition: 0, ManualPartition: true})
		assert.Equal(t, int32(0), ack.Partition)
		_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("x"), Partition: 4, ManualPartition: true})
		assert.ErrorIs(t, err, transport.ErrUnknownPartition)
	})

	t.Run("the broker stored each record where the ack says", func(t *testing.T) {
		count := func(partition int) map[string]int {
			m := map[string]int{}
			for _, v := range fc.values("t", partition) {
				m[v]++
			}
			return m
		}
		assert.Equal(t, map[string]int{"n": 2, "m": 1}, count(0))
		assert.Equal(t, map[string]int{"v": 3, "n": 2, "e": 8}, count(1))
		assert.Equal(t, map[string]int{"n": 2}, count(2))
		assert.Equal(t, map[string]int{"v": 6, "n": 2}, count(3))
	})

	t.Run("an unknown topic fails before sending", func(t *testing.T) {
		_, err := p.Send(ctx, ProducerRecord{Topic: "nope", Value: []byte("x")})
		assert.ErrorIs(t, err, transport.ErrUnknownTopic)
	})
}

func TestProducerSendReturnsTheAck(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.moveLeader("t", 0, 1) // epoch 2
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{})
	ctx := testCtx(t)

	before := time.Now().UnixMilli()
	for i, v := range []string{"a", "b", "c"} {
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte(v)})
		require.NoError(t, err)
		assert.Equal(t, Ack{Topic: "t", Partition: 0, Offset: int64(i), LeaderID: 1, LeaderEpoch: 2, Timestamp: ack.Timestamp}, ack)
		assert.GreaterOrEqual(t, ack.Timestamp, before)
	}
	assert.Equal(t, []string{"a", "b", "c"}, fc.values("t", 0))
}

func TestProducerLinger(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)

	t.Run("a lingering batch is sent when linger ends", func(t *testing.T) {
		p := newTestProducer(t, c, ProducerConfig{Linger: 20 * time.Millisecond})
		acks := newAckLog()
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte("one")}, acks.cb("one"))
		require.Eventually(t, func() bool { return acks.len() == 1 }, 5*time.Second, time.Millisecond)
		assert.Equal(t, 1, fc.produceRequests())
	})

	t.Run("records wait for linger and go in one batch on flush", func(t *testing.T) {
		before := fc.produceRequests()
		p := newTestProducer(t, c, ProducerConfig{Linger: time.Hour})
		acks := newAckLog()
		for _, v := range values("l", 10) {
			p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
		}
		require.Never(t, func() bool { return acks.len() > 0 || fc.produceRequests() > before }, 100*time.Millisecond, 5*time.Millisecond)
		require.NoError(t, p.Flush(testCtx(t)))
		assert.Equal(t, 10, acks.len(), "Flush returns after the callbacks")
		assert.Equal(t, before+1, fc.produceRequests())
		assert.Equal(t, seq(10), subtract(acks.offsets(t), 1))
	})
}

func subtract(xs []int64, d int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = x - d
	}
	return out
}

func TestProducerBatchBytes(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	rec := record.Record{Value: []byte("0123456789")}
	p := newTestProducer(t, c, ProducerConfig{Linger: time.Hour, BatchBytes: record.HeaderSize + 3*rec.EncodedSize()})
	acks := newAckLog()
	for i := range 10 {
		v := fmt.Sprintf("012345678%d", i)
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Flush(testCtx(t)))
	fc.mu.Lock()
	sizes := fc.batchSizes
	fc.mu.Unlock()
	assert.Equal(t, []int{3, 3, 3, 1}, sizes)
	assert.Equal(t, seq(10), acks.offsets(t))
}

func TestProducerPipelinedOrdering(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 4))
	fc.set(func(fc *fakeCluster) {
		fc.replyDelay = func() time.Duration {
			rngMu.Lock()
			defer rngMu.Unlock()
			return time.Duration(rng.IntN(3000)) * time.Microsecond
		}
	})
	c := newTestClient(t, fc, nil)
	rec := record.Record{Value: []byte("v0000")}
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BatchBytes: record.HeaderSize + 5*rec.EncodedSize(), MaxInFlightPerPartition: 5})

	vals := values("v", 2000)
	acks := newAckLog()
	for _, v := range vals {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Flush(testCtx(t)))

	assert.Equal(t, seq(len(vals)), acks.offsets(t), "callbacks run in send order with increasing offsets")
	assert.Equal(t, vals, fc.values("t", 0), "the log holds the records in send order")
	fc.mu.Lock()
	defer fc.mu.Unlock()
	assert.Greater(t, fc.maxInflight, 1, "requests were pipelined")
	assert.LessOrEqual(t, fc.maxInflight, 5)
	assert.Greater(t, len(fc.batchSizes), 400/2)
}

func TestProducerMaxInFlight(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	fc.set(func(fc *fakeCluster) { fc.hold = func(int32, []string) <-chan struct{} { return g.wait() } })
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BatchBytes: 1, MaxInFlightPerPartition: 3})

	acks := newAckLog()
	for _, v := range values("m", 8) {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.Eventually(t, func() bool { return fc.produceRequests() == 3 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return fc.produceRequests() > 3 }, 100*time.Millisecond, 5*time.Millisecond)
	g.open()
	require.NoError(t, p.Flush(testCtx(t)))
	assert.Equal(t, seq(8), acks.offsets(t))
	assert.Equal(t, values("m", 8), fc.values("t", 0))
}

func TestProducerNotLeaderRetriesInOrder(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 1) // led by broker 1
	g := newGate()
	fc.set(func(fc *fakeCluster) { fc.hold = func(int32, []string) <-chan struct{} { return g.wait() } })
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BatchBytes: 1, MaxInFlightPerPartition: 5})
	vals := values("r", 5)
	acks := newAckLog()

	// r0 and r1 are appended by broker 1 but their answers are held.
	for _, v := range vals[:2] {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.Eventually(t, func() bool { return fc.appendedCount(vals[1]) == 1 }, 5*time.Second, time.Millisecond)
	// Broker 2 takes over; r2..r4 reach broker 1 and are refused.
	fc.moveLeader("t", 0, 2)
	metaBefore := fc.count(1, transport.APIMetadata) + fc.count(2, transport.APIMetadata)
	for _, v := range vals[2:] {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.Eventually(t, func() bool { return fc.count(1, transport.APIProduce) == 5 }, 5*time.Second, time.Millisecond)
	g.open()
	require.NoError(t, p.Flush(testCtx(t)))

	assert.Equal(t, seq(5), acks.offsets(t))
	for i, v := range vals {
		r, ok := acks.get(v)
		require.True(t, ok)
		want := int32(1)
		if i >= 2 {
			want = 2
		}
		assert.Equal(t, want, r.ack.LeaderID, v)
		assert.Equal(t, 1, fc.appendedCount(v), "%s appended once", v)
	}
	assert.Equal(t, vals, fc.values("t", 0))
	assert.Equal(t, 3, fc.count(2, transport.APIProduce), "only the refused batches were sent again")
	assert.Greater(t, fc.count(1, transport.APIMetadata)+fc.count(2, transport.APIMetadata), metaBefore, "metadata was refreshed")
}

func TestProducerDoesNotRetryPastALaterAppend(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	fc.set(func(fc *fakeCluster) {
		fc.hold = func(int32, []string) <-chan struct{} { return g.wait() }
		fc.produceErr = func(_ int32, values []string) error {
			if values[0] == "b" {
				return fmt.Errorf("%w: injected", transport.ErrNotLeader)
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BatchBytes: 1})
	acks := newAckLog()
	for _, v := range []string{"a", "b", "c"} {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.Eventually(t, func() bool { return fc.produceRequests() == 3 }, 5*time.Second, time.Millisecond)
	g.open()
	require.NoError(t, p.Flush(testCtx(t)))

	a, _ := acks.get("a")
	b, _ := acks.get("b")
	cc, _ := acks.get("c")
	require.NoError(t, a.err)
	require.NoError(t, cc.err)
	assert.Equal(t, int64(0), a.ack.Offset)
	assert.Equal(t, int64(1), cc.ack.Offset)
	assert.ErrorIs(t, b.err, transport.ErrNotLeader)
	assert.ErrorIs(t, b.err, ErrNotAppended)
	assert.Equal(t, 3, fc.produceRequests(), "b is not sent again after c was appended")
	assert.Equal(t, []string{"a", "c"}, fc.values("t", 0))
}

func TestProducerRetriesAfterFailedDial(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 2)
	c := newTestClient(t, fc, nil) // partition 1 is led by broker 2
	p := newTestProducer(t, c, ProducerConfig{})
	fc.stop(2)
	var once sync.Once
	fc.set(func(fc *fakeCluster) {
		fc.onMetadata = func() { once.Do(func() { fc.moveLeader("t", 1, 1) }) }
	})

	ack, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("x"), Partition: 1, ManualPartition: true})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ack.LeaderID)
	assert.Equal(t, int64(0), ack.Offset)
	assert.Equal(t, 1, fc.appendedCount("x"))
}

func TestProducerRetriesAreBounded(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.set(func(fc *fakeCluster) {
		fc.produceErr = func(int32, []string) error { return fmt.Errorf("%w: injected", transport.ErrNotLeader) }
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Retries: 2, RetryBackoff: time.Millisecond})
	_, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("x")})
	assert.ErrorIs(t, err, transport.ErrNotLeader)
	assert.ErrorIs(t, err, ErrNotAppended)
	assert.Equal(t, 3, fc.produceRequests())
}

func TestProducerFinalErrorsAreNotRetried(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{})
	fc.seal("t")
	_, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("x")})
	assert.ErrorIs(t, err, transport.ErrTopicSealed)
	assert.ErrorIs(t, err, ErrNotAppended)
	assert.Equal(t, 1, fc.produceRequests())
}

func TestProducerUnknownOutcomeIsNotRetried(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		fc := newFakeCluster(t, 1)
		fc.addTopic("t", 1)
		g := newGate()
		defer g.open()
		fc.set(func(fc *fakeCluster) {
			fc.hold = func(_ int32, values []string) <-chan struct{} {
				if values[0] == "slow" {
					return g.wait()
				}
				return nil
			}
		})
		c := newTestClient(t, fc, nil)
		p := newTestProducer(t, c, ProducerConfig{RequestTimeout: 300 * time.Millisecond})
		ctx := testCtx(t)

		_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("slow")})
		assert.ErrorIs(t, err, transport.ErrTimeout)
		assert.ErrorIs(t, err, ErrUnknownOutcome)
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("next")})
		require.NoError(t, err)
		assert.Equal(t, int64(1), ack.Offset)
		assert.Equal(t, 1, fc.appendedCount("slow"))
		assert.Equal(t, 2, fc.produceRequests())
		assert.Equal(t, []string{"slow", "next"}, fc.values("t", 0))
	})

	t.Run("connection closed after the request was written", func(t *testing.T) {
		fc := newFakeCluster(t, 1)
		fc.addTopic("t", 1)
		never := make(chan struct{})
		fc.set(func(fc *fakeCluster) {
			fc.hold = func(_ int32, values []string) <-chan struct{} {
				if values[0] == "doomed" {
					return never
				}
				return nil
			}
		})
		c := newTestClient(t, fc, nil)
		p := newTestProducer(t, c, ProducerConfig{})
		ctx := testCtx(t)

		done := make(chan error, 1)
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte("doomed")}, func(_ Ack, err error) { done <- err })
		require.Eventually(t, func() bool { return fc.appendedCount("doomed") == 1 }, 5*time.Second, time.Millisecond)
		fc.restart(1)
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrUnknownOutcome)
			assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
		case <-ctx.Done():
			t.Fatal("no outcome for the record whose connection closed")
		}
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("after")})
		require.NoError(t, err)
		assert.Equal(t, int64(1), ack.Offset)
		assert.Equal(t, 1, fc.appendedCount("doomed"))
		assert.Equal(t, []string{"doomed", "after"}, fc.values("t", 0))
	})
}

func TestProducerCloseFlushes(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	p, err := NewProducer(c, ProducerConfig{Linger: time.Hour})
	require.NoError(t, err)
	acks := newAckLog()
	vals := values("c", 5)
	for _, v := range vals {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Close())
	assert.Equal(t, seq(5), acks.offsets(t), "every callback ran before Close returned")
	assert.Equal(t, vals, fc.values("t", 0))
	require.NoError(t, p.Close())

	var lateErr error
	p.SendAsync(ProducerRecord{Topic: "t", Value: []byte("late")}, func(_ Ack, err error) { lateErr = err })
	assert.ErrorIs(t, lateErr, ErrClosed)
	_, err = p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("late")})
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, p.Flush(testCtx(t)))
}

func TestProducerRejectsRecordsTooLargeForARequest(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{MaxRequestBytes: 4096})
	_, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte(strings.Repeat("x", 4096))})
	assert.ErrorIs(t, err, transport.ErrMessageTooLarge)
	assert.Equal(t, 0, fc.produceRequests())
}

func TestProducerRefusesBatchesOverTheClusterLimit(t *testing.T) {
	const limit = 8 << 10
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.set(func(fc *fakeCluster) { fc.maxBatchBytes = limit })
	c := newTestClient(t, fc, nil)
	md, err := c.Metadata(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, limit, md.MaxBatchBytes)

	p := newTestProducer(t, c, ProducerConfig{Linger: time.Hour, BatchBytes: 1 << 20})
	rec := record.Record{Value: make([]byte, limit)}
	_, err = p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: rec.Value})
	require.ErrorIs(t, err, transport.ErrMessageTooLarge)
	assert.Equal(t, fmt.Sprintf("produce to t: MessageTooLarge: a batch of %d bytes exceeds the cluster's limit of %d bytes (--max-batch-bytes)",
		rec.EncodedSize()+record.HeaderSize, limit), err.Error())
	assert.Equal(t, 0, fc.produceRequests(), "refused before sending")

	// Records that fit are batched within the limit, however large
	// BatchBytes is.
	acks := newAckLog()
	var vals []string
	for i := range 40 {
		v := fmt.Sprintf("%03d%s", i, strings.Repeat("x", 1000))
		vals = append(vals, v)
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Flush(testCtx(t)))
	assert.Equal(t, vals, fc.values("t", 0))
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.NotEmpty(t, fc.batchSizes)
	for _, n := range fc.batchSizes {
		assert.LessOrEqual(t, n, 8, "a batch of more than 8 records of 1 KiB is over the 8 KiB limit")
	}
}

func TestProducerRetriesBusy(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	busy := 2
	fc.set(func(fc *fakeCluster) {
		fc.produceErr = func(int32, []string) error {
			if busy > 0 {
				busy--
				return fmt.Errorf("%w: the node's request memory (1 bytes) is in use; retry", transport.ErrBusy)
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1})
	ack, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("v")})
	require.NoError(t, err)
	assert.Equal(t, int64(0), ack.Offset)
	assert.Equal(t, []string{"v"}, fc.values("t", 0), "appended once")
	assert.Equal(t, 3, fc.produceRequests())
}

func TestProducerBufferBytesBlocks(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	fc.set(func(fc *fakeCluster) { fc.hold = func(int32, []string) <-chan struct{} { return g.wait() } })
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BufferBytes: 110, MaxBlock: 50 * time.Millisecond})
	var errs []error
	var mu sync.Mutex
	for range 3 {
		p.SendAsync(ProducerRecord{Topic: "t", Value: make([]byte, 40)}, func(_ Ack, err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		})
	}
	mu.Lock()
	require.Len(t, errs, 1, "the third record finds no room")
	assert.True(t, errors.Is(errs[0], ErrBufferFull))
	mu.Unlock()
	g.open()
	require.NoError(t, p.Flush(testCtx(t)))
}

func TestProducerKeepsInFlightBatchesOnOneConnection(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	fc.set(func(fc *fakeCluster) { fc.hold = func(int32, []string) <-chan struct{} { return g.wait() } })
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Linger: -1, BatchBytes: 1})
	ctx := testCtx(t)
	acks := newAckLog()
	for _, v := range []string{"r0", "r1"} {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.Eventually(t, func() bool { return fc.appendedCount("r1") == 1 }, 5*time.Second, time.Millisecond)

	// Someone else's refresh tells the client that broker 2 leads now.
	fc.moveLeader("t", 0, 2)
	require.NoError(t, c.RefreshMetadata(ctx, "t"))
	p.SendAsync(ProducerRecord{Topic: "t", Value: []byte("r2")}, acks.cb("r2"))
	require.Never(t, func() bool { return fc.produceRequests() > 2 }, 100*time.Millisecond, time.Millisecond,
		"r2 waits until the batches in flight to broker 1 are answered")
	g.open()
	require.NoError(t, p.Flush(ctx))
	assert.Equal(t, seq(3), acks.offsets(t))
	r2, _ := acks.get("r2")
	assert.Equal(t, int32(2), r2.ack.LeaderID)
	assert.Equal(t, 2, fc.count(1, transport.APIProduce))
	assert.Equal(t, 1, fc.count(2, transport.APIProduce))
}

func TestClassifyTellsNeverSentFromUnknown(t *testing.T) {
	dial := fmt.Errorf("%w: dial 127.0.0.1:1: connection refused", transport.ErrBrokerNotAvailable)
	tests := []struct {
		name string
		err  error
		want outcome
	}{
		{"answered", nil, appended},
		{"Send refused: connection closed", fmt.Errorf("%w: 127.0.0.1:1: connection closed: EOF", transport.ErrNotSent), notAppended},
		{"Send refused: deadline before the write", fmt.Errorf("%w: %w", transport.ErrNotSent, transport.ErrTimeout), notAppended},
		{"dial failure, as connect returns it", fmt.Errorf("%w: %w", transport.ErrNotSent, dial), notAppended},
		{"Wait: connection closed", fmt.Errorf("%w: 127.0.0.1:1: EOF", transport.ErrConnClosed), unknown},
		{"Wait: deadline", fmt.Errorf("%w: Produce: no response before the deadline", transport.ErrTimeout), unknown},
		{"broker answered BrokerNotAvailable", transport.ToWire(transport.ErrBrokerNotAvailable), unknown},
		{"broker answered NotLeader", transport.ToWire(transport.ErrNotLeader), notAppended},
		{"broker answered TopicSealed", transport.ToWire(transport.ErrTopicSealed), rejected},
		{"client closed", ErrClosed, rejected},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, classify(tc.err), tc.name)
	}
}

// TestProducerEncodesOnlyTheBatchesItSends: records waiting behind a full
// in-flight window stay as the caller gave them; a batch is encoded (its
// values copied into a buffer) when it is sent, so a queue of megabytes
// of records sharing one value costs no copy of them.
func TestProducerEncodesOnlyTheBatchesItSends(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	fc.set(func(fc *fakeCluster) {
		fc.hold = func(int32, []string) <-chan struct{} { return g.wait() }
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{MaxInFlightPerPartition: 1, BatchBytes: 64 << 10, Linger: time.Millisecond})
	value := bytes.Repeat([]byte("v"), 1024)
	const records = 8 << 10 // 8 MiB of values, about 130 batches
	var acked atomic.Int64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	for range records {
		p.SendAsync(ProducerRecord{Topic: "t", Value: value}, func(_ Ack, err error) {
			if err == nil {
				acked.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return fc.produceRequests() >= 1 }, 10*time.Second, time.Millisecond)
	// Held for a second: every batch is sealed and queued by then. The
	// records themselves take about 1.5 MiB (what the producer keeps of
	// each); encoded copies of the queue would add 8 MiB.
	var grew uint64
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		grew = max(grew, ms.HeapAlloc-min(base, ms.HeapAlloc))
	}
	assert.Less(t, grew, uint64(4<<20), "the heap grew by %d bytes with %d records queued", grew, records)
	g.open()
	require.NoError(t, p.Flush(testCtx(t)))
	assert.Equal(t, int64(records), acked.Load())
	assert.Len(t, fc.values("t", 0), records)
}
