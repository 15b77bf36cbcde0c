package producers_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/producers"
	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// leading returns a partition broker 1 leads alone, at epoch 1.
func leading(t *testing.T) (*replication.Partition, *storage.Log) {
	l, err := storage.Open(t.TempDir(), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	p := replication.NewPartition("orders", 0, 1, l, nil, replication.Options{
		Peers: func(int32) (replication.Peer, error) { return nil, errors.New("no peers here") },
	})
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(replication.State{Leader: 1, LeaderEpoch: 1, Active: []int32{1}}))
	return p, l
}

// idempotent is a batch of n records of producer id at epoch, from
// sequence seq.
func idempotent(t *testing.T, id int64, epoch int16, seq int32, n int) record.Batch {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte{byte(i)}}
	}
	kb, err := record.AppendKafkaBatch(nil, recs, record.KafkaBatchOptions{ProducerID: id, ProducerEpoch: epoch, BaseSequence: seq})
	require.NoError(t, err)
	b, err := record.WrapKafka(kb)
	require.NoError(t, err)
	return b
}

func produce(t *testing.T, h *producers.Host, p *replication.Partition, b record.Batch) (replication.Ack, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wait, err := h.Produce(ctx, p, b, nil)
	if err != nil {
		return replication.Ack{}, err
	}
	return wait(ctx)
}

func TestSequencesDuplicatesAndFencing(t *testing.T) {
	p, l := leading(t)
	h := producers.New(producers.Config{})
	t.Cleanup(h.Close)

	var acks []replication.Ack
	for i := range 7 {
		ack, err := produce(t, h, p, idempotent(t, 7, 0, int32(3*i), 3))
		require.NoError(t, err)
		assert.Equal(t, int64(3*i), ack.BaseOffset)
		acks = append(acks, ack)
	}
	end := l.LogEndOffset()
	require.Equal(t, int64(21), end)

	// A retry of any of the last five batches is the original, and
	// nothing is appended.
	for i := 2; i < 7; i++ {
		ack, err := produce(t, h, p, idempotent(t, 7, 0, int32(3*i), 3))
		require.NoError(t, err, "batch %d", i)
		assert.Equal(t, acks[i].BaseOffset, ack.BaseOffset, "batch %d", i)
		assert.Equal(t, acks[i].NextOffset, ack.NextOffset, "batch %d", i)
	}
	assert.Equal(t, end, l.LogEndOffset(), "duplicates appended nothing")

	// Older than the five, or a gap, or a batch that overlaps: out of order.
	for _, seq := range []int32{3, 22, 20, 19} {
		_, err := produce(t, h, p, idempotent(t, 7, 0, seq, 3))
		assert.ErrorIs(t, err, transport.ErrOutOfOrderSequence, "sequence %d", seq)
	}
	// A new epoch starts at 0 and fences the old one.
	_, err := produce(t, h, p, idempotent(t, 7, 1, 5, 1))
	assert.ErrorIs(t, err, transport.ErrOutOfOrderSequence)
	_, err = produce(t, h, p, idempotent(t, 7, 1, 0, 2))
	require.NoError(t, err)
	_, err = produce(t, h, p, idempotent(t, 7, 0, 21, 1))
	assert.ErrorIs(t, err, transport.ErrInvalidProducerEpoch)
	assert.Equal(t, end+2, l.LogEndOffset(), "nothing refused was appended")

	// Another producer is its own sequence; an unknown one starts
	// wherever it is (its state may have expired).
	_, err = produce(t, h, p, idempotent(t, 8, 0, 40, 1))
	require.NoError(t, err)
	_, err = produce(t, h, p, idempotent(t, 8, 0, 41, 1))
	require.NoError(t, err)
	n, ok := h.Producers(p)
	require.True(t, ok)
	assert.Equal(t, 2, n)

	// Not an idempotent batch, or one without a sequence.
	_, err = produce(t, h, p, idempotent(t, -1, -1, -1, 1))
	assert.ErrorIs(t, err, transport.ErrInvalidRequest)
	_, err = produce(t, h, p, idempotent(t, 9, 0, -1, 1))
	assert.ErrorIs(t, err, transport.ErrInvalidBatch)
}

