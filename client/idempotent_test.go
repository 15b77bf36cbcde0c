package client

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// An idempotent producer's batch whose answer is lost is sent again, and
// the leader answers the copy with the original's offsets: the record is
// in the partition once, acknowledged at the offset it has. The bytes
// sent again are the original's. (A producer without idempotence reports
// ErrUnknownOutcome here: TestProducerUnknownOutcomeIsNotRetried.)
func TestIdempotentProducerResendsWhenTheAnswerIsLost(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		fc := newFakeCluster(t, 1)
		fc.addTopic("t", 1)
		g := newGate()
		defer g.open()
		var held atomic.Int32
		fc.set(func(fc *fakeCluster) {
			fc.hold = func(_ int32, values []string) <-chan struct{} {
				if values[0] == "slow" && held.Add(1) == 1 {
					return g.wait() // the first attempt's answer never comes
				}
				return nil
			}
		})
		c := newTestClient(t, fc, nil)
		p := newTestProducer(t, c, ProducerConfig{Idempotent: true, RequestTimeout: 300 * time.Millisecond})
		ctx := testCtx(t)

		first, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("first")})
		require.NoError(t, err)
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("slow")})
		require.NoError(t, err, "the attempt whose answer was lost is sent again")
		assert.Equal(t, int64(1), ack.Offset, "acknowledged at the original's offset")
		next, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("next")})
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 1, 2}, []int64{first.Offset, ack.Offset, next.Offset})

		assert.Equal(t, []string{"first", "slow", "next"}, fc.values("t", 0), "each record once")
		fc.mu.Lock()
		defer fc.mu.Unlock()
		assert.GreaterOrEqual(t, fc.duplicates, 1, "the copy was answered as a duplicate")
		assert.Zero(t, fc.changed, "a batch sent again has the original's bytes")
	})

	t.Run("connection closed after the request was written", func(t *testing.T) {
		fc := newFakeCluster(t, 1)
		fc.addTopic("t", 1)
		never := make(chan struct{})
		var held atomic.Int32
		fc.set(func(fc *fakeCluster) {
			fc.hold = func(_ int32, values []string) <-chan struct{} {
				if values[0] == "doomed" && held.Add(1) == 1 {
					return never
				}
				return nil
			}
		})
		c := newTestClient(t, fc, nil)
		p := newTestProducer(t, c, ProducerConfig{Idempotent: true})
		ctx := testCtx(t)

		done := make(chan result, 1)
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte("doomed")}, func(a Ack, err error) { done <- result{a, err} })
		require.Eventually(t, func() bool { return fc.appendedCount("doomed") == 1 }, 5*time.Second, time.Millisecond)
		fc.restart(1)
		select {
		case r := <-done:
			require.NoError(t, r.err, "sent again on a new connection and answered as the original")
			assert.Equal(t, int64(0), r.ack.Offset)
		case <-ctx.Done():
			t.Fatal("no outcome for the record whose connection closed")
		}
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("after")})
		require.NoError(t, err)
		assert.Equal(t, int64(1), ack.Offset)
		assert.Equal(t, []string{"doomed", "after"}, fc.values("t", 0))
	})
}

// A batch refused before the append (Busy) while the next one was already
// sent: the leader refuses that one out of sequence, and both are sent
// again, in order. A producer without idempotence gives the first up
// (TestProducerDoesNotRetryPastALaterAppend).
func TestIdempotentProducerRetriesOutOfOrderInOrder(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	cSeen := newGate()
	var refused atomic.Bool
	fc.set(func(fc *fakeCluster) {
		fc.produceErr = func(_ int32, values []string) error {
			if values[0] == "b" && refused.CompareAndSwap(false, true) {
				return fmt.Errorf("%w: injected", transport.ErrBusy)
			}
			if values[0] == "c" {
				cSeen.open()
			}
			return nil
		}
		fc.hold = func(_ int32, values []string) <-chan struct{} {
			if values[0] == "b" {
				return cSeen.wait() // b's refusal arrives after c was sent
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, Linger: -1, BatchBytes: 1})
	ctx := testCtx(t)
	_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("a")})
	require.NoError(t, err)
	acks := newAckLog()
	for _, v := range []string{"b", "c"} {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Flush(ctx))

	assert.Equal(t, []int64{1, 2}, acks.offsets(t), "both acknowledged, in order")
	assert.Equal(t, []string{"a", "b", "c"}, fc.values("t", 0))
	assert.Equal(t, 5, fc.produceRequests(), "a, b refused, c out of sequence, then b and c again")
}

