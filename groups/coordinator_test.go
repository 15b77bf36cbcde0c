package groups

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// memLog is a Log in memory: every append is acknowledged at once (or
// fails, when failNext is set), and the records are kept in log order.
type memLog struct {
	mu       sync.Mutex
	recs     []Record
	failNext error
}

func (l *memLog) Append(recs []Record) (int64, func(context.Context) error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return 0, nil, err
	}
	for _, r := range recs {
		if _, _, err := r.Encode(); err != nil {
			return 0, nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	l.recs = append(l.recs, recs...)
	// An append's wait is for one caller, as the replicated log's is.
	var waited atomic.Bool
	return int64(len(l.recs)), func(context.Context) error {
		if waited.Swap(true) {
			panic("memLog: an append's wait called twice")
		}
		return nil
	}, nil
}

func (l *memLog) WaitAcked(context.Context, int64) error { return nil }
func (l *memLog) Confirm(context.Context) error          { return nil }
func (l *memLog) Done() <-chan struct{}                  { return nil }

func (l *memLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}

type fakeTopics map[string]int32

func (t fakeTopics) Topic(name string) (string, int32, bool) {
	n, ok := t[name]
	return "id-" + name, n, ok
}

func (t fakeTopics) HighWatermark(context.Context, string, int32, int64) (int64, error) {
	return 100, nil
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestCoordinator(log *memLog, clock *fakeClock) *Coordinator {
	n := 0
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now,
		NewMemberID: func() string { n++; return fmt.Sprintf("m%d", n) }})
	c.Start(0)
	return c
}

func join(t *testing.T, c *Coordinator, instance string) *transport.GroupHeartbeatResponse {
	t.Helper()
	resp, err := c.Heartbeat(context.Background(), &transport.GroupHeartbeatRequest{Group: "g", InstanceID: instance,
		Topics: []string{"t"}, SessionTimeoutMs: 3000})
	require.NoError(t, err)
	return resp
}

func beat(c *Coordinator, r *transport.GroupHeartbeatResponse, owned []transport.TopicPartitions) (*transport.GroupHeartbeatResponse, error) {
	return c.Heartbeat(context.Background(), &transport.GroupHeartbeatRequest{Group: "g", MemberID: r.MemberID,
		MemberEpoch: r.MemberEpoch, Topics: []string{"t"}, SessionTimeoutMs: 3000, Owned: owned})
}

func parts(tps []transport.TopicPartitions) []int32 {
	var out []int32
	for _, tp := range tps {
		out = append(out, tp.Partitions...)
	}
	return out
}

// Three members over six partitions get two each by range; when one
// leaves, a partition moves only once its owner has released it, and the
// members keep the partitions they had throughout.
func TestCoordinatorHandsOverIncrementally(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	a := join(t, c, "")
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, parts(a.Assigned), "a lone member gets every partition")
	b := join(t, c, "")
	assert.Empty(t, b.Assigned, "nothing until a releases what moves to b")
	// a heartbeats, owning all six: it is told its part (0-2).
	a2, err := beat(c, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, parts(a2.Assigned))
	// Until a says it released 3-5, b gets none of them.
	b2, err := beat(c, b, nil)
	require.NoError(t, err)
	assert.Empty(t, b2.Assigned)
	_, err = beat(c, a2, a2.Assigned)
	require.NoError(t, err)
	b3, err := beat(c, b, nil)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 4, 5}, parts(b3.Assigned))
	assert.Equal(t, "stable", groupState(c.State().Group("g")))

	// b's session runs out: its partitions go back to a, which never lost
	// its own.
	clock.t = clock.t.Add(2 * time.Second)
	_, err = beat(c, a2, a2.Assigned)
	require.NoError(t, err)
	clock.t = clock.t.Add(2 * time.Second)
	require.NoError(t, c.Expire(context.Background()))
	a4, err := beat(c, a2, a2.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2, 3, 4, 5}, parts(a4.Assigned))
	_, err = beat(c, b3, b3.Assigned)
	assert.ErrorIs(t, err, ErrUnknownMember, "an expired member is told to join again")
}

