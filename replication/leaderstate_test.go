package replication_test

import (
	"context"
	"errors"
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

// valueState is a leader state for the tests: the values of the log's
// records, in log order, as a user keeps them beside the log.
type valueState struct {
	lead *replication.Leadership
	mu   sync.Mutex
	vals []string
}

func (s *valueState) apply(b record.Batch) error {
	return b.Records(func(r *record.Record) bool {
		s.vals = append(s.vals, string(r.Value))
		return true
	})
}

// appendValues appends a batch of n values tagged tag through the state's
// leadership and applies it, as a user does: under its lock, waiting for
// the acknowledgement after it.
func (s *valueState) appendValues(t testing.TB, tag string, n int) (int64, func(context.Context) error, error) {
	b := batch(t, tag, n)
	s.mu.Lock()
	defer s.mu.Unlock()
	end, wait, err := s.lead.Append(b)
	if err != nil {
		return 0, nil, err
	}
	require.NoError(t, s.apply(b))
	return end, wait, nil
}

func (s *valueState) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.vals...)
}

// valueStates returns LeaderStates of valueState and the number of loads
// it has run. A load waits for gate, when set, before it reads the log.
func valueStates(cfg replication.LeaderStatesConfig[string, *valueState], gate chan struct{}) (*replication.LeaderStates[string, *valueState], *atomic.Int32) {
	loads := &atomic.Int32{}
	cfg.Load = func(ctx context.Context, key string, lead *replication.Leadership) (*valueState, error) {
		loads.Add(1)
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		s := &valueState{lead: lead}
		_, err := lead.Replay(ctx, s.apply)
		return s, err
	}
	return replication.NewLeaderStates(cfg), loads
}

