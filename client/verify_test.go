package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// fakeChecker is a cluster as verification sees it: offsets from the
// leader, and per broker a replica state and a log of batch identities.
type fakeChecker struct {
	offs   PartitionOffsets
	offErr error
	states map[int32]ReplicaState
	logs   map[int32]string // one character per offset, one batch each
	down   map[int32]error
	// damaged fails a broker's digest (its check of the range) only.
	damaged map[int32]error
}

func (f *fakeChecker) offsets(context.Context, int32, string, int32) (PartitionOffsets, error) {
	return f.offs, f.offErr
}

func (f *fakeChecker) state(_ context.Context, b int32, _ string, _ int32) (ReplicaState, error) {
	if err := f.down[b]; err != nil {
		return ReplicaState{}, err
	}
	return f.states[b], nil
}

func (f *fakeChecker) digest(_ context.Context, b int32, _ string, _ int32, from, to int64) (ReplicaDigest, error) {
	if err := f.down[b]; err != nil {
		return ReplicaDigest{}, err
	}
	if err := f.damaged[b]; err != nil {
		return ReplicaDigest{}, err
	}
	log := f.logs[b]
	if from < 0 || to > int64(len(log)) || from > to {
		return ReplicaDigest{}, fmt.Errorf("%w: [%d, %d)", transport.ErrOffsetOutOfRange, from, to)
	}
	return ReplicaDigest{Digest: []byte(log[from:to]), Batches: int32(to - from)}, nil
}

func TestVerifyPartition(t *testing.T) {
	p := PartitionMetadata{Partition: 1, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3, 4}, Active: []int32{1, 2, 3}}
	newChecker := func() *fakeChecker {
		return &fakeChecker{
			offs:   PartitionOffsets{LogStartOffset: 0, HighWatermark: 5, LogEndOffset: 6},
			states: map[int32]ReplicaState{2: {LogEndOffset: 6}, 3: {LogEndOffset: 5}},
			logs:   map[int32]string{1: "abcdef", 2: "abcdef", 3: "abcde"},
			down:   map[int32]error{},
		}
	}
	rebuild := func(b int32) string {
		return fmt.Sprintf("gostream-ctl failover --topic orders --partition 1 --broker %d && gostream-ctl recover --topic orders --partition 1 --broker %d", b, b)
	}
	tests := []struct {
		name   string
		change func(f *fakeChecker)
		want   []VerifiedReplica
	}{
		{name: "identical up to the high watermark", change: func(*fakeChecker) {},
			want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical}, {Broker: 3, State: VerifyIdentical}}},
		{name: "past the high watermark is not compared", change: func(f *fakeChecker) { f.logs[2] = "abcdeX" },
			want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical}, {Broker: 3, State: VerifyIdentical}}},
		{name: "differs", change: func(f *fakeChecker) { f.logs[3] = "abXde" },
			want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical},
				{Broker: 3, State: VerifyDiffers, Error: "differs from leader 1 in [0, 5): 5 batches against the leader's 5, digests differ"}}},
		{name: "only the shared offsets", change: func(f *fakeChecker) {
			f.states[3] = ReplicaState{LogStartOffset: 2, LogEndOffset: 5}
			f.logs[3] = "??cde"
		}, want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical}, {Broker: 3, State: VerifyIdentical}}},
		{name: "short of the high watermark", change: func(f *fakeChecker) {
			f.states[3] = ReplicaState{LogEndOffset: 4}
		}, want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical},
			{Broker: 3, State: VerifyDiffers, Error: "ends at offset 4, short of the high watermark 5: it lacks acknowledged records"}}},
		{name: "a follower does not answer", change: func(f *fakeChecker) { f.down[2] = transport.ErrBrokerNotAvailable },
			want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyUnknown, Error: "BrokerNotAvailable"}, {Broker: 3, State: VerifyIdentical}}},
		{name: "the leader does not answer", change: func(f *fakeChecker) { f.offErr = transport.ErrBrokerNotAvailable },
			want: []VerifiedReplica{{Broker: 1, State: VerifyUnknown, Error: "leader broker 1: BrokerNotAvailable"},
				{Broker: 2, State: VerifyUnknown, Error: "leader broker 1: BrokerNotAvailable"}, {Broker: 3, State: VerifyUnknown, Error: "leader broker 1: BrokerNotAvailable"}}},
		{name: "a follower is damaged", change: func(f *fakeChecker) { f.damaged = map[int32]error{3: transport.ErrStorageFailed} },
			want: []VerifiedReplica{{Broker: 1, State: VerifyLeader}, {Broker: 2, State: VerifyIdentical},
				{Broker: 3, State: VerifyDamaged, Error: "StorageFailed", Command: rebuild(3)}}},
		{name: "the leader is damaged", change: func(f *fakeChecker) { f.damaged = map[int32]error{1: transport.ErrStorageFailed} },
			want: []VerifiedReplica{
				{Broker: 1, State: VerifyDamaged, Error: "StorageFailed", Command: rebuild(1)},
				{Broker: 2, State: VerifyUnknown, Error: "leader broker 1: StorageFailed"}, {Broker: 3, State: VerifyUnknown, Error: "leader broker 1: StorageFailed"}}},
		{name: "the leader cannot digest", change: func(f *fakeChecker) { f.down[1] = transport.ErrTimeout },
			want: []VerifiedReplica{{Broker: 1, State: VerifyUnknown, Error: "Timeout"}, {Broker: 2, State: VerifyUnknown, Error: "leader broker 1: Timeout"}, {Broker: 3, State: VerifyUnknown, Error: "leader broker 1: Timeout"}}},
		{name: "no leader", change: func(f *fakeChecker) { f.offErr = transport.ErrNotLeader },
			want: []VerifiedReplica{{Broker: 1, State: VerifyUnknown, Error: "leader broker 1: NotLeader"},
				{Broker: 2, State: VerifyUnknown, Error: "leader broker 1: NotLeader"}, {Broker: 3, State: VerifyUnknown, Error: "leader broker 1: NotLeader"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newChecker()
			tt.change(f)
			rep := verifyTopics(context.Background(), f, []TopicMetadata{{Name: "orders", Partitions: []PartitionMetadata{p}}})
			require.Len(t, rep.Partitions, 1)
			vp := rep.Partitions[0]
			assert.Equal(t, "orders", vp.Topic)
			assert.Equal(t, int32(1), vp.Partition)
			assert.Equal(t, tt.want, vp.Replicas)
			ok := true
			for _, r := range tt.want {
				ok = ok && (r.State == VerifyLeader || r.State == VerifyIdentical)
			}
			assert.Equal(t, ok, rep.OK)
			if f.offErr != nil {
				assert.Nil(t, vp.HighWatermark, "the leader did not say")
			} else {
				require.NotNil(t, vp.HighWatermark)
				assert.Equal(t, int64(5), *vp.HighWatermark)
			}
		})
	}

	t.Run("a partition without a leader", func(t *testing.T) {
		q := p
		q.Leader, q.Active = -1, []int32{2}
		rep := verifyTopics(context.Background(), newChecker(), []TopicMetadata{{Name: "orders", Partitions: []PartitionMetadata{q}}})
		assert.False(t, rep.OK)
		assert.Equal(t, []VerifiedReplica{{Broker: 2, State: VerifyUnknown, Error: "the partition has no leader"}}, rep.Partitions[0].Replicas,
			"no replica for the leader that is not")
	})
}