// Commits: never committed is not 0; regression, past the HW, unknown
// partitions and non-owners are refused and write nothing; a reset moves
// back only while the group is empty.
func TestCoordinatorCommitRules(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	ctx := context.Background()
	commit := func(member string, epoch int32, reset bool, p int32, off int64) error {
		return c.Commit(ctx, &transport.OffsetCommitRequest{Group: "p", MemberID: member, MemberEpoch: epoch, Reset: reset,
			Offsets: []transport.CommitOffset{{Topic: "t", Partition: p, Offset: off}}})
	}
	got, err := c.Committed(ctx, &transport.OffsetFetchRequest{Group: "p"})
	require.NoError(t, err)
	assert.Empty(t, got.Offsets, "never committed")
	require.NoError(t, commit("", transport.NoMemberEpoch, false, 0, 0))
	got, err = c.Committed(ctx, &transport.OffsetFetchRequest{Group: "p"})
	require.NoError(t, err)
	require.Len(t, got.Offsets, 1)
	assert.Equal(t, int64(0), got.Offsets[0].Offset, "a committed 0")
	require.NoError(t, commit("", transport.NoMemberEpoch, false, 0, 10))
	before := log.len()
	for name, err := range map[string]error{
		"regression":        commit("", transport.NoMemberEpoch, false, 0, 9),
		"past the HW":       commit("", transport.NoMemberEpoch, false, 0, 101),
		"negative":          commit("", transport.NoMemberEpoch, false, 0, -1),
		"unknown partition": commit("", transport.NoMemberEpoch, false, 6, 1),
		"unknown member":    commit("nobody", 1, false, 0, 11),
	} {
		assert.Error(t, err, name)
	}
	assert.ErrorIs(t, commit("", transport.NoMemberEpoch, false, 0, 9), ErrOffsetRegression)
	assert.ErrorIs(t, commit("", transport.NoMemberEpoch, false, 0, 101), ErrInvalidOffset)
	assert.ErrorIs(t, commit("", transport.NoMemberEpoch, false, 6, 1), ErrUnknownPartition)
	assert.Equal(t, before, log.len(), "a refused commit writes nothing")
	require.NoError(t, commit("", transport.NoMemberEpoch, true, 0, 3), "an explicit reset moves back")
	got, err = c.Committed(ctx, &transport.OffsetFetchRequest{Group: "p"})
	require.NoError(t, err)
	assert.Equal(t, int64(3), got.Offsets[0].Offset)

	// In a group with members, a commit from a member that does not own
	// the partition, or from its past epoch, is refused; a reset too.
	m, err := c.Heartbeat(ctx, &transport.GroupHeartbeatRequest{Group: "p", Topics: []string{"t"}})
	require.NoError(t, err)
	require.NotEmpty(t, m.Assigned)
	assert.ErrorIs(t, commit(m.MemberID, m.MemberEpoch+1, false, 0, 5), ErrFencedMember)
	assert.ErrorIs(t, commit("", transport.NoMemberEpoch, true, 0, 1), ErrGroupNotEmpty)
	require.NoError(t, commit(m.MemberID, m.MemberEpoch, false, 0, 5))
}