// Replay reads the log from its start, which retention moved, to its end,
// each batch once in order; an error of the user's stops it as it is.
func TestReplayReadsTheLogFromItsStartToItsEnd(t *testing.T) {
	l, err := storage.Open(t.TempDir(), storage.Options{SegmentBytes: 1024, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	p := replication.NewPartition("orders", 0, self, l, testLogger(t))
	t.Cleanup(p.Close)
	require.NoError(t, p.SetState(soleLeader(1)))
	for range 20 {
		produce(t, p, "v", 5)
	}
	_, err = l.DeleteBelow(context.Background(), 50)
	require.NoError(t, err)
	start := l.LogStartOffset()
	require.Greater(t, start, int64(0), "retention deleted no segment")

	lead, err := p.Leadership()
	require.NoError(t, err)
	var bases []int64
	var n int
	end, err := lead.Replay(ctxTimeout(t, 5*time.Second), func(b record.Batch) error {
		bases = append(bases, b.BaseOffset())
		n += int(b.RecordCount())
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(100), end)
	require.NotEmpty(t, bases)
	assert.Equal(t, start, bases[0], "the first batch is the one at the log start")
	assert.Equal(t, int(100-start), n, "every record from the start to the end, once")
	assert.IsIncreasing(t, bases)

	boom := errors.New("not a record of mine")
	calls := 0
	_, err = lead.Replay(ctxTimeout(t, 5*time.Second), func(record.Batch) error {
		calls++
		return boom
	})
	assert.Equal(t, boom, err)
	assert.Equal(t, 1, calls)
}

// An append returns the log end after it and a wait that returns once the
// follower holds it; WaitAcked waits for the high watermark to pass an
// end, and fails when the context ends first.
func TestAppendAndWaitAcked(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	leader, _, peer, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
	produce(t, leader, "before", 2)
	lead, err := leader.Leadership()
	require.NoError(t, err)
	assert.Equal(t, int32(1), lead.Epoch())

	end, wait, err := lead.Append(batch(t, "a", 3))
	require.NoError(t, err)
	assert.Equal(t, int64(5), end)
	require.NoError(t, wait(ctxTimeout(t, 10*time.Second)))
	assert.Equal(t, int64(5), leader.HighWatermark())
	require.NoError(t, lead.WaitAcked(ctxTimeout(t, time.Second), end))

	peer.setDown(errNetwork)
	end, wait, err = lead.Append(batch(t, "b", 1))
	require.NoError(t, err)
	assert.Equal(t, int64(6), end)
	require.ErrorIs(t, wait(ctxTimeout(t, 10*time.Second)), replication.ErrReplicationFailed)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, lead.WaitAcked(ctx, end), context.DeadlineExceeded, "the follower does not hold offset 5")

	peer.setDown(nil)
	done := make(chan error, 1)
	go func() { done <- lead.WaitAcked(context.Background(), end) }()
	_, _, err = leader.CatchUp(ctxTimeout(t, 10*time.Second), 2)
	require.NoError(t, err)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitAcked did not return once the follower caught up")
	}
}

// Concurrent callers share one load, Peek answers ErrLoading meanwhile
// without waiting, and all get the same state, built from the log.
func TestLeaderStatesShareOneLoadAndAnswerLoading(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	produce(t, p, "old", 2)
	gate := make(chan struct{})
	states, loads := valueStates(replication.LeaderStatesConfig[string, *valueState]{}, gate)
	t.Cleanup(states.Close)

	_, _, err := states.Peek("k")
	require.ErrorIs(t, err, replication.ErrNotLeader, "nothing begun")
	require.NoError(t, states.Begin(context.Background(), "k", p))
	_, _, err = states.Peek("k")
	require.ErrorIs(t, err, replication.ErrLoading)

	const callers = 5
	got := make(chan *valueState, callers)
	for range callers {
		go func() {
			s, _, err := states.Get(context.Background(), "k", p)
			assert.NoError(t, err)
			got <- s
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err = states.Get(ctx, "k", p)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a Get waits for the load")
	close(gate)
	first := <-got
	for range callers - 1 {
		assert.Same(t, first, <-got)
	}
	assert.Equal(t, int32(1), loads.Load(), "one load for every caller")
	assert.Equal(t, []string{"old-0", "old-1"}, first.values())
	s, lead, err := states.Peek("k")
	require.NoError(t, err)
	assert.Same(t, first, s)
	assert.Equal(t, int32(1), lead.Epoch())
	assert.Equal(t, map[string]*valueState{"k": first}, states.Ready())
}

// A new leader epoch (the same broker leading again, as elect-leaders
// does) ends the old leadership: its state appends nothing more, and the
// next Get builds a new state from the log, which holds what the old one
// appended.
func TestLeaderStatesNewEpochBuildsANewState(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	states, loads := valueStates(replication.LeaderStatesConfig[string, *valueState]{}, nil)
	t.Cleanup(states.Close)
	ctx := ctxTimeout(t, 10*time.Second)

	old, oldLead, err := states.Get(ctx, "k", p)
	require.NoError(t, err)
	_, wait, err := old.appendValues(t, "e1", 2)
	require.NoError(t, err)
	require.NoError(t, wait(ctx))

	require.NoError(t, p.SetState(soleLeader(2)))
	select {
	case <-oldLead.Done():
	default:
		t.Fatal("the leadership at epoch 1 is not done at epoch 2")
	}
	assert.False(t, oldLead.Current())
	_, _, err = old.appendValues(t, "late", 1)
	require.ErrorIs(t, err, replication.ErrNotLeader, "a state of epoch 1 appends at epoch 2")
	assert.ErrorIs(t, oldLead.Confirm(ctx), replication.ErrNotLeader, "the replica leads, but not at epoch 1")
	_, _, err = states.Peek("k")
	assert.ErrorIs(t, err, replication.ErrNotLeader)

	s, lead, err := states.Get(ctx, "k", p)
	require.NoError(t, err)
	assert.NotSame(t, old, s)
	assert.Equal(t, int32(2), lead.Epoch())
	assert.Equal(t, int32(2), loads.Load())
	assert.Equal(t, []string{"e1-0", "e1-1"}, s.values())
	require.NoError(t, lead.Confirm(ctx))
}

// A failed append's wait drops the state: it appends nothing more
// (ErrStateDropped), Peek says it is loading, and the next Get builds it
// again from the leader's log, which kept the records. Configured to keep
// it, the state stays and appends on.
func TestLeaderStatesFailedAckDropsTheState(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "rebuild", true: "keep"}[keep], func(t *testing.T) {
			leaderLog := openLog(t, t.TempDir())
			leader, _, peer, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
			states, loads := valueStates(replication.LeaderStatesConfig[string, *valueState]{AckWait: 5 * time.Second, KeepOnFailedAck: keep}, nil)
			t.Cleanup(states.Close)
			ctx := ctxTimeout(t, 20*time.Second)

			s, _, err := states.Get(ctx, "k", leader)
			require.NoError(t, err)
			peer.setDown(errNetwork)
			_, wait, err := s.appendValues(t, "lost", 1)
			require.NoError(t, err)
			require.ErrorIs(t, wait(ctx), replication.ErrReplicationFailed)
			peer.setDown(nil)

			if keep {
				got, _, err := states.Peek("k")
				require.NoError(t, err)
				assert.Same(t, s, got)
				_, _, err = s.appendValues(t, "more", 1)
				require.NoError(t, err)
				assert.Equal(t, int32(1), loads.Load())
				return
			}
			_, _, err = states.Peek("k")
			require.ErrorIs(t, err, replication.ErrLoading)
			assert.Empty(t, states.Ready())
			_, _, err = s.appendValues(t, "more", 1)
			require.ErrorIs(t, err, replication.ErrStateDropped)
			assert.Equal(t, int64(1), leaderLog.LogEndOffset(), "nothing appended through a dropped state")

			again, _, err := states.Get(ctx, "k", leader)
			require.NoError(t, err)
			assert.NotSame(t, s, again)
			assert.Equal(t, int32(2), loads.Load())
			assert.Equal(t, []string{"lost-0"}, again.values(), "the leader's log keeps what it appended")
			_, wait, err = again.appendValues(t, "next", 1)
			require.NoError(t, err)
			require.NoError(t, wait(ctx))
		})
	}
}

