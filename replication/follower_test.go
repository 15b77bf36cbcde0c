package replication_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// localPeer reaches a follower Partition in this process, as the node's
// RPC handler would: follower errors come back as the wire's sentinels.
type localPeer struct {
	p  *replication.Partition
	mu sync.Mutex
	// down, when set, fails every request as if the network did.
	down error
}

func (lp *localPeer) setDown(err error) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.down = err
}

func (lp *localPeer) err() error {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.down
}

// toWire maps follower errors the way node's error table does.
func toWire(err error) error {
	if errors.Is(err, replication.ErrStaleEpoch) || errors.Is(err, storage.ErrEpochRegression) {
		return fmt.Errorf("%w: %v", transport.ErrStaleEpoch, err)
	}
	return err
}

func (lp *localPeer) SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error) {
	if err := lp.err(); err != nil {
		return nil, err
	}
	// The follower takes requests in the order they are sent, as on one
	// connection, decoded from the wire as the node's handler would; its
	// answer comes back through the wait.
	var wire transport.ReplicateRequest
	if err := transport.Unmarshal(transport.Marshal(nil, req), &wire); err != nil {
		return nil, err
	}
	w, err := lp.p.Replicate(&wire)
	return func(ctx context.Context) (int64, error) {
		if err != nil {
			return 0, toWire(err)
		}
		end, err := w(ctx)
		return end, toWire(err)
	}, nil
}

func (lp *localPeer) ReplicaState(ctx context.Context, req *transport.ReplicaStateRequest) (*transport.ReplicaStateResponse, error) {
	if err := lp.err(); err != nil {
		return nil, err
	}
	resp, err := lp.p.ReplicaState(req)
	return resp, toWire(err)
}

var errNetwork = errors.New("connection refused")

// pair is a leader (broker 1) and one follower (broker 2) of orders/0.
type pair struct {
	leader, follower       *replication.Partition
	leaderLog, followerLog *storage.Log
	peer                   *localPeer
}

func newPair(t *testing.T) *pair {
	t.Helper()
	pr := &pair{leaderLog: openLog(t, t.TempDir()), followerLog: openLog(t, t.TempDir())}
	pr.follower = replication.NewPartition("orders", 0, 2, pr.followerLog, testLogger(t))
	t.Cleanup(pr.follower.Close)
	pr.peer = &localPeer{p: pr.follower}
	peers := func(id int32) (replication.Peer, error) {
		if id != 2 {
			return nil, fmt.Errorf("no broker %d", id)
		}
		return pr.peer, nil
	}
	pr.leader = replication.NewPartition("orders", 0, self, pr.leaderLog, testLogger(t),
		replication.Options{Peers: peers, ReplicationTimeout: 5 * time.Second})
	t.Cleanup(pr.leader.Close)
	return pr
}

// setState gives both replicas the same state.
func (pr *pair) setState(t *testing.T, s replication.State) {
	t.Helper()
	require.NoError(t, pr.follower.SetState(s))
	require.NoError(t, pr.leader.SetState(s))
}

// waitInSync waits until the leader reports its follower in sync at the
// leader's log end.
func (pr *pair) waitInSync(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		fs := pr.leader.Followers()
		return len(fs) == 1 && fs[0].State == transport.FollowerInSync && fs[0].LogEndOffset == pr.leaderLog.LogEndOffset()
	}, 10*time.Second, 5*time.Millisecond, "follower never in sync: %+v", pr.leader.Followers())
}

// logBytes reads a whole log.
func logBytes(t *testing.T, l *storage.Log) []byte {
	t.Helper()
	var out []byte
	ctx := ctxTimeout(t, 5*time.Second)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(ctx, off, 1<<20, l.LogEndOffset(), nil)
		require.NoError(t, err)
		require.NotEmpty(t, b, "nothing durable at %d", off)
		out = append(out, b...)
		require.NoError(t, record.Batches(b, func(rb record.Batch) bool { off = rb.NextOffset(); return true }))
	}
	return out
}

func TestProduceWithFollower(t *testing.T) {
	pr := newPair(t)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	pr.waitInSync(t)

	for i, n := range []int{2, 1, 4} {
		ack := produce(t, pr.leader, fmt.Sprint("b", i), n)
		assert.Equal(t, []int32{1, 2}, ack.Replicas, "ack %d", i)
		assert.Equal(t, int32(1), ack.LeaderEpoch)
		assert.Equal(t, ack.NextOffset, pr.leader.HighWatermark())
		assert.GreaterOrEqual(t, pr.followerLog.DurableEndOffset(), ack.NextOffset, "acked before the follower's fsync")
	}
	assert.Equal(t, logBytes(t, pr.leaderLog), logBytes(t, pr.followerLog), "the follower holds other bytes than the leader")
	res, err := pr.leader.Fetch(ctxTimeout(t, 5*time.Second), 0, 1<<20, 0)
	require.NoError(t, err)
	assert.Len(t, decodeBatches(t, res.Batches), 3)
}

