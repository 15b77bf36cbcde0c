package client

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

func TestDescribeClusterAsksTheNamedNode(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := newTestClient(t, fc, nil)
	v, err := c.DescribeCluster(testCtx(t), fc.brokers[2].addr)
	require.NoError(t, err)
	assert.Equal(t, int32(2), v.NodeID)
	assert.JSONEq(t, `{"from":2}`, string(v.Metadata))
	require.Len(t, v.Members, 3)
	assert.Equal(t, Member{BrokerID: 3, Gossip: fc.brokers[3].addr, State: "alive"}, v.Members[2])
	assert.Equal(t, 1, fc.count(2, transport.APIDescribeCluster))
	assert.Zero(t, fc.count(1, transport.APIDescribeCluster)+fc.count(3, transport.APIDescribeCluster))

	_, err = c.DescribeCluster(testCtx(t), deadAddr(t))
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
}

func TestReplicaStateObservesOnly(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b", "c")
	c := newTestClient(t, fc, nil)
	st, err := c.ReplicaState(testCtx(t), 3, "t", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), st.LogEndOffset)
	assert.Equal(t, 1, fc.count(3, transport.APIReplicaState), "asked the named broker")
	fc.set(func(fc *fakeCluster) {
		require.Len(t, fc.replicaReqs, 1)
		assert.Zero(t, fc.replicaReqs[0].LeaderEpoch, "an epoch would fence the replica")
		assert.Zero(t, fc.replicaReqs[0].TailBatches)
	})

	_, err = c.ReplicaState(testCtx(t), 9, "t", 0)
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable, "broker 9 is not registered")
	_, err = c.ReplicaState(testCtx(t), 1, "t", 4)
	assert.ErrorIs(t, err, transport.ErrUnknownPartition)
	fc.stop(2)
	_, err = c.ReplicaState(testCtx(t), 2, "t", 0)
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
}

func TestCatchUp(t *testing.T) {
	newCluster := func(t *testing.T) *fakeCluster {
		fc := newFakeCluster(t, 3)
		fc.addTopic("t", 1) // led by broker 1
		fc.setReplicas("t", 0, []int32{1, 2, 3}, []int32{1, 2})
		fc.appendValues("t", 0, "a", "b")
		return fc
	}
	t.Run("sent to the leader", func(t *testing.T) {
		fc := newCluster(t)
		c := newTestClient(t, fc, nil)
		res, err := c.CatchUp(testCtx(t), "t", 0, 2)
		require.NoError(t, err)
		assert.Equal(t, CatchUpResult{FromOffset: 0, ToOffset: 2}, res)
		assert.Equal(t, 1, fc.count(1, transport.APICatchUp))
	})
	t.Run("follows a leader change", func(t *testing.T) {
		fc := newCluster(t)
		c := newTestClient(t, fc, nil)
		// The leader moves between the client's refresh and its request.
		fc.set(func(fc *fakeCluster) {
			fc.catchUpErr = func(broker int32) error {
				if broker == 1 {
					fc.moveLeader("t", 0, 3)
				}
				return nil
			}
		})
		res, err := c.CatchUp(testCtx(t), "t", 0, 2)
		require.NoError(t, err)
		assert.Equal(t, int64(2), res.ToOffset)
		assert.Equal(t, 1, fc.count(1, transport.APICatchUp), "the old leader answered NotLeader")
		assert.Equal(t, 1, fc.count(3, transport.APICatchUp))
	})
	t.Run("refused before sending", func(t *testing.T) {
		fc := newCluster(t)
		c := newTestClient(t, fc, nil)
		_, err := c.CatchUp(testCtx(t), "t", 0, 1)
		assert.ErrorIs(t, err, transport.ErrInvalidRequest, "broker 1 is the leader")
		_, err = c.CatchUp(testCtx(t), "t", 0, 3)
		assert.ErrorIs(t, err, transport.ErrInvalidRequest, "broker 3 is not active")
		assert.Contains(t, err.Error(), "recovery")
		_, err = c.CatchUp(testCtx(t), "t", 5, 2)
		assert.ErrorIs(t, err, transport.ErrUnknownPartition)
		_, err = c.CatchUp(testCtx(t), "nope", 0, 2)
		assert.ErrorIs(t, err, transport.ErrUnknownTopic)
		assert.Zero(t, fc.count(1, transport.APICatchUp)+fc.count(2, transport.APICatchUp)+fc.count(3, transport.APICatchUp))
	})
	t.Run("a diverged follower is not retried", func(t *testing.T) {
		fc := newCluster(t)
		c := newTestClient(t, fc, nil)
		fc.set(func(fc *fakeCluster) {
			fc.catchUpErr = func(int32) error {
				return fmt.Errorf("%w: broker 2's batch at offset 0 differs from the leader's", transport.ErrReplicaDivergence)
			}
		})
		_, err := c.CatchUp(testCtx(t), "t", 0, 2)
		assert.ErrorIs(t, err, transport.ErrReplicaDivergence)
		assert.Equal(t, 1, fc.count(1, transport.APICatchUp))
	})
}