// A batch given up (its deadline passed while its outcome stayed unknown)
// leaves a gap in the producer id's sequence: the partition goes on with
// a new producer id at sequence 0, so the records after it are taken.
func TestIdempotentProducerContinuesWithANewProducerIDAfterAGap(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.set(func(fc *fakeCluster) {
		fc.produceErr = func(_ int32, values []string) error {
			if values[0] == "lost" {
				return fmt.Errorf("%w: injected", transport.ErrStorageFailed) // its outcome is unknown
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, RetryBackoff: 10 * time.Millisecond})
	ctx := testCtx(t)
	_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("a")})
	require.NoError(t, err)

	lostCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = p.Send(lostCtx, ProducerRecord{Topic: "t", Value: []byte("lost")})
	require.ErrorIs(t, err, ErrUnknownOutcome)
	assert.ErrorIs(t, err, transport.ErrStorageFailed)
	assert.Contains(t, err.Error(), "not sent again: its deadline leaves no time for another attempt")

	for i, v := range []string{"after", "again"} {
		ack, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte(v)})
		require.NoError(t, err, "the records after the gap are taken")
		assert.Equal(t, int64(1+i), ack.Offset)
	}
	assert.Equal(t, []string{"a", "after", "again"}, fc.values("t", 0))
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Len(t, fc.idempotent, 3)
	assert.Equal(t, fc.idempotent[0].producer, int64(1000))
	assert.Equal(t, []int64{1001, 1001}, []int64{fc.idempotent[1].producer, fc.idempotent[2].producer}, "a new producer id")
	assert.Equal(t, []int32{0, 1}, []int32{fc.idempotent[1].first, fc.idempotent[2].first}, "from sequence 0")
	assert.Equal(t, 2, fc.requests[1][transport.APIInitProducerID])
}

// An idempotent producer's batches carry its producer id and consecutive
// sequences (a batch's first is the last one's plus its records); their
// records read as the leader's append time, as a plain producer's do.
func TestIdempotentProducerSequencesBatches(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 2)
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, BatchBytes: 200})
	acks := newAckLog()
	vals := values("v", 60)
	for _, v := range vals {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v), Partition: 1, ManualPartition: true}, acks.cb(v))
	}
	ack, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("p0"), Partition: 0, ManualPartition: true})
	require.NoError(t, err)
	require.NoError(t, p.Flush(testCtx(t)))
	assert.Equal(t, seq(60), acks.offsets(t))
	assert.Equal(t, vals, fc.values("t", 1))

	fc.mu.Lock()
	batches := fc.idempotent
	fc.mu.Unlock()
	require.Greater(t, len(batches), 2, "several batches")
	next := map[int64]int32{}
	for _, b := range batches {
		assert.Equal(t, int64(1000), b.producer, "one producer id for every partition")
		part := b.resp.Partition
		assert.Equal(t, next[int64(part)], b.first, "partition %d: sequences follow each other", part)
		next[int64(part)] = b.last + 1
	}
	assert.Equal(t, int32(60), next[1])
	assert.Equal(t, int32(1), next[0], "each partition has its own sequence")

	cons, err := NewConsumer(c, "t", 0, ConsumerConfig{})
	require.NoError(t, err)
	recs, err := cons.Poll(testCtx(t), 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, ack.Timestamp, recs[0].Timestamp, "the leader's append time")
}

// Sequences wrap past 2^31-1 to 0, as the leader counts them.
func TestNextSequenceWraps(t *testing.T) {
	for _, c := range []struct {
		s    int32
		n    int
		want int32
	}{
		{0, 1, 1}, {5, 10, 15}, {math.MaxInt32 - 2, 3, 0}, {math.MaxInt32, 1, 0}, {math.MaxInt32 - 1, 5, 3},
	} {
		assert.Equal(t, c.want, nextSequence(c.s, c.n), "%d after %d records", c.s, c.n)
	}
}

// NewProducer with idempotence needs a producer id: a cluster older than
// the client, which hands out none, is UnsupportedVersion; more than five
// batches in flight per partition cannot be made idempotent.
func TestIdempotentProducerConfig(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.set(func(fc *fakeCluster) { fc.noProducerIDs = true })
	c := newTestClient(t, fc, nil)
	_, err := NewProducer(c, ProducerConfig{Idempotent: true})
	require.ErrorIs(t, err, transport.ErrUnsupportedVersion)
	assert.Contains(t, err.Error(), "no idempotent producer on this cluster")

	_, err = NewProducer(c, ProducerConfig{Idempotent: true, MaxInFlightPerPartition: 6})
	assert.ErrorIs(t, err, ErrInvalidConfig)

	p, err := NewProducer(c, ProducerConfig{MaxInFlightPerPartition: 6})
	require.NoError(t, err, "a producer without idempotence needs no producer id")
	p.Close()
}