func TestProduceFollowerFailsThenCatchesUp(t *testing.T) {
	pr := newPair(t)
	pr.peer.setDown(errNetwork)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})

	res, err := pr.leader.Fetch(ctxTimeout(t, 5*time.Second), 0, 1<<20, 0)
	require.NoError(t, err, "a leader that has not heard from its follower serves below the HW it had")
	assert.Empty(t, res.Batches)
	assert.Equal(t, int64(0), res.HighWatermark)

	_, err = tryProduce(pr.leader, "lost", 3)
	require.ErrorIs(t, err, replication.ErrReplicationFailed)
	var rerr *replication.ReplicationError
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, []int32{2}, rerr.Brokers())
	assert.Contains(t, err.Error(), "broker 2")
	assert.Equal(t, int64(3), pr.leaderLog.LogEndOffset(), "the leader keeps its copy")
	assert.Equal(t, int64(0), pr.followerLog.LogEndOffset())
	assert.Equal(t, int64(0), pr.leader.HighWatermark(), "HW moved past what the follower holds")

	pr.peer.setDown(nil)
	pr.waitInSync(t)
	require.Eventually(t, func() bool { return pr.leader.HighWatermark() == 3 }, 10*time.Second, 5*time.Millisecond)

	ack := produce(t, pr.leader, "after", 2)
	assert.Equal(t, int64(3), ack.BaseOffset)
	assert.Equal(t, []int32{1, 2}, ack.Replicas)
	assert.Equal(t, logBytes(t, pr.leaderLog), logBytes(t, pr.followerLog))
}

func TestCatchUpOnDemand(t *testing.T) {
	pr := newPair(t)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	pr.waitInSync(t)
	produce(t, pr.leader, "a", 2)

	pr.peer.setDown(errNetwork)
	_, err := tryProduce(pr.leader, "b", 3)
	require.ErrorIs(t, err, replication.ErrReplicationFailed)
	pr.peer.setDown(nil)

	from, to, err := pr.leader.CatchUp(ctxTimeout(t, 10*time.Second), 2)
	require.NoError(t, err)
	assert.Equal(t, int64(5), to)
	assert.LessOrEqual(t, from, to)
	assert.Equal(t, int64(5), pr.followerLog.LogEndOffset())

	_, _, err = pr.leader.CatchUp(ctxTimeout(t, time.Second), 3)
	require.Error(t, err, "broker 3 is no follower")
}

func TestDivergedFollowerIsLeftAlone(t *testing.T) {
	pr := newPair(t)
	pr.peer.setDown(errNetwork)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	_, err := tryProduce(pr.leader, "leader", 2)
	require.ErrorIs(t, err, replication.ErrReplicationFailed)

	// The follower got a different batch at the same offsets.
	other := batch(t, "other", 2)
	other.Stamp(0, 1, 1)
	_, err = pr.followerLog.AppendExact(ctxTimeout(t, 5*time.Second), other)
	require.NoError(t, err)
	before := logBytes(t, pr.followerLog)

	pr.peer.setDown(nil)
	require.Eventually(t, func() bool {
		fs := pr.leader.Followers()
		return len(fs) == 1 && fs[0].State == transport.FollowerDiverged
	}, 10*time.Second, 5*time.Millisecond, "%+v", pr.leader.Followers())

	_, err = tryProduce(pr.leader, "next", 1)
	require.ErrorIs(t, err, replication.ErrReplicaDivergence)
	assert.Equal(t, before, logBytes(t, pr.followerLog), "catch-up wrote to a diverged follower")
	assert.Equal(t, int64(0), pr.leader.HighWatermark())
}

// TestLeaderStepsDownOnNewerEpoch: a follower that has seen a newer epoch
// refuses the old leader, which stops taking writes.
func TestLeaderStepsDownOnNewerEpoch(t *testing.T) {
	pr := newPair(t)
	require.NoError(t, pr.follower.SetState(replication.State{Leader: 3, LeaderEpoch: 5, Active: []int32{3, 2}}))
	require.NoError(t, pr.leader.SetState(replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}))

	require.Eventually(t, func() bool {
		_, err := tryProduce(pr.leader, "x", 1)
		return errors.Is(err, replication.ErrNotLeader)
	}, 10*time.Second, 5*time.Millisecond)
	assert.GreaterOrEqual(t, pr.leader.FencedEpoch(), int32(2))
	end := pr.leaderLog.LogEndOffset()
	_, err := pr.leader.Produce(batch(t, "y", 1))
	require.ErrorIs(t, err, replication.ErrNotLeader)
	assert.Equal(t, end, pr.leaderLog.LogEndOffset(), "a stepped-down leader wrote")
	assert.Equal(t, int64(0), pr.followerLog.LogEndOffset())
}

