package replication_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// recoveryPeer reaches a returning replica in this process with the calls
// recovery makes of it, as the node's handler would. beforeDigest, when
// set, runs before each digest is answered: the moment the leader
// verifies its copy.
type recoveryPeer struct {
	*localPeer
	mu           sync.Mutex
	beforeDigest func()
}

// recoveryPair is a leader (broker self) and a replica of the same
// partition on broker 3 for it to recover, each alone in epoch 1, the
// leader reaching the replica through peer.
type recoveryPair struct {
	leader, replica       *replication.Partition
	leaderLog, replicaLog *storage.Log
	peer                  *recoveryPeer
}

// newRecoveryPair makes a recoveryPair whose leader waits replicationTimeout
// for a follower's ack and holds a recovered replica joinHold at most.
func newRecoveryPair(t *testing.T, replicationTimeout, joinHold time.Duration) recoveryPair {
	t.Helper()
	rp := recoveryPair{leaderLog: openLog(t, t.TempDir()), replicaLog: openLog(t, t.TempDir())}
	rp.replica = replication.NewPartition("orders", 0, 3, rp.replicaLog, testLogger(t))
	t.Cleanup(rp.replica.Close)
	rp.peer = &recoveryPeer{localPeer: &localPeer{p: rp.replica}}
	rp.leader = replication.NewPartition("orders", 0, self, rp.leaderLog, testLogger(t), replication.Options{
		Peers:              func(int32) (replication.Peer, error) { return rp.peer, nil },
		ReplicationTimeout: replicationTimeout,
		JoinHold:           joinHold,
	})
	t.Cleanup(rp.leader.Close)
	alone := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self}}
	require.NoError(t, rp.leader.SetState(alone))
	require.NoError(t, rp.replica.SetState(alone))
	return rp
}

func (rp *recoveryPeer) ReplicaBatches(_ context.Context, req *transport.ReplicaBatchesRequest) ([]transport.BatchID, error) {
	if err := rp.err(); err != nil {
		return nil, err
	}
	return rp.p.Batches(req)
}

func (rp *recoveryPeer) ReplicaDigest(ctx context.Context, req *transport.ReplicaDigestRequest) ([]byte, error) {
	if err := rp.err(); err != nil {
		return nil, err
	}
	rp.mu.Lock()
	f := rp.beforeDigest
	rp.mu.Unlock()
	if f != nil {
		f()
	}
	sum, _, err := rp.p.Digest(ctx, req.From, req.To, false)
	return sum, err
}

func (rp *recoveryPeer) TruncateReplica(ctx context.Context, req *transport.TruncateReplicaRequest) error {
	if err := rp.err(); err != nil {
		return err
	}
	return rp.p.Truncate(ctx, req)
}

func (rp *recoveryPeer) ResetReplica(context.Context, *transport.TruncateReplicaRequest) error {
	return errors.New("not in this test")
}