// A static member that comes back within its session gets its place, its
// partitions and the group epoch back, with no rebalance; its
// predecessor's requests are fenced. A second live member with the same
// instance id is refused.
func TestCoordinatorStaticMembership(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	a := join(t, c, "inst-a")
	b := join(t, c, "")
	a, err := beat(c, a, a.Assigned)
	require.NoError(t, err)
	_, err = beat(c, a, a.Assigned)
	require.NoError(t, err)
	b, err = beat(c, b, nil)
	require.NoError(t, err)
	require.Equal(t, []int32{3, 4, 5}, parts(b.Assigned))
	epoch := c.State().Group("g").GroupEpoch

	_, err = c.Heartbeat(context.Background(), &transport.GroupHeartbeatRequest{Group: "g", InstanceID: "inst-a", Topics: []string{"t"}, SessionTimeoutMs: 3000})
	assert.ErrorIs(t, err, ErrFencedInstanceID, "the first inst-a heartbeats")

	clock.t = clock.t.Add(time.Second) // a is killed; it heartbeats no more
	back := join(t, c, "inst-a")
	assert.Equal(t, a.MemberID, back.MemberID)
	assert.Equal(t, epoch, back.GroupEpoch, "no rebalance")
	assert.Equal(t, []int32{0, 1, 2}, parts(back.Assigned))
	_, err = beat(c, a, a.Assigned)
	assert.ErrorIs(t, err, ErrFencedMember, "the old process is fenced")
	err = c.Commit(context.Background(), &transport.OffsetCommitRequest{Group: "g", MemberID: a.MemberID, MemberEpoch: a.MemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "t", Partition: 0, Offset: 1}}})
	assert.ErrorIs(t, err, ErrFencedMember)
}

// A coordinator rebuilt from the log holds the same offsets and members;
// it hands out no partition until every member has said what it owns.
func TestCoordinatorRebuild(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	a := join(t, c, "")
	b := join(t, c, "")
	a, _ = beat(c, a, a.Assigned)
	_, _ = beat(c, a, a.Assigned)
	b, _ = beat(c, b, nil)
	require.NoError(t, c.Commit(context.Background(), &transport.OffsetCommitRequest{Group: "g", MemberID: b.MemberID, MemberEpoch: b.MemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "t", Partition: 4, Offset: 7}}}))

	next := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now})
	for i, r := range log.recs {
		next.Load(r, int64(i))
	}
	next.Start(int64(len(log.recs)))
	got, ok := next.State().Committed("g", "t", 4)
	require.True(t, ok)
	assert.Equal(t, int64(7), got.Offset)
	// b first, claiming nothing: a has not said what it owns yet, so b is
	// given nothing new.
	b2, err := beat(next, b, nil)
	require.NoError(t, err)
	assert.Empty(t, b2.Assigned)
	a2, err := beat(next, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, parts(a2.Assigned))
	b3, err := beat(next, b, nil)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 4, 5}, parts(b3.Assigned))
}

// A record the log refused to append is not applied.
func TestCoordinatorFailedAppendChangesNothing(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(log, clock)
	log.failNext = fmt.Errorf("disk full")
	err := c.Commit(context.Background(), &transport.OffsetCommitRequest{Group: "g", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "t", Partition: 0, Offset: 5}}})
	require.Error(t, err)
	_, ok := c.State().Committed("g", "t", 0)
	assert.False(t, ok)
}

// image is a state's logged part, for comparing rebuilds: everything but
// who owns what now.
func image(s *State) map[string]Group {
	out := map[string]Group{}
	for _, name := range s.Groups() {
		g := *s.Group(name)
		g.Owners = nil
		if len(g.Target) == 0 {
			g.Target = nil
		}
		out[name] = g
	}
	return out
}

// rebuild loads a new coordinator from log.recs[from:], as a broker whose
// log starts at from would.
func rebuild(log *memLog, from int) *Coordinator {
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6, "u": 3}})
	for i := from; i < len(log.recs); i++ {
		c.Load(log.recs[i], int64(i))
	}
	c.Start(int64(len(log.recs)))
	return c
}