// TestLeaderRefusesProduceAfterSeeingNewerEpoch: once a replica has recorded
// a newer epoch (a new leader's ReplicaState or Replicate reached it before
// the controller's metadata did), it no longer acts as leader of the old one.
func TestLeaderRefusesProduceAfterSeeingNewerEpoch(t *testing.T) {
	tests := []struct {
		name   string
		fences func(t *testing.T, p *replication.Partition, l *storage.Log)
	}{
		{"replica state", func(t *testing.T, p *replication.Partition, _ *storage.Log) {
			_, err := p.ReplicaState(&transport.ReplicaStateRequest{Topic: "orders", LeaderEpoch: 2})
			require.NoError(t, err)
		}},
		{"replicate", func(t *testing.T, p *replication.Partition, l *storage.Log) {
			b := batch(t, "new-leader", 1)
			b.Stamp(l.LogEndOffset(), 2, 1)
			w, err := p.Replicate(&transport.ReplicateRequest{Topic: "orders", LeaderEpoch: 2, LeaderID: 3, Batch: b})
			require.NoError(t, err)
			_, err = w(ctxTimeout(t, 5*time.Second))
			require.NoError(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, l := newPartition(t)
			require.NoError(t, p.SetState(soleLeader(1)))
			produce(t, p, "a", 1)

			tt.fences(t, p, l)
			assert.Equal(t, int32(2), p.FencedEpoch())
			end := l.LogEndOffset()

			_, err := p.Produce(batch(t, "old-epoch", 1))
			require.ErrorIs(t, err, replication.ErrNotLeader)
			assert.Equal(t, end, l.LogEndOffset(), "wrote as leader of an epoch it knows is over")

			require.ErrorIs(t, p.SetState(soleLeader(1)), replication.ErrStaleEpoch)
			require.NoError(t, p.SetState(soleLeader(3)))
			ack := produce(t, p, "new-epoch", 1)
			assert.Equal(t, int32(3), ack.LeaderEpoch)
		})
	}
}

func TestReplicateFencing(t *testing.T) {
	epochFile := filepath.Join(t.TempDir(), "leader-epoch")
	logDir := t.TempDir()
	l := openLog(t, logDir)
	p := replication.NewPartition("orders", 0, 2, l, testLogger(t), replication.Options{EpochFile: epochFile})
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 3, Active: []int32{self, 2}}))
	assert.Equal(t, int32(3), p.FencedEpoch())

	b := batch(t, "old", 1)
	b.Stamp(0, 2, 1)
	_, err := p.Replicate(&transport.ReplicateRequest{Topic: "orders", LeaderEpoch: 2, LeaderID: 4, Batch: b})
	require.ErrorIs(t, err, replication.ErrStaleEpoch)
	assert.Equal(t, int64(0), l.LogEndOffset())

	_, err = p.ReplicaState(&transport.ReplicaStateRequest{Topic: "orders", LeaderEpoch: 2})
	require.ErrorIs(t, err, replication.ErrStaleEpoch)

	b = batch(t, "current", 1)
	b.Stamp(0, 3, 1)
	w, err := p.Replicate(&transport.ReplicateRequest{Topic: "orders", LeaderEpoch: 3, LeaderID: self, Batch: b})
	require.NoError(t, err)
	end, err := w(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, int64(1), end)

	// The fenced epoch survives a restart.
	p.Close()
	again := replication.NewPartition("orders", 0, 2, l, testLogger(t), replication.Options{EpochFile: epochFile})
	t.Cleanup(again.Close)
	assert.Equal(t, int32(3), again.FencedEpoch())
	require.ErrorIs(t, again.SetState(replication.State{Leader: self, LeaderEpoch: 2, Active: []int32{self, 2}}), replication.ErrStaleEpoch)
}

// TestReplicateRefusesACorruptBatch: a Replicate request's batches are
// appended in order until one fails its checks; a flipped bit in the
// second is refused as an invalid batch (storage validates each, checksum
// and all) and nothing of it is written.
func TestReplicateRefusesACorruptBatch(t *testing.T) {
	l := openLog(t, t.TempDir())
	p := replication.NewPartition("orders", 0, 2, l, testLogger(t))
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}))
	first, second := batch(t, "first", 1), batch(t, "second", 2)
	first.Stamp(0, 1, 1)
	second.Stamp(1, 1, 1)
	second[len(second)-1] ^= 1
	_, err := p.Replicate(&transport.ReplicateRequest{Topic: "orders", LeaderEpoch: 1, LeaderID: self,
		Batch: append(append([]byte(nil), first...), second...)})
	require.ErrorIs(t, err, storage.ErrInvalidBatch)
	require.ErrorIs(t, err, record.ErrChecksum)
	assert.Equal(t, int64(1), l.LogEndOffset(), "the first batch is written, the corrupt one is not")
}

// TestCatchUpRacingProducers runs catch-ups (as an operator would) while
// producers keep writing. A catch-up copies up to the leader's log end,
// which may hold batches queued after it took its items; those must count
// as replicated, not be sent again (the follower would refuse them: their
// base offset is below its log end).
func TestCatchUpRacingProducers(t *testing.T) {
	pr := newPair(t)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	pr.waitInSync(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := tryProduce(pr.leader, fmt.Sprintf("g%d-%d", g, i), 1); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		}()
	}
	for range 300 {
		_, _, err := pr.leader.CatchUp(ctxTimeout(t, 10*time.Second), 2)
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	assert.Empty(t, failures, "produces failed while the follower was reachable")
	pr.waitInSync(t)
	assert.Equal(t, logBytes(t, pr.leaderLog), logBytes(t, pr.followerLog))
}