// A replica recovered while writes go on holds every acknowledged record
// from the moment recovery returns, and every record acknowledged after
// waits for it, until the metadata lists it active: a failover that then
// found only it would lose nothing. Before, recovery copied up to the log
// end it saw, the records appended while it verified the copy were
// acknowledged without the replica, and the controller made it active
// lacking them until the leader's sender filled them in.
func TestRecoveredReplicaHoldsEveryAcknowledgedRecord(t *testing.T) {
	pair := newRecoveryPair(t, 2*time.Second, time.Hour)
	leader, returning, rp, leaderLog, returningLog := pair.leader, pair.replica, pair.peer, pair.leaderLog, pair.replicaLog
	produce(t, leader, "before", 5)

	// While the leader verifies its copy, more is appended and acknowledged
	// (by the leader alone: the replica is not active).
	var once sync.Once
	rp.mu.Lock()
	rp.beforeDigest = func() {
		once.Do(func() {
			go func() { _, _ = tryProduce(leader, "during", 3) }()
			require.Eventually(t, func() bool { return leader.HighWatermark() == 8 }, 5*time.Second, time.Millisecond,
				"the append during the verification is acknowledged")
		})
	}
	rp.mu.Unlock()
	res, err := leader.RecoverFollower(context.Background(), 3)
	require.NoError(t, err)
	assert.Equal(t, int64(8), res.CopiedTo, "the copy reaches the log end, what was appended meanwhile included")
	assert.GreaterOrEqual(t, returningLog.DurableEndOffset(), leader.HighWatermark(),
		"the recovered replica holds every acknowledged record")

	// Until the metadata lists it active, an append is acknowledged only
	// once the recovered replica holds it too.
	rp.setDown(errors.New("connection refused"))
	_, err = tryProduce(leader, "unreplicated", 1)
	var rerr *replication.ReplicationError
	require.ErrorAs(t, err, &rerr, "an append the recovered replica cannot take is not acknowledged")
	assert.Contains(t, rerr.Failures, int32(3))
	assert.Equal(t, int64(8), leader.HighWatermark())
	rp.setDown(nil)

	// The metadata lists it active: a follower like any other.
	both := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 3}}
	require.NoError(t, returning.SetState(both))
	require.NoError(t, leader.SetState(both))
	ack := produce(t, leader, "after", 2)
	assert.Equal(t, []int32{self, 3}, ack.Replicas)
	require.Eventually(t, func() bool { return returningLog.DurableEndOffset() == leaderLog.DurableEndOffset() }, 5*time.Second, 5*time.Millisecond)
}

// A recovered replica the metadata never lists active (the controller's
// commit failed) stops counting when the leadership moves on, or after
// the hold: writes then go on without it.
func TestRecoveredReplicaNotMadeActiveStopsCounting(t *testing.T) {
	for _, c := range []struct {
		name string
		hold time.Duration
		then func(t *testing.T, leader *replication.Partition)
	}{
		{"the hold passes", 200 * time.Millisecond, func(t *testing.T, _ *replication.Partition) {}},
		{"a new epoch", time.Hour, func(t *testing.T, leader *replication.Partition) {
			require.NoError(t, leader.SetState(replication.State{Leader: self, LeaderEpoch: 2, Active: []int32{self}}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pair := newRecoveryPair(t, time.Second, c.hold)
			leader, rp := pair.leader, pair.peer
			produce(t, leader, "before", 2)
			_, err := leader.RecoverFollower(context.Background(), 3)
			require.NoError(t, err)
			rp.setDown(errors.New("connection refused"))
			c.then(t, leader)
			require.Eventually(t, func() bool {
				_, err := tryProduce(leader, "later", 1)
				return err == nil
			}, 10*time.Second, 50*time.Millisecond, "writes go on without the replica the metadata never listed")
		})
	}
}

// A recovery that ends after a newer leader reached this one (it asked
// this replica's state at a newer epoch while the copy was verified) does
// not count the recovered replica in this leadership's acknowledgements:
// the leadership has been passed, and the recovery fails with
// ErrNotLeader rather than report a replica ready to be made active.
func TestRecoveryPassedByANewerEpochDoesNotJoin(t *testing.T) {
	pair := newRecoveryPair(t, 2*time.Second, time.Hour)
	leader, rp := pair.leader, pair.peer
	produce(t, leader, "before", 3)

	var once sync.Once
	rp.mu.Lock()
	rp.beforeDigest = func() {
		once.Do(func() {
			_, err := leader.ReplicaState(&transport.ReplicaStateRequest{Topic: "orders", Partition: 0, LeaderEpoch: 2})
			require.NoError(t, err)
		})
	}
	rp.mu.Unlock()
	_, err := leader.RecoverFollower(context.Background(), 3)
	require.ErrorIs(t, err, replication.ErrNotLeader)
	assert.Empty(t, leader.Followers(), "a passed leadership counts the recovered replica")
}
