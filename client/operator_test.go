package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

const failoverReport = `{"results":[{"topic":"orders","partition":1,"action":"failover","dry_run":true,
	"old_leader":2,"new_leader":1,"old_epoch":0,"new_epoch":1,"old_active":[1,2,3],"new_active":[1,3],
	"candidates":[{"broker":1,"reachable":true,"last_epoch":0,"log_end_offset":40,"agrees":true,"chosen":true},
	              {"broker":3,"reachable":true,"last_epoch":0,"log_end_offset":38,"agrees":true,"chosen":false,"note":"offsets [0, 38) identical"}],
	"lost_from_offset":40}]}`

func TestFailoverGoesToTheController(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) {
		fc.controller = 2
		fc.operator = func(_ context.Context, api transport.API, _ []byte) ([]byte, error) {
			require.Equal(t, transport.APIFailover, api)
			return []byte(failoverReport), nil
		}
	})
	c := newTestClient(t, fc, nil)
	rep, err := c.Failover(testCtx(t), FailoverRequest{Topic: "orders", Partition: 1, DryRun: true, Requester: "alice"})
	require.NoError(t, err)
	lost := int64(40)
	assert.Equal(t, ChangeReport{Results: []ChangeResult{{
		Topic: "orders", Partition: 1, Action: ActionFailover, DryRun: true,
		OldLeader: 2, NewLeader: 1, OldEpoch: 0, NewEpoch: 1, OldActive: []int32{1, 2, 3}, NewActive: []int32{1, 3},
		Candidates: []Candidate{
			{Broker: 1, Reachable: true, LastEpoch: 0, LogEndOffset: 40, Agrees: true, Chosen: true},
			{Broker: 3, Reachable: true, LastEpoch: 0, LogEndOffset: 38, Agrees: true, Note: "offsets [0, 38) identical"},
		},
		LostFrom: &lost,
	}}}, rep)
	assert.Equal(t, 1, fc.count(2, transport.APIFailover))
	assert.Zero(t, fc.count(1, transport.APIFailover)+fc.count(3, transport.APIFailover))
	fc.set(func(fc *fakeCluster) {
		require.Len(t, fc.operatorBodies, 1)
		assert.JSONEq(t, `{"topic":"orders","partition":1,"dry_run":true,"requester":"alice"}`, fc.operatorBodies[0])
	})

	// --broker mode sends no topic.
	_, err = c.Failover(testCtx(t), FailoverRequest{Broker: 3})
	require.NoError(t, err)
	fc.set(func(fc *fakeCluster) {
		assert.JSONEq(t, `{"partition":0,"broker":3,"dry_run":false}`, fc.operatorBodies[1])
	})
}

func TestFailoverRefusalKeepsItsCode(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) {
		fc.operator = func(context.Context, transport.API, []byte) ([]byte, error) {
			return nil, fmt.Errorf("%w: partition orders/0 is led by broker 2, which answers", transport.ErrLeaderStillAvailable)
		}
	})
	c := newTestClient(t, fc, nil)
	_, err := c.Failover(testCtx(t), FailoverRequest{Topic: "orders", Partition: 0})
	require.ErrorIs(t, err, transport.ErrLeaderStillAvailable)
	assert.Contains(t, err.Error(), "LeaderStillAvailable: partition orders/0 is led by broker 2, which answers")
	assert.Equal(t, 1, fc.count(1, transport.APIFailover), "a refusal is not sent again")
}

