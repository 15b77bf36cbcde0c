package groups

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// hostBroker is broker 1 for a Host: the metadata it holds and its
// replicas (__consumer_offsets/0 and orders/0), which the test leads or
// not by setting their state.
type hostBroker struct {
	mu      sync.Mutex
	meta    *metadata.Cluster
	offsets *replication.Partition
	orders  *replication.Partition
}

func newHostBroker(t *testing.T) *hostBroker {
	open := func(topic string) *replication.Partition {
		l, err := storage.Open(t.TempDir(), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		p := replication.NewPartition(topic, 0, 1, l, nil, replication.Options{
			Peers: func(id int32) (replication.Peer, error) { return nil, errors.New("broker 2 is down") },
		})
		t.Cleanup(p.Close)
		require.NoError(t, p.SetState(replication.State{Leader: 1, LeaderEpoch: 1, Active: []int32{1}}))
		return p
	}
	b := &hostBroker{offsets: open(transport.OffsetsTopic), orders: open("orders")}
	for range 3 {
		batch, err := record.AppendBatch(nil, []record.Record{{Value: []byte("x")}})
		require.NoError(t, err)
		wait, err := b.orders.Produce(batch)
		require.NoError(t, err)
		_, err = wait(context.Background())
		require.NoError(t, err)
	}
	b.meta = &metadata.Cluster{Brokers: []metadata.Broker{{ID: 1}, {ID: 2}}, Topics: []metadata.Topic{
		{Name: transport.OffsetsTopic, ID: "offsets-id", Partitions: []metadata.Partition{{Leader: 1, LeaderEpoch: 1}}},
		{Name: "orders", ID: "orders-id", Partitions: []metadata.Partition{{Leader: 1, LeaderEpoch: 1}}},
	}}
	return b
}

// leadOffsets gives __consumer_offsets/0 a new state, in the metadata
// and on the replica.
func (b *hostBroker) leadOffsets(t *testing.T, st replication.State) {
	b.mu.Lock()
	meta := b.meta.Clone()
	meta.Topics[0].Partitions[0].Leader, meta.Topics[0].Partitions[0].LeaderEpoch = st.Leader, st.LeaderEpoch
	b.meta = meta
	b.mu.Unlock()
	require.NoError(t, b.offsets.SetState(st))
}

func (b *hostBroker) config() HostConfig {
	return HostConfig{
		Broker: 1,
		Metadata: func() *metadata.Cluster {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.meta
		},
		Lookup: func(topic, id string, partition int32) (*metadata.Topic, *replication.Partition, error) {
			b.mu.Lock()
			t := b.meta.Topic(topic)
			b.mu.Unlock()
			switch {
			case t == nil || id != "" && id != t.ID:
				return nil, nil, metadata.ErrUnknownTopic
			case partition != 0:
				return nil, nil, ErrUnknownPartition
			case topic == "orders":
				return t, b.orders, nil
			}
			return t, b.offsets, nil
		},
		ListOffsets: func(context.Context, string, *transport.ListOffsetsRequest) (*transport.ListOffsetsResponse, error) {
			return nil, errors.New("no other broker")
		},
		MaxBatchBytes: 1 << 20,
		LagPartitions: 10,
	}
}

// A host serves a group from the coordinator of the partition it leads,
// once rebuilt; answers NotCoordinator as soon as the leadership moves
// (and the coordinator it served confirms nothing more); answers
// CoordinatorLoading while a new leadership rebuilds; and serves again
// from a coordinator rebuilt from the log at the newest epoch.
func TestHostFollowsTheLeadershipOfItsPartition(t *testing.T) {
	b := newHostBroker(t)
	h := NewHost(b.config())
	_, err := h.ForGroup("billing")
	require.ErrorIs(t, err, ErrNotCoordinator, "not running yet")
	_, err = h.ForPartition(3)
	require.ErrorIs(t, err, ErrUnknownPartition)

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-ran)
	})
	coordinator := func() *Coordinator {
		var c *Coordinator
		require.Eventually(t, func() bool {
			c, err = h.ForGroup("billing")
			return err == nil
		}, 10*time.Second, 5*time.Millisecond, "never served: %v", err)
		return c
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	first := coordinator()
	require.NoError(t, first.Commit(rctx, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 0, Offset: 2}}}))
	byPartition, err := h.ForPartition(0)
	require.NoError(t, err)
	assert.Same(t, first, byPartition)
	assert.Equal(t, []*Coordinator{first}, h.Coordinators())

	// Broker 2 takes over: at once, no request is served here.
	b.leadOffsets(t, replication.State{Leader: 2, LeaderEpoch: 2, Active: []int32{2, 1}})
	_, err = h.ForGroup("billing")
	require.ErrorIs(t, err, ErrNotCoordinator)
	_, err = first.Committed(rctx, &transport.OffsetFetchRequest{Group: "billing"})
	require.ErrorIs(t, err, ErrNotCoordinator, "the old coordinator confirms nothing")
	err = first.Commit(rctx, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 0, Offset: 3}}})
	require.ErrorIs(t, err, replication.ErrNotLeader, "nor does it write")

	// Back here, with a follower that does not answer: the coordinator
	// rebuilds, and waits for the follower before it serves.
	b.leadOffsets(t, replication.State{Leader: 1, LeaderEpoch: 3, Active: []int32{1, 2}})
	require.Eventually(t, func() bool {
		_, err = h.ForGroup("billing")
		return errors.Is(err, ErrCoordinatorLoading)
	}, 5*time.Second, time.Millisecond, "never loading: %v", err)

	// The operator drops the follower: a newer epoch, rebuilt again.
	b.leadOffsets(t, replication.State{Leader: 1, LeaderEpoch: 4, Active: []int32{1}})
	again := coordinator()
	assert.NotSame(t, first, again)
	got, err := again.Committed(rctx, &transport.OffsetFetchRequest{Group: "billing"})
	require.NoError(t, err)
	require.Len(t, got.Offsets, 1)
	assert.Equal(t, int64(2), got.Offsets[0].Offset, "rebuilt from the log")
	assert.Equal(t, []*Coordinator{again}, h.Coordinators())
}