// A follower keeps the leader's HW as it learns it from replication, as
// far as its own log holds it: what a checkpoint of its HW keeps, and what
// it serves from if it is made leader.
func TestFollowerLearnsTheHighWatermark(t *testing.T) {
	pr := newPair(t)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	for i := range 3 {
		_, err := tryProduce(pr.leader, fmt.Sprint("v", i), 2)
		require.NoError(t, err)
	}
	// Each Replicate carries the HW before its own batch: after the third
	// batch the follower knows the first two were acknowledged.
	assert.Equal(t, int64(6), pr.leader.HighWatermark())
	assert.Equal(t, int64(4), pr.follower.HighWatermark())
}

// A leader that has never reached an active follower since it began to
// lead (all nodes restarted at once, and the follower is not up yet)
// refuses a write before appending it: NotReady, which a client retries,
// and the log is untouched. Once the follower has answered, a failure to
// reach it is a replication failure again (the leader keeps its copy).
func TestLeaderRefusesWritesUntilItHasReachedItsFollowers(t *testing.T) {
	pr := newPair(t)
	down := fmt.Errorf("%w: dial 127.0.0.1:1: connection refused", transport.ErrBrokerNotAvailable)
	pr.peer.setDown(down)
	pr.setState(t, replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}})
	require.Eventually(t, func() bool {
		fs := pr.leader.Followers()
		return len(fs) == 1 && fs[0].Error != ""
	}, 10*time.Second, 5*time.Millisecond, "the sender never tried its follower")

	_, err := tryProduce(pr.leader, "early", 3)
	require.ErrorIs(t, err, replication.ErrNotReady)
	assert.Contains(t, err.Error(), "active follower 2 has not answered")
	assert.Equal(t, int64(0), pr.leaderLog.LogEndOffset(), "nothing was appended")

	pr.peer.setDown(nil)
	pr.waitInSync(t)
	ack := produce(t, pr.leader, "reached", 2)
	assert.Equal(t, int64(0), ack.BaseOffset)

	pr.peer.setDown(down)
	_, err = tryProduce(pr.leader, "later", 1)
	require.ErrorIs(t, err, replication.ErrReplicationFailed, "a follower reached once and lost since is a replication failure")
}

// slowDurableLog holds the leader's own fsync of each write until the
// test releases it, so that a follower can acknowledge first.
type slowDurableLog struct {
	*storage.Log
	release chan struct{}
}

func (l *slowDurableLog) Write(b record.Batch, epoch int32) (storage.AppendResult, storage.Durable, error) {
	res, durable, err := l.Log.Write(b, epoch)
	if err != nil {
		return res, durable, err
	}
	return res, func(ctx context.Context) error {
		<-l.release
		return durable(ctx)
	}, nil
}

// TestHWPassesABatchWhoseProducerGaveUp: the follower acknowledges a
// batch before the leader's own copy is durable, and the producer gives
// up waiting. Once the leader's copy is durable the HW passes the batch,
// with no write after it: the follower's round ended before and could not
// move it, and the producer, gone, did not. Before, the HW stayed below a
// batch every replica held until the next write (a Durable Streams
// producer's retries of it, duplicates, waited for it in vain).
func TestHWPassesABatchWhoseProducerGaveUp(t *testing.T) {
	leaderLog := &slowDurableLog{Log: openLog(t, t.TempDir()), release: make(chan struct{})}
	followerLog := openLog(t, t.TempDir())
	follower := replication.NewPartition("orders", 0, 2, followerLog, testLogger(t))
	t.Cleanup(follower.Close)
	peer := &localPeer{p: follower}
	leader := replication.NewPartition("orders", 0, self, leaderLog, testLogger(t),
		replication.Options{Peers: func(int32) (replication.Peer, error) { return peer, nil }, ReplicationTimeout: 5 * time.Second})
	t.Cleanup(leader.Close)
	s := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}
	require.NoError(t, follower.SetState(s))
	require.NoError(t, leader.SetState(s))
	require.Eventually(t, func() bool {
		fs := leader.Followers()
		return len(fs) == 1 && fs[0].State == transport.FollowerInSync
	}, 10*time.Second, 5*time.Millisecond)

	// Each round the producer gives up before its wait can end: its wait
	// returns an error, one way or the other (the follower's answer and
	// the cancellation race), and the HW must pass the batch regardless.
	for i := range 16 {
		wait, err := leader.Produce(batch(t, fmt.Sprint("g", i), 1))
		require.NoError(t, err)
		end := leaderLog.LogEndOffset()
		require.Eventually(t, func() bool { return followerLog.DurableEndOffset() == end }, 10*time.Second, time.Millisecond,
			"round %d: the follower holds the batch", i)
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan struct{})
		go func() { wait(gone); close(done) }()
		leaderLog.release <- struct{}{}
		<-done
		require.Eventually(t, func() bool { return leader.HighWatermark() == end }, 5*time.Second, time.Millisecond,
			"round %d: the HW passes the batch both replicas hold (HW %d, log end %d)", i, leader.HighWatermark(), end)
	}
}

