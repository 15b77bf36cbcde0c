package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

func recordValues(recs []record.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func recordOffsets(recs []record.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func newTestConsumer(t *testing.T, fc *fakeCluster, topic string, partition int32) *Consumer {
	t.Helper()
	cons, err := NewConsumer(newTestClient(t, fc, nil), topic, partition, ConsumerConfig{})
	require.NoError(t, err)
	return cons
}

func TestConsumerPollAndSeek(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b", "c", "d", "e")
	fc.appendValues("t", 0, "f", "g")
	cons := newTestConsumer(t, fc, "t", 0)
	ctx := testCtx(t)
	assert.Equal(t, int64(-1), cons.HighWatermark())

	recs, err := cons.Poll(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f", "g"}, recordValues(recs))
	assert.Equal(t, seq(7), recordOffsets(recs))
	assert.Equal(t, int64(7), cons.Position())
	assert.Equal(t, int64(7), cons.HighWatermark())

	t.Run("records below the position in a fetched batch are skipped", func(t *testing.T) {
		cons.SeekTo(2)
		recs, err := cons.Poll(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"c", "d", "e", "f", "g"}, recordValues(recs))
		assert.Equal(t, []int64{2, 3, 4, 5, 6}, recordOffsets(recs))
	})

	t.Run("at the high watermark a poll without wait is empty", func(t *testing.T) {
		recs, err := cons.Poll(ctx, 0)
		require.NoError(t, err)
		assert.Empty(t, recs)
		assert.Equal(t, int64(7), cons.Position())
	})

	t.Run("MaxBytes limits a fetch but returns at least one batch", func(t *testing.T) {
		small, err := NewConsumer(cons.c, "t", 0, ConsumerConfig{MaxBytes: 1})
		require.NoError(t, err)
		recs, err := small.Poll(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b", "c", "d", "e"}, recordValues(recs))
		recs, err = small.Poll(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"f", "g"}, recordValues(recs))
	})
}

func TestConsumerRetriesBusy(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a")
	busy := 2
	fc.set(func(fc *fakeCluster) {
		fc.fetchErr = func() error {
			if busy > 0 {
				busy--
				return fmt.Errorf("%w: injected", transport.ErrBusy)
			}
			return nil
		}
	})
	cons := newTestConsumer(t, fc, "t", 0)
	recs, err := cons.Poll(testCtx(t), 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, recordValues(recs))
	assert.Equal(t, 3, fc.count(1, transport.APIFetch))
}

func TestConsumerLongPoll(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "old")
	cons := newTestConsumer(t, fc, "t", 0)
	ctx := testCtx(t)

	t.Run("returns as soon as data arrives", func(t *testing.T) {
		require.NoError(t, cons.SeekToEnd(ctx))
		require.Equal(t, int64(1), cons.Position())
		type polled struct {
			recs []record.Record
			err  error
		}
		done := make(chan polled, 1)
		start := time.Now()
		go func() {
			recs, err := cons.Poll(ctx, time.Minute)
			done <- polled{recs, err}
		}()
		require.Eventually(t, func() bool {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return fc.fetchWaiting == 1
		}, 5*time.Second, time.Millisecond)
		fc.appendValues("t", 0, "new")
		select {
		case p := <-done:
			require.NoError(t, p.err)
			assert.Equal(t, []string{"new"}, recordValues(p.recs))
			assert.Equal(t, []int64{1}, recordOffsets(p.recs))
			assert.Less(t, time.Since(start), 30*time.Second)
		case <-ctx.Done():
			t.Fatal("the long poll did not return when data arrived")
		}
	})

	t.Run("returns empty at the deadline", func(t *testing.T) {
		start := time.Now()
		recs, err := cons.Poll(ctx, 200*time.Millisecond)
		require.NoError(t, err)
		assert.Empty(t, recs)
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
		assert.Equal(t, int64(2), cons.Position())
	})
}

func TestConsumerOffsetOutOfRange(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a")
	cons := newTestConsumer(t, fc, "t", 0)
	cons.SeekTo(100)
	_, err := cons.Poll(testCtx(t), 0)
	assert.ErrorIs(t, err, transport.ErrOffsetOutOfRange)
	assert.Equal(t, int64(100), cons.Position())
}

func TestConsumerCorruptBatch(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b")
	fc.appendValues("t", 0, "c")
	fc.appendValues("t", 0, "d")
	fc.set(func(fc *fakeCluster) { fc.corrupt[2] = true })
	cons := newTestConsumer(t, fc, "t", 0)
	ctx := testCtx(t)

	recs, err := cons.Poll(ctx, 0)
	require.NoError(t, err, "the records before the corrupt batch come first")
	assert.Equal(t, []string{"a", "b"}, recordValues(recs))
	for range 2 {
		recs, err = cons.Poll(ctx, 0)
		assert.Empty(t, recs)
		assert.ErrorIs(t, err, ErrCorruptBatch)
		assert.ErrorIs(t, err, record.ErrChecksum)
		assert.Equal(t, int64(2), cons.Position(), "a corrupt batch is never skipped")
	}
	cons.SeekTo(3)
	recs, err = cons.Poll(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"d"}, recordValues(recs))
}