// A load that fails is answered as such: Begin leaves it (Peek says why),
// and the next Get tries again.
func TestLeaderStatesFailedLoad(t *testing.T) {
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	var fail atomic.Bool
	fail.Store(true)
	boom := errors.New("unreadable")
	var loads atomic.Int32
	states := replication.NewLeaderStates(replication.LeaderStatesConfig[int32, *valueState]{
		Load: func(ctx context.Context, _ int32, lead *replication.Leadership) (*valueState, error) {
			loads.Add(1)
			if fail.Load() {
				return nil, boom
			}
			return &valueState{lead: lead}, nil
		},
	})
	t.Cleanup(states.Close)
	ctx := ctxTimeout(t, 10*time.Second)

	_, _, err := states.Get(ctx, 0, p)
	require.ErrorIs(t, err, replication.ErrLoadFailed)
	assert.ErrorIs(t, err, boom)
	require.NoError(t, states.Begin(ctx, 0, p))
	_, _, err = states.Peek(0)
	assert.ErrorIs(t, err, replication.ErrLoadFailed)
	assert.Equal(t, int32(1), loads.Load(), "Begin does not load again what failed")

	fail.Store(false)
	_, _, err = states.Get(ctx, 0, p)
	require.NoError(t, err)
	assert.Equal(t, int32(2), loads.Load())
}

// When the leadership moves to another broker its users are told (Done),
// the state is no longer served, its appends are refused, and Retain
// drops it; a load under way when its key is dropped is canceled.
func TestLeaderStatesLeadershipMoved(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	leader, _, _, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
	gate := make(chan struct{})
	states, _ := valueStates(replication.LeaderStatesConfig[string, *valueState]{}, nil)
	t.Cleanup(states.Close)
	ctx := ctxTimeout(t, 10*time.Second)

	s, lead, err := states.Get(ctx, "k", leader)
	require.NoError(t, err)
	require.NoError(t, lead.Confirm(ctx))
	moved := replication.State{Leader: 2, LeaderEpoch: 2, Active: []int32{2, self}}
	require.NoError(t, leader.SetState(moved))
	select {
	case <-lead.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed when the leadership moved")
	}
	_, _, err = states.Peek("k")
	require.ErrorIs(t, err, replication.ErrNotLeader)
	_, _, err = states.Get(ctx, "k", leader)
	require.ErrorIs(t, err, replication.ErrNotLeader)
	_, _, err = s.appendValues(t, "late", 1)
	require.ErrorIs(t, err, replication.ErrNotLeader)
	assert.ErrorIs(t, lead.Confirm(ctx), replication.ErrNotLeader)
	assert.Empty(t, states.Ready())
	require.NoError(t, lead.WaitAcked(ctx, 0), "nothing to wait for below 0")

	// A load under way for a key that Retain lets go ends.
	p, _ := newPartition(t)
	require.NoError(t, p.SetState(soleLeader(1)))
	blocked, _ := valueStates(replication.LeaderStatesConfig[string, *valueState]{}, gate)
	require.NoError(t, blocked.Begin(ctx, "gone", p))
	blocked.Retain(func(string) bool { return false })
	_, _, err = blocked.Peek("gone")
	require.ErrorIs(t, err, replication.ErrNotLeader)
	closed := make(chan struct{})
	go func() { blocked.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the dropped load did not end")
	}
}

// WaitAcked counts the high watermark only while its leadership lasts: a
// replica that stopped leading, was cut back by the next leader and filled
// by it past end does not hold what the old leadership appended below end
// (a chaos run acknowledged an idempotent producer's retried batch so).
func TestWaitAckedEndsWithTheLeadership(t *testing.T) {
	leaderLog := openLog(t, t.TempDir())
	leader, _, peer, _ := leaderAndFollower(t, leaderLog, openLog(t, t.TempDir()))
	produce(t, leader, "before", 2)
	lead, err := leader.Leadership()
	require.NoError(t, err)
	peer.setDown(errNetwork)
	end, wait, err := lead.Append(batch(t, "lost", 1))
	require.NoError(t, err)
	require.Error(t, wait(ctxTimeout(t, 10*time.Second)), "the follower does not hold it")
	done := make(chan error, 1)
	go func() { done <- lead.WaitAcked(context.Background(), end) }()

	// The next leader (broker 3, epoch 2) cuts this replica back to what
	// it holds and fills it past end with records of its own.
	require.NoError(t, leader.Truncate(ctxTimeout(t, 5*time.Second), &transport.TruncateReplicaRequest{Topic: "orders", LeaderEpoch: 2, Offset: end - 1}))
	b := batch(t, "next-leader", 2)
	b.Stamp(end-1, 2, 1)
	w, err := leader.Replicate(&transport.ReplicateRequest{Topic: "orders", LeaderEpoch: 2, LeaderID: 3, HighWatermark: end + 1, Batch: b})
	require.NoError(t, err)
	_, err = w(ctxTimeout(t, 5*time.Second))
	require.NoError(t, err)
	select {
	case err := <-done:
		require.ErrorIs(t, err, replication.ErrNotLeader, "what the old leadership appended at %d is gone", end-1)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitAcked did not return once the leadership ended")
	}
}