// A batch given up after an attempt whose outcome was unknown ends with
// ErrUnknownOutcome, whatever its last attempt's error: that attempt may
// have appended it (here it did), so ErrNotAppended would be false.
func TestIdempotentProducerGivenUpAfterAnUnknownOutcome(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	var attempts, held atomic.Int32
	fc.set(func(fc *fakeCluster) {
		fc.hold = func(_ int32, values []string) <-chan struct{} {
			if values[0] == "x" && held.Add(1) == 1 {
				return g.wait() // the first attempt is appended; its answer never comes
			}
			return nil
		}
		fc.produceErr = func(_ int32, values []string) error {
			if values[0] == "x" && attempts.Add(1) > 1 {
				return fmt.Errorf("%w: injected", transport.ErrNotLeader) // provably not appended, this time
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, RequestTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond)
	defer cancel()
	_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("x")})
	require.ErrorIs(t, err, ErrUnknownOutcome)
	assert.NotErrorIs(t, err, ErrNotAppended)
	assert.ErrorIs(t, err, transport.ErrNotLeader, "the last attempt's error")
	assert.Contains(t, err.Error(), "an earlier attempt's outcome is unknown")
	assert.Greater(t, attempts.Load(), int32(1), "sent again")
	assert.Equal(t, []string{"x"}, fc.values("t", 0))
}

// A batch that may have been appended is sent again even when a batch
// after it was appended meanwhile: here both first attempts' answers are
// lost, the second attempt of the first is refused (Busy) while the
// second's is answered as a duplicate; the first is then sent a third
// time and answered as the duplicate it is, at its offset, before the
// second's.
func TestIdempotentProducerResendsAMaybeAppendedBatchBehindAnAppendedOne(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	var heldA, heldB, triedA atomic.Int32
	fc.set(func(fc *fakeCluster) {
		fc.hold = func(_ int32, values []string) <-chan struct{} {
			if values[0] == "a" && heldA.Add(1) == 1 || values[0] == "b" && heldB.Add(1) == 1 {
				return g.wait() // appended; the answer never comes
			}
			return nil
		}
		fc.produceErr = func(_ int32, values []string) error {
			if values[0] == "a" && triedA.Add(1) == 2 {
				return fmt.Errorf("%w: injected", transport.ErrBusy)
			}
			return nil
		}
	})
	c := newTestClient(t, fc, nil)
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, Linger: -1, BatchBytes: 1, RequestTimeout: 300 * time.Millisecond})
	acks := newAckLog()
	for _, v := range []string{"a", "b"} {
		p.SendAsync(ProducerRecord{Topic: "t", Value: []byte(v)}, acks.cb(v))
	}
	require.NoError(t, p.Flush(testCtx(t)))
	assert.Equal(t, []int64{0, 1}, acks.offsets(t))
	assert.Equal(t, int32(3), triedA.Load(), "a was sent three times")
	assert.Equal(t, []string{"a", "b"}, fc.values("t", 0))
}

// An idempotent producer's DeliveryTimeout is by default at least four
// RequestTimeouts, whatever the client's RetryTimeout: an attempt that
// timed out leaves time to send the batch again.
func TestIdempotentProducerDeliveryTimeoutOutlastsARequest(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	g := newGate()
	defer g.open()
	var held atomic.Int32
	fc.set(func(fc *fakeCluster) {
		fc.hold = func(_ int32, values []string) <-chan struct{} {
			if held.Add(1) == 1 {
				return g.wait()
			}
			return nil
		}
	})
	c := newTestClient(t, fc, func(cfg *Config) { cfg.RetryTimeout = 250 * time.Millisecond })
	p := newTestProducer(t, c, ProducerConfig{Idempotent: true, RequestTimeout: 300 * time.Millisecond})
	assert.Equal(t, 1200*time.Millisecond, p.cfg.DeliveryTimeout)
	ack, err := p.Send(context.Background(), ProducerRecord{Topic: "t", Value: []byte("x")}) // no deadline: DeliveryTimeout's
	require.NoError(t, err, "sent again after the first attempt timed out")
	assert.Equal(t, int64(0), ack.Offset)

	plain, err := NewProducer(c, ProducerConfig{RequestTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer plain.Close()
	assert.Equal(t, 250*time.Millisecond, plain.cfg.DeliveryTimeout, "without idempotence, the client's RetryTimeout")
}