func TestConsumerSeekToBeginningAndEnd(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b")
	fc.appendValues("t", 0, "c", "d")
	fc.dropBefore("t", 0, 2)
	cons := newTestConsumer(t, fc, "t", 0)
	ctx := testCtx(t)

	_, err := cons.Poll(ctx, 0)
	assert.ErrorIs(t, err, transport.ErrOffsetOutOfRange, "offset 0 is gone")

	require.NoError(t, cons.SeekToBeginning(ctx))
	assert.Equal(t, int64(2), cons.Position())
	recs, err := cons.Poll(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "d"}, recordValues(recs))

	cons.SeekTo(2)
	require.NoError(t, cons.SeekToEnd(ctx))
	assert.Equal(t, int64(4), cons.Position())
	assert.Equal(t, int64(4), cons.HighWatermark())
}

func TestConsumerFollowsLeaderChange(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a")
	cons := newTestConsumer(t, fc, "t", 0)
	ctx := testCtx(t)
	recs, err := cons.Poll(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, recordValues(recs))

	fc.moveLeader("t", 0, 2)
	fc.appendValues("t", 0, "b")
	recs, err = cons.Poll(ctx, time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, recordValues(recs))
	assert.Equal(t, 1, fc.count(2, transport.APIFetch))
}

// TestPollAnswersBeforeTheCallersDeadline: a long-poll longer than the
// caller's context asks the broker to answer before that deadline, so it
// ends empty, not in a timeout (which would also close a silent
// connection).
func TestPollAnswersBeforeTheCallersDeadline(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	cons := newTestConsumer(t, fc, "t", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	recs, err := cons.Poll(ctx, 10*time.Second)
	require.NoError(t, err, "a long-poll past the caller's deadline timed out")
	assert.Empty(t, recs)
	assert.Less(t, time.Since(start), 500*time.Millisecond)
}

func TestConsumerReuseMemory(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a0", "a1", "a2")
	fc.appendValues("t", 0, "b0", "b1", "b2")
	fc.appendValues("t", 0, "c0", "c1", "c2", "c3") // larger than the fetches before
	cl := newTestClient(t, fc, nil)
	ctx := testCtx(t)
	poll := func(cons *Consumer) []record.Record {
		t.Helper()
		recs, err := cons.Poll(ctx, 0)
		require.NoError(t, err)
		return recs
	}

	t.Run("records are valid until the next poll, which reuses their memory", func(t *testing.T) {
		cons, err := NewConsumer(cl, "t", 0, ConsumerConfig{MaxBytes: 1, ReuseMemory: true})
		require.NoError(t, err)
		first := poll(cons)
		assert.Equal(t, []string{"a0", "a1", "a2"}, recordValues(first))
		second := poll(cons)
		assert.Equal(t, []string{"b0", "b1", "b2"}, recordValues(second))
		assert.Same(t, &first[0], &second[0], "the records' slice is reused")
		assert.Equal(t, []string{"b0", "b1", "b2"}, recordValues(first), "the fetch was read into the first's memory")
		third := poll(cons)
		assert.Equal(t, []string{"c0", "c1", "c2", "c3"}, recordValues(third), "a larger fetch takes new memory")
		assert.Equal(t, []int64{6, 7, 8, 9}, recordOffsets(third))
		assert.Empty(t, poll(cons))
		assert.Equal(t, int64(10), cons.Position())
	})

	t.Run("by default records stay valid", func(t *testing.T) {
		cons, err := NewConsumer(cl, "t", 0, ConsumerConfig{MaxBytes: 1})
		require.NoError(t, err)
		first := poll(cons)
		second := poll(cons)
		assert.Equal(t, []string{"a0", "a1", "a2"}, recordValues(first))
		assert.Equal(t, []string{"b0", "b1", "b2"}, recordValues(second))
	})
}