// A new leadership (a failover back to this replica, or a restart) builds
// the state again from the log: a producer's retry of a batch the old
// leadership appended is still a duplicate.
func TestANewLeadershipRebuildsFromTheLog(t *testing.T) {
	p, l := leading(t)
	h := producers.New(producers.Config{})
	t.Cleanup(h.Close)
	var last replication.Ack
	for i := range 4 {
		ack, err := produce(t, h, p, idempotent(t, 1, 2, int32(10*i), 10))
		require.NoError(t, err)
		last = ack
	}
	// A batch of a producer without idempotence between them changes
	// nothing.
	plain, err := record.AppendBatch(nil, []record.Record{{Value: []byte("plain")}})
	require.NoError(t, err)
	wait, err := p.Produce(plain)
	require.NoError(t, err)
	_, err = wait(context.Background())
	require.NoError(t, err)

	require.NoError(t, p.SetState(replication.State{Leader: 1, LeaderEpoch: 2, Active: []int32{1}}))
	end := l.LogEndOffset()
	ack, err := produce(t, h, p, idempotent(t, 1, 2, 30, 10))
	require.NoError(t, err)
	assert.Equal(t, last.BaseOffset, ack.BaseOffset, "the retry is answered with the original's offset")
	assert.Equal(t, end, l.LogEndOffset())
	_, err = produce(t, h, p, idempotent(t, 1, 2, 50, 10))
	assert.ErrorIs(t, err, transport.ErrOutOfOrderSequence, "the rebuilt state knows the last sequence")
	ack, err = produce(t, h, p, idempotent(t, 1, 2, 40, 10))
	require.NoError(t, err)
	assert.Equal(t, end, ack.BaseOffset)
	_, err = produce(t, h, p, idempotent(t, 1, 1, 50, 10))
	assert.ErrorIs(t, err, transport.ErrInvalidProducerEpoch, "the rebuilt state knows the epoch")
}

// A producer idle past the expiry is forgotten (at load, and by Sweep);
// one that writes is not.
func TestIdleProducersExpire(t *testing.T) {
	p, _ := leading(t)
	now := time.Now()
	clock := func() time.Time { return now }
	h := producers.New(producers.Config{Expiry: time.Hour, Now: func() time.Time { return clock() }})
	t.Cleanup(h.Close)
	_, err := produce(t, h, p, idempotent(t, 1, 0, 0, 1))
	require.NoError(t, err)
	h.Sweep()
	n, _ := h.Producers(p)
	assert.Equal(t, 1, n)
	clock = func() time.Time { return now.Add(2 * time.Hour) }
	h.Sweep()
	n, _ = h.Producers(p)
	assert.Equal(t, 0, n)
	// Forgotten: a batch from anywhere in its sequence is taken.
	_, err = produce(t, h, p, idempotent(t, 1, 0, 9, 1))
	require.NoError(t, err)
}

func TestSequenceWraps(t *testing.T) {
	p, _ := leading(t)
	h := producers.New(producers.Config{})
	t.Cleanup(h.Close)
	_, err := produce(t, h, p, idempotent(t, 1, 0, math.MaxInt32-1, 3)) // MaxInt32-1, MaxInt32, 0
	require.NoError(t, err)
	_, err = produce(t, h, p, idempotent(t, 1, 0, 1, 1))
	require.NoError(t, err)
	_, err = produce(t, h, p, idempotent(t, 1, 0, 1, 1))
	require.NoError(t, err, "a duplicate")
	_, err = produce(t, h, p, idempotent(t, 1, 0, 3, 1))
	assert.ErrorIs(t, err, transport.ErrOutOfOrderSequence)
}