// TestOperatorRetries: the request follows the controller after
// NotController and after a failed dial, and is never sent twice to a
// controller that got it.
func TestOperatorRetries(t *testing.T) {
	t.Run("NotController", func(t *testing.T) {
		fc := newFakeCluster(t, 3)
		c := newTestClient(t, fc, nil)
		fc.set(func(fc *fakeCluster) { fc.controller, fc.epoch = 3, fc.epoch+1 })
		_, err := c.Recover(testCtx(t), RecoverRequest{Broker: 2})
		require.NoError(t, err)
		assert.Equal(t, 1, fc.count(1, transport.APIRecover), "the old controller said NotController")
		assert.Equal(t, 1, fc.count(3, transport.APIRecover))
	})
	t.Run("failed dial", func(t *testing.T) {
		fc := newFakeCluster(t, 3)
		c := newTestClient(t, fc, nil)
		fc.stop(1)
		fc.set(func(fc *fakeCluster) { fc.controller, fc.epoch = 2, fc.epoch+1 })
		_, err := c.Failover(testCtx(t), FailoverRequest{Broker: 3})
		require.NoError(t, err)
		assert.Equal(t, 1, fc.count(2, transport.APIFailover))
	})
	t.Run("timeout is not retried", func(t *testing.T) {
		fc := newFakeCluster(t, 3)
		fc.set(func(fc *fakeCluster) {
			fc.operator = func(ctx context.Context, _ transport.API, _ []byte) ([]byte, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		})
		c := newTestClient(t, fc, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := c.Failover(ctx, FailoverRequest{Topic: "orders", Partition: 0})
		require.Error(t, err)
		assert.Equal(t, 1, fc.count(1, transport.APIFailover), "the controller may have acted")
	})
}

// TestOperatorCallsOutlastRequestTimeout: a failover of many partitions
// takes longer than one request; ctx bounds it, not RequestTimeout.
func TestOperatorCallsOutlastRequestTimeout(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) {
		fc.operator = func(ctx context.Context, _ transport.API, _ []byte) ([]byte, error) {
			select {
			case <-time.After(400 * time.Millisecond):
				return []byte(`{"results":[]}`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	c := newTestClient(t, fc, func(cfg *Config) { cfg.RequestTimeout = 100 * time.Millisecond })
	rep, err := c.Failover(testCtx(t), FailoverRequest{Broker: 2})
	require.NoError(t, err)
	assert.Empty(t, rep.Results)
}

func TestRecoverNeedsABroker(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestClient(t, fc, nil)
	_, err := c.Recover(testCtx(t), RecoverRequest{Topic: "orders", Partition: 0})
	assert.ErrorIs(t, err, transport.ErrInvalidRequest)
	assert.Zero(t, fc.count(1, transport.APIRecover))
}

func TestHistory(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) {
		fc.operator = func(_ context.Context, api transport.API, _ []byte) ([]byte, error) {
			require.Equal(t, transport.APIHistory, api)
			return []byte(`{"events":[{"time":"2024-05-01T12:00:00Z","requester":"alice","topic":"orders","partition":1,
				"action":"recover","old_leader":1,"new_leader":1,"old_epoch":1,"new_epoch":1,
				"old_active":[1,3],"new_active":[1,2,3],"truncated":[45,40],"copied_to":80}]}`), nil
		}
	})
	c := newTestClient(t, fc, nil)
	evs, err := c.History(testCtx(t))
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), evs[0].Time)
	assert.Equal(t, "alice", evs[0].Requester)
	assert.Equal(t, ActionRecover, evs[0].Action)
	assert.Equal(t, []int32{1, 2, 3}, evs[0].NewActive)
	assert.Equal(t, &[2]int64{45, 40}, evs[0].Truncated)
	assert.Equal(t, int64(80), evs[0].CopiedTo)

	fc.set(func(fc *fakeCluster) {
		fc.operator = func(context.Context, transport.API, []byte) ([]byte, error) { return []byte(`{"events":null}`), nil }
	})
	evs, err = c.History(testCtx(t))
	require.NoError(t, err)
	assert.NotNil(t, evs)
	assert.Empty(t, evs)
}

func TestReplicaDigestAsksTheNamedBroker(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b", "c")
	c := newTestClient(t, fc, nil)
	d, err := c.ReplicaDigest(testCtx(t), 3, "t", 0, 1, 3)
	require.NoError(t, err)
	assert.Equal(t, "t/0[1,3)", string(d.Digest))
	assert.Equal(t, int32(2), d.Batches)
	fc.set(func(fc *fakeCluster) {
		require.Len(t, fc.digestReqs, 1)
		assert.Equal(t, digestReq{broker: 3, req: transport.ReplicaDigestRequest{Topic: "t", Partition: 0, From: 1, To: 3}}, fc.digestReqs[0])
	})

	_, err = c.ReplicaDigest(testCtx(t), 2, "t", 0, 0, 9)
	assert.ErrorIs(t, err, transport.ErrOffsetOutOfRange)
	_, err = c.ReplicaDigest(testCtx(t), 9, "t", 0, 0, 1)
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable, "broker 9 is not registered")
	fc.stop(2)
	_, err = c.ReplicaDigest(testCtx(t), 2, "t", 0, 0, 1)
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
	fc.set(func(fc *fakeCluster) { assert.Len(t, fc.digestReqs, 2, "one request each, none retried") })
}