// retentionDuringRead applies retention below limit before its first
// Read past the first, as a retention pass running beside a reader would.
type retentionDuringRead struct {
	*storage.Log
	limit int64
	reads int
}

func (l *retentionDuringRead) Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error) {
	if l.reads++; l.reads == 2 {
		if _, err := l.Log.DeleteBelow(ctx, l.limit); err != nil {
			return nil, err
		}
	}
	return l.Log.Read(ctx, offset, maxBytes, limit, buf)
}

// TestVerifyDuringRetentionIsNoDamage: retention deletes segments while a
// deep check (verify --deep, a recovery's digest) walks them. The check
// fails with OffsetOutOfRange, and the replica is not marked damaged: it
// keeps taking writes. Before, the read below the new log start was
// taken for damage, and a leader stopped taking writes until an operator
// failed it over.
func TestVerifyDuringRetentionIsNoDamage(t *testing.T) {
	l, err := storage.Open(t.TempDir(), storage.Options{Logger: testLogger(t), SegmentBytes: 4 << 10})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	log := &retentionDuringRead{Log: l}
	p := replication.NewPartition("orders", 0, self, log, testLogger(t))
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self}}))
	for i := range 40 {
		produce(t, p, fmt.Sprint("v", i), 20)
	}
	end := l.LogEndOffset()
	log.limit = end / 2
	// Verify reads 1 MiB at a time but one segment per read: the second
	// read comes after retention deleted what it was to read.
	err = p.Verify(context.Background(), 0, end)
	require.Error(t, err)
	require.Greater(t, l.LogStartOffset(), int64(0), "retention deleted segments during the check")
	assert.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
	assert.NotErrorIs(t, err, storage.ErrCorrupt)
	assert.NoError(t, p.Problem(), "the replica is not damaged")
	_, err = tryProduce(p, "after", 1)
	assert.NoError(t, err, "it takes writes")
}

// leaderAndFollower makes broker self the leader of orders/0 at epoch 1
// on leaderLog, and broker 2 its active follower on followerLog, reached
// through the returned peer; it returns the state both hold.
func leaderAndFollower(t *testing.T, leaderLog *storage.Log, followerLog replication.Log) (leader, follower *replication.Partition, peer *localPeer, both replication.State) {
	t.Helper()
	follower = replication.NewPartition("orders", 0, 2, followerLog, testLogger(t))
	t.Cleanup(follower.Close)
	peer = &localPeer{p: follower}
	leader = replication.NewPartition("orders", 0, self, leaderLog, testLogger(t), replication.Options{
		Peers:              func(int32) (replication.Peer, error) { return peer, nil },
		ReplicationTimeout: 5 * time.Second,
	})
	t.Cleanup(leader.Close)
	both = replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}
	require.NoError(t, follower.SetState(both))
	require.NoError(t, leader.SetState(both))
	return leader, follower, peer, both
}

// fullDiskLog is a log whose leader-stamped appends (a follower's) fail
// for want of space while full is set, as on a full disk: the append does
// not happen and the log goes on.
type fullDiskLog struct {
	*storage.Log
	full atomic.Bool
}

func (l *fullDiskLog) WriteExact(b record.Batch) (storage.AppendResult, storage.Durable, error) {
	if l.full.Load() {
		return storage.AppendResult{}, nil, fmt.Errorf("write segment 0: %w", storage.ErrNoSpace)
	}
	return l.Log.WriteExact(b)
}

// A follower whose disk is full holds up every write to its partition: it
// reports that as its problem, with the command that drops it, from the
// first append it fails until one succeeds; and only while it is an
// active follower, since outside the active set nothing waits for it.
func TestFollowerWithAFullDiskHasAProblemUntilAnAppendSucceeds(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	followerLog := &fullDiskLog{Log: openLog(t, t.TempDir())}
	leader, follower, _, both := leaderAndFollower(t, leaderLog, followerLog)
	produce(t, leader, "before", 2)
	require.NoError(t, follower.Problem())

	followerLog.full.Store(true)
	_, err := tryProduce(leader, "full", 1)
	require.ErrorIs(t, err, replication.ErrReplicationFailed)
	assert.Contains(t, err.Error(), "broker 2: write segment 0: storage: no space left on device")
	problem := follower.Problem()
	require.ErrorIs(t, problem, replication.ErrReplicaUnhealthy, "one failed append is enough")
	assert.ErrorIs(t, problem, storage.ErrNoSpace)
	assert.Contains(t, problem.Error(), "the disk of broker 2 is full")
	assert.Contains(t, problem.Error(), "gostream-ctl failover --topic orders --partition 0 --broker 2")
	st, err := follower.ReplicaState(&transport.ReplicaStateRequest{Topic: "orders", Partition: 0})
	require.NoError(t, err)
	assert.Equal(t, problem.Error(), st.Problem, "the controller and recovery read the problem in ReplicaState")
	assert.NoError(t, leader.Problem(), "the leader's own disk has space")

	// Dropped from the active set, nothing waits for it.
	dropped := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self}}
	require.NoError(t, follower.SetState(dropped))
	assert.NoError(t, follower.Problem())
	require.NoError(t, follower.SetState(both))
	assert.Error(t, follower.Problem(), "active again before an append succeeded")

	// Space back: the leader's catch-up appends, and the problem is gone.
	followerLog.full.Store(false)
	require.Eventually(t, func() bool { return follower.Problem() == nil }, 10*time.Second, 5*time.Millisecond)
	produce(t, leader, "after", 1)
	assert.Equal(t, leaderLog.LogEndOffset(), followerLog.LogEndOffset())
}