// Every SnapshotEvery records the coordinator appends a snapshot; a
// rebuild from the newest complete snapshot alone (the log before it
// deleted) holds what a rebuild of the whole log holds, and a snapshot cut
// short is never taken for one.
func TestCoordinatorSnapshots(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	n := 0
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6, "u": 3}, Now: clock.now, SnapshotEvery: 40, MaxBatchBytes: 2 << 10,
		NewMemberID: func() string { n++; return fmt.Sprintf("m%d", n) }})
	c.Start(0)
	ctx := context.Background()
	// Groups of both kinds: progress identities, and one with members,
	// a target and commits.
	a := join(t, c, "")
	b := join(t, c, "static-b")
	a, _ = beat(c, a, a.Assigned)
	_, _ = beat(c, a, a.Assigned)
	b, _ = beat(c, b, nil)
	for i := range 120 {
		g := fmt.Sprintf("p%d", i%7)
		require.NoError(t, c.Commit(ctx, &transport.OffsetCommitRequest{Group: g, MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "t", Partition: int32(i % 6), Offset: int64(i / 2), Metadata: fmt.Sprint("m", i)}}}))
		if i%10 == 0 {
			require.NoError(t, c.Commit(ctx, &transport.OffsetCommitRequest{Group: "g", MemberID: b.MemberID, MemberEpoch: b.MemberEpoch,
				Offsets: []transport.CommitOffset{{Topic: "t", Partition: 4, Offset: int64(i / 2)}}}))
		}
	}
	require.NoError(t, c.Delete(ctx, "p3"))
	start, ok := c.LastSnapshot()
	require.True(t, ok, "a snapshot after 40 records")
	var starts, ends int
	for _, r := range log.recs {
		switch r.Kind {
		case KindSnapshotStart:
			starts++
		case KindSnapshotEnd:
			ends++
		}
	}
	assert.GreaterOrEqual(t, ends, 2, "one every 40 records, or twice the entries the last restated")
	assert.Equal(t, starts, ends)
	assert.Equal(t, KindSnapshotStart, log.recs[start].Kind)

	// Any replica finds the same floor from the records alone.
	assert.Equal(t, start, floorOf(t, log, 0))
	assert.Equal(t, start, floorOf(t, log, int(start)-3))

	want := image(c.State())
	assert.Equal(t, want, image(rebuild(log, 0).State()), "the whole log")
	assert.Equal(t, want, image(rebuild(log, int(start)).State()), "from the newest snapshot")
	for back := 1; back <= 5; back++ {
		// Retention deletes whole segments: a log may start a little
		// before the snapshot, inside a history it does not hold whole.
		assert.Equal(t, want, image(rebuild(log, int(start)-back).State()), "from %d records before the newest snapshot", back)
	}
	// From the newest snapshot on, a new coordinator finds it too.
	got, ok := rebuild(log, int(start)).LastSnapshot()
	assert.True(t, ok)
	assert.Equal(t, start, got)

	// A snapshot cut short, then more records: a rebuild from the complete
	// one before it holds the same as the coordinator that wrote them.
	cut := log.len()
	c.writeSnapshot()
	log.recs = log.recs[:cut+2] // the start and one group record
	c2 := rebuild(log, int(start))
	require.NoError(t, c2.Commit(ctx, &transport.OffsetCommitRequest{Group: "p0", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "u", Partition: 1, Offset: 9}}}))
	wantAfter := image(c2.State())
	assert.Equal(t, wantAfter, image(rebuild(log, int(start)).State()))
	assert.Equal(t, wantAfter, image(rebuild(log, 0).State()))
	got, _ = rebuild(log, int(start)).LastSnapshot()
	assert.Equal(t, start, got, "the cut snapshot is not complete")
	assert.Equal(t, start, floorOf(t, log, 0), "nor is it to a replica")
	// A rebuild from the cut snapshot's start alone would lack groups: it
	// is never the start of retention, and never replaces the state.
	assert.NotEqual(t, wantAfter, image(rebuild(log, cut).State()))
}

// floorOf is where a SnapshotFloor that reads log.recs[from:] puts the
// newest complete snapshot (-1 for none).
func floorOf(t *testing.T, log *memLog, from int) int64 {
	t.Helper()
	f := NewSnapshotFloor(int64(from))
	for i := from; i < len(log.recs); i++ {
		k, v, err := log.recs[i].Encode()
		require.NoError(t, err)
		f.Observe(int64(i), k, v)
	}
	got, ok := f.Floor()
	if !ok {
		return -1
	}
	return got
}