// A leader cut off while its partition failed over learns it from its
// followers, which the controller fenced: ConfirmLeader steps it down
// (ErrNotLeader) where it would otherwise answer reads of state a new
// leader has passed. A follower that cannot be asked confirms nothing.
func TestConfirmLeaderAsksTheFollowers(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	leader, follower, peer, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
	produce(t, leader, "before", 2)
	require.NoError(t, leader.ConfirmLeader(context.Background()))

	peer.setDown(fmt.Errorf("%w: connection refused", transport.ErrBrokerNotAvailable))
	err := leader.ConfirmLeader(context.Background())
	require.Error(t, err, "a follower that cannot be asked confirms nothing")
	assert.NotErrorIs(t, err, replication.ErrNotLeader)
	peer.setDown(nil)

	// The controller fences the follower at epoch 2 and promotes it.
	_, err = follower.ReplicaState(&transport.ReplicaStateRequest{Topic: "orders", Partition: 0, LeaderEpoch: 2})
	require.NoError(t, err)
	err = leader.ConfirmLeader(context.Background())
	require.ErrorIs(t, err, replication.ErrNotLeader)
	assert.Contains(t, err.Error(), "has seen leader epoch 2")
	_, err = tryProduce(leader, "after", 1)
	assert.ErrorIs(t, err, replication.ErrNotLeader, "it stepped down")
}

// A leader asked to recover a replica it still counts in its active set
// has not applied the metadata that left the replica out yet (a move of
// elect-leaders just made): that passes, NotReady, not an error of no
// kind (it reached the operator as "Unknown").
func TestRecoverOfAReplicaStillActiveHereIsNotReady(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	leader, _, _, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
	_, err := leader.RecoverFollower(context.Background(), 2)
	require.ErrorIs(t, err, replication.ErrNotReady)
	assert.Contains(t, err.Error(), "broker 2 is still active for orders/0")
}

// gatedPeer is a localPeer whose SendReplicate waits for its gate to open
// (or for its context to end) before it sends.
type gatedPeer struct {
	*localPeer
	gmu  sync.Mutex
	gate chan struct{}
}

// shut makes later sends wait for open.
func (gp *gatedPeer) shut() {
	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	gp.gate = make(chan struct{})
}

func (gp *gatedPeer) open() {
	gp.gmu.Lock()
	defer gp.gmu.Unlock()
	close(gp.gate)
}

func (gp *gatedPeer) SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error) {
	gp.gmu.Lock()
	gate := gp.gate
	gp.gmu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return gp.localPeer.SendReplicate(ctx, req)
}

// TestProduceHeldReleasesOnceTheSenderIsDone: a batch whose memory the
// caller reuses (a request body the server gives back) is held by each
// follower's queue until its sender is done with it, past a produce's wait
// that gave up, and released when leadership changes with it queued.
func TestProduceHeldReleasesOnceTheSenderIsDone(t *testing.T) {
	followerLog := openLog(t, t.TempDir())
	follower := replication.NewPartition("orders", 0, 2, followerLog, testLogger(t))
	t.Cleanup(follower.Close)
	gp := &gatedPeer{localPeer: &localPeer{p: follower}, gate: make(chan struct{})}
	leader := replication.NewPartition("orders", 0, self, openLog(t, t.TempDir()), testLogger(t),
		replication.Options{Peers: func(int32) (replication.Peer, error) { return gp, nil }, ReplicationTimeout: 5 * time.Second})
	t.Cleanup(leader.Close)
	st := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}
	require.NoError(t, follower.SetState(st))
	require.NoError(t, leader.SetState(st))
	gp.open() // the first round finds the follower
	require.Eventually(t, func() bool {
		fs := leader.Followers()
		return len(fs) == 1 && fs[0].State == transport.FollowerInSync
	}, 10*time.Second, 5*time.Millisecond)

	var holds, releases atomic.Int32
	hold := func() func() {
		holds.Add(1)
		return func() { releases.Add(1) }
	}
	gp.shut() // the sender waits at the next send
	b := batch(t, "held", 3)
	wait, err := leader.ProduceHeld(b, hold)
	require.NoError(t, err)
	assert.Equal(t, int32(1), holds.Load(), "one hold for the one follower")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = wait(ctx)
	cancel()
	require.Error(t, err, "the follower has not answered")
	assert.Equal(t, int32(0), releases.Load(), "the sender still needs the batch after the wait gave up")
	gp.open()
	require.Eventually(t, func() bool { return releases.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return followerLog.LogEndOffset() == 3 }, 10*time.Second, time.Millisecond)

	// Queued when leadership changes: released by the stopped sender.
	gp.shut()
	for range 3 {
		_, err := leader.ProduceHeld(batch(t, "queued", 1), hold)
		require.NoError(t, err)
	}
	assert.Equal(t, int32(4), holds.Load())
	require.NoError(t, leader.SetState(replication.State{Leader: 2, LeaderEpoch: 2, Active: []int32{self, 2}}))
	require.Eventually(t, func() bool { return releases.Load() == 4 }, 10*time.Second, time.Millisecond,
		"every hold released once the senders stopped: %d of %d", releases.Load(), holds.Load())
}

// countingPeer counts the Replicate requests handed to it.
type countingPeer struct {
	*localPeer
	sent  atomic.Int64
	delay time.Duration // added to each answer's wait, as a network's and a disk's would be
}

func (cp *countingPeer) SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error) {
	cp.sent.Add(1)
	w, err := cp.localPeer.SendReplicate(ctx, req)
	if err != nil || cp.delay == 0 {
		return w, err
	}
	return func(ctx context.Context) (int64, error) {
		time.Sleep(cp.delay)
		return w(ctx)
	}, nil
}

// syncWatchLog notes, as each write's fsync begins, how many Replicate
// requests its peers had been handed by then.
type syncWatchLog struct {
	*storage.Log
	sent         func() int64
	sentAtSyncMu sync.Mutex
	sentAtSync   []int64
}

func (l *syncWatchLog) Write(b record.Batch, epoch int32) (storage.AppendResult, storage.Durable, error) {
	res, durable, err := l.Log.Write(b, epoch)
	if err != nil {
		return res, durable, err
	}
	return res, func(ctx context.Context) error {
		l.sentAtSyncMu.Lock()
		l.sentAtSync = append(l.sentAtSync, l.sent())
		l.sentAtSyncMu.Unlock()
		return durable(ctx)
	}, nil
}

// leadCounted makes a leader (broker 1) of orders/0 writing to log, with
// n followers (brokers 2, 3, ...) reached through countingPeers, and
// waits until they are in sync.
func leadCounted(t *testing.T, log replication.Log, n int) (*replication.Partition, []*countingPeer) {
	t.Helper()
	peers := make([]*countingPeer, n)
	for i := range peers {
		fl := openLog(t, t.TempDir())
		f := replication.NewPartition("orders", 0, int32(i+2), fl, testLogger(t))
		t.Cleanup(f.Close)
		peers[i] = &countingPeer{localPeer: &localPeer{p: f}}
	}
	leader := replication.NewPartition("orders", 0, self, log, testLogger(t), replication.Options{
		Peers: func(id int32) (replication.Peer, error) {
			if id < 2 || int(id) > n+1 {
				return nil, fmt.Errorf("no broker %d", id)
			}
			return peers[id-2], nil
		},
		ReplicationTimeout: 5 * time.Second,
	})
	t.Cleanup(leader.Close)
	st := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self}}
	for i := range peers {
		st.Active = append(st.Active, int32(i+2))
	}
	for _, p := range peers {
		require.NoError(t, p.p.SetState(st))
	}
	require.NoError(t, leader.SetState(st))
	require.Eventually(t, func() bool {
		fs := leader.Followers()
		if len(fs) != n {
			return false
		}
		for _, f := range fs {
			if f.State != transport.FollowerInSync {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "followers never in sync: %+v", leader.Followers())
	return leader, peers
}

// TestBusyRoundsWaitForTheProducersTheyAnswered: synchronous producers
// that keep a partition busy share its rounds. A round that started at
// once after the one before would leave the producers that round just
// answered to the next, and they would fall into cohorts taking turns
// (measured here without the wait: two cohorts, 8.0-8.2 batches a
// Replicate request; with it 15.2-15.6, 11.9-14.5 under the race
// detector).
func TestBusyRoundsWaitForTheProducersTheyAnswered(t *testing.T) {
	const producers, each = 16, 40
	// One follower: with two, the producers a round to one answered come
	// back only once the other's round has answered them too.
	leader, peers := leadCounted(t, openLog(t, t.TempDir()), 1)
	for _, p := range peers {
		p.delay = 3 * time.Millisecond
	}
	// A first write from each, so that the rounds counted are those of
	// producers already under way.
	var wg sync.WaitGroup
	start := make(chan struct{})
	before := make([]int64, len(peers))
	errs := make(chan error, producers)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each + 1 {
				if j == 1 {
					<-start
				}
				if _, err := tryProduce(leader, fmt.Sprint("p", i, "-", j), 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Every producer's first write acknowledged: the rounds from here on
	// carry the counted writes.
	require.Eventually(t, func() bool { return leader.HighWatermark() >= producers }, 10*time.Second, time.Millisecond)
	for i, p := range peers {
		before[i] = p.sent.Load()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i, p := range peers {
		rounds := p.sent.Load() - before[i]
		perRound := float64(producers*each) / float64(rounds)
		t.Logf("follower %d: %d Replicate requests, %.1f batches each", i+2, rounds, perRound)
		assert.GreaterOrEqual(t, perRound, float64(producers)*0.625, "follower %d: batches a round, of %d producers", i+2, producers)
	}
}

// TestFollowersCopiesLeaveBeforeTheLeadersFsync: a produce's batch is on
// its way to every follower before the leader blocks in its own fsync,
// even on one processor: the senders it woke run first, so the copies do
// not wait for another thread to wake up or for the runtime to take the
// processor back from the fsync (a synchronous producer's latency with
// replicas is the slowest follower's round trip, which starts later
// otherwise).
func TestFollowersCopiesLeaveBeforeTheLeadersFsync(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var peers []*countingPeer
	log := &syncWatchLog{Log: openLog(t, t.TempDir()), sent: func() int64 { return peers[0].sent.Load() + peers[1].sent.Load() }}
	leader, peers := leadCounted(t, log, 2)

	for i := range 5 {
		before := peers[0].sent.Load() + peers[1].sent.Load()
		produce(t, leader, fmt.Sprint("b", i), 2)
		log.sentAtSyncMu.Lock()
		atSync := log.sentAtSync[len(log.sentAtSync)-1]
		log.sentAtSyncMu.Unlock()
		assert.Equal(t, before+2, atSync, "produce %d: Replicate requests handed out when the leader's fsync began", i)
	}
}

// unlearnedPeer is a localPeer of a broker whose metadata is behind: it
// answers that it holds no replica of the partition until learn is
// called, as a node's handler does.
type unlearnedPeer struct {
	*localPeer
	learned atomic.Bool
	refused atomic.Int64
}

func (up *unlearnedPeer) learn() { up.learned.Store(true) }

func (up *unlearnedPeer) unknown() error {
	if up.learned.Load() {
		return nil
	}
	up.refused.Add(1)
	return fmt.Errorf("%w: broker 2 holds no replica of orders/0", transport.ErrUnknownPartition)
}

func (up *unlearnedPeer) SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error) {
	if err := up.unknown(); err != nil {
		return func(context.Context) (int64, error) { return 0, err }, nil
	}
	return up.localPeer.SendReplicate(ctx, req)
}

func (up *unlearnedPeer) ReplicaState(ctx context.Context, req *transport.ReplicaStateRequest) (*transport.ReplicaStateResponse, error) {
	if err := up.unknown(); err != nil {
		return nil, err
	}
	return up.localPeer.ReplicaState(ctx, req)
}

// TestWritesWaitForAFollowerToLearnOfANewPartition: a partition just
// created or added reaches its leader's metadata before a follower's,
// which answers that it holds no replica of it until its own metadata
// catches up. Writes meanwhile wait for the follower, and are
// acknowledged once it has them, instead of failing as replication
// failures of unknown outcome.
func TestWritesWaitForAFollowerToLearnOfANewPartition(t *testing.T) {
	followerLog := openLog(t, t.TempDir())
	follower := replication.NewPartition("orders", 0, 2, followerLog, testLogger(t))
	t.Cleanup(follower.Close)
	peer := &unlearnedPeer{localPeer: &localPeer{p: follower}}
	leaderLog := openLog(t, t.TempDir())
	leader := replication.NewPartition("orders", 0, self, leaderLog, testLogger(t), replication.Options{
		Peers:              func(int32) (replication.Peer, error) { return peer, nil },
		ReplicationTimeout: 5 * time.Second,
	})
	t.Cleanup(leader.Close)
	st := replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self, 2}}
	require.NoError(t, follower.SetState(st))
	require.NoError(t, leader.SetState(st))

	type result struct {
		ack replication.Ack
		err error
	}
	results := make(chan result, 3)
	for i := range 3 {
		go func() {
			ack, err := tryProduce(leader, fmt.Sprint("b", i), 2)
			results <- result{ack, err}
		}()
	}
	require.Eventually(t, func() bool { return peer.refused.Load() >= 3 }, 5*time.Second, time.Millisecond,
		"the follower was asked only %d times", peer.refused.Load())
	select {
	case r := <-results:
		t.Fatalf("a write ended before the follower knew of the partition: %+v", r)
	default:
	}
	peer.learn()
	for range 3 {
		r := <-results
		require.NoError(t, r.err)
		assert.Equal(t, []int32{1, 2}, r.ack.Replicas)
	}
	assert.Equal(t, int64(6), followerLog.DurableEndOffset())
	assert.Equal(t, logBytes(t, leaderLog), logBytes(t, followerLog))
}
