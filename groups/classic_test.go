package groups

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

func newClassicCoordinator(log *memLog, clock *fakeClock, delay time.Duration) *Coordinator {
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: delay})
	c.Start(0)
	return c
}

// classicJoin is a JoinGroup of a consumer offering "range" with meta.
func classicJoin(member, instance, meta string) ClassicJoin {
	return ClassicJoin{Group: "g", MemberID: member, InstanceID: instance, ClientID: "client", ClientHost: "/127.0.0.1",
		ProtocolType: "consumer", Protocols: []Protocol{{Name: "range", Metadata: []byte(meta)}},
		SessionTimeout: 10 * time.Second, RebalanceTime: 30 * time.Second, RequireMemberID: true}
}

// advance moves the clock on, under the coordinator's lock, which every
// reading of it holds.
func advance(c *Coordinator, clock *fakeClock, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clock.t = clock.t.Add(d)
}

type joinOutcome struct {
	res ClassicJoined
	err error
}

// joinAsync sends a JoinGroup in a goroutine: it waits for the join phase.
func joinAsync(c *Coordinator, req ClassicJoin) chan joinOutcome {
	out := make(chan joinOutcome, 1)
	go func() {
		res, err := c.JoinClassic(context.Background(), req)
		out <- joinOutcome{res, err}
	}()
	return out
}

func waitJoin(t *testing.T, ch chan joinOutcome) ClassicJoined {
	t.Helper()
	select {
	case o := <-ch:
		require.NoError(t, o.err)
		return o.res
	case <-time.After(10 * time.Second):
		t.Fatal("JoinGroup not answered")
	}
	return ClassicJoined{}
}

// newMember gets a member id (MEMBER_ID_REQUIRED) and joins with it.
func newMember(t *testing.T, c *Coordinator, meta string) chan joinOutcome {
	t.Helper()
	res, err := c.JoinClassic(context.Background(), classicJoin("", "", meta))
	require.ErrorIs(t, err, ErrMemberIDRequired)
	require.NotEmpty(t, res.MemberID)
	return joinAsync(c, classicJoin(res.MemberID, "", meta))
}

// syncAll sends every member's SyncGroup, the leader's with assignments
// naming each member, and returns what each got.
func syncAll(t *testing.T, c *Coordinator, joined ...ClassicJoined) map[string]string {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]string{}
	for _, j := range joined {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := ClassicSync{Group: "g", MemberID: j.MemberID, Generation: j.Generation, ProtocolType: "consumer", Protocol: "range"}
			if j.MemberID == j.Leader {
				req.Assignments = map[string][]byte{}
				for _, m := range j.Members {
					req.Assignments[m.MemberID] = []byte("for " + m.MemberID)
				}
				req.Assignments["not-a-member"] = []byte("dropped")
			}
			res, err := c.SyncClassic(context.Background(), req)
			assert.NoError(t, err)
			mu.Lock()
			got[j.MemberID] = string(res.Assignment)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

// Two Kafka consumers form a group: ids handed out first, a generation
// whose leader alone gets the members' metadata, the leader's
// assignments handed to each member, heartbeats and commits checked
// against the generation, and every generation written.
func TestClassicJoinSyncHeartbeatCommit(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, -1)
	ctx := context.Background()

	a1 := waitJoin(t, newMember(t, c, "meta-a"))
	assert.Equal(t, int32(1), a1.Generation)
	assert.Equal(t, a1.MemberID, a1.Leader, "a lone member leads")
	assert.Equal(t, "range", a1.Protocol)
	require.Len(t, a1.Members, 1)
	assert.Equal(t, map[string]string{a1.MemberID: "for " + a1.MemberID}, syncAll(t, c, a1))
	require.NoError(t, c.HeartbeatClassic(ctx, "g", a1.MemberID, "", 1))

	// b joins: a's heartbeat says rebalance, a joins again, both get
	// generation 2.
	bch := newMember(t, c, "meta-b")
	require.Eventually(t, func() bool {
		return errors.Is(c.HeartbeatClassic(ctx, "g", a1.MemberID, "", 1), ErrRebalanceInProgress)
	}, 5*time.Second, time.Millisecond)
	a2 := waitJoin(t, joinAsync(c, classicJoin(a1.MemberID, "", "meta-a")))
	b2 := waitJoin(t, bch)
	assert.Equal(t, int32(2), a2.Generation)
	assert.Equal(t, a1.MemberID, a2.Leader, "the leader that rejoined stays the leader")
	assert.Len(t, a2.Members, 2, "the leader gets every member")
	assert.Empty(t, b2.Members, "a follower gets none")
	for _, m := range a2.Members {
		want := map[string]string{a1.MemberID: "meta-a", b2.MemberID: "meta-b"}[m.MemberID]
		assert.Equal(t, want, string(m.Protocols[0].Metadata))
	}
	got := syncAll(t, c, a2, b2)
	assert.Equal(t, "for "+b2.MemberID, got[b2.MemberID])

	// Heartbeats and commits of the wrong generation, an unknown member
	// or from outside the group write nothing.
	n := log.len()
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", a1.MemberID, "", 1), ErrIllegalGeneration)
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", "nobody", "", 2), ErrUnknownMember)
	off := []ClassicOffset{{Topic: "t", Partition: 0, Offset: 7}}
	_, err := c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: b2.MemberID, Generation: 1, Offsets: off})
	assert.ErrorIs(t, err, ErrIllegalGeneration)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: "nobody", Generation: 2, Offsets: off})
	assert.ErrorIs(t, err, ErrUnknownMember)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "g", Generation: -1, Offsets: off})
	assert.ErrorIs(t, err, ErrUnknownMember)
	assert.Equal(t, n, log.len(), "refused commits write nothing")
	errs, err := c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: b2.MemberID, Generation: 2,
		Offsets: append(off, ClassicOffset{Topic: "t", Partition: 9, Offset: 1}, ClassicOffset{Topic: "t", Partition: 1, Offset: 3, Metadata: string(make([]byte, MaxMetadataBytes+1))})})
	require.NoError(t, err)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrUnknownPartition)
	assert.ErrorIs(t, errs[2], ErrMetadataTooLarge)
	cm, ok := c.State().Committed("g", "t", 0)
	require.True(t, ok)
	assert.Equal(t, int64(7), cm.Offset)
	assert.Equal(t, int32(2), cm.MemberEpoch)
	// A committed offset never goes back.
	errs, err = c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: b2.MemberID, Generation: 2, Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 5}}})
	require.NoError(t, err)
	assert.ErrorIs(t, errs[0], ErrOffsetRegression)

	// A native member cannot join the group, and a Kafka member cannot
	// join a native group.
	_, err = c.Heartbeat(ctx, &transport.GroupHeartbeatRequest{Group: "g", Topics: []string{"t"}, SessionTimeoutMs: 3000})
	assert.ErrorIs(t, err, ErrInconsistentProtocol)
	_, err = c.Heartbeat(ctx, &transport.GroupHeartbeatRequest{Group: "native", Topics: []string{"t"}, SessionTimeoutMs: 3000})
	require.NoError(t, err)
	nj := classicJoin("", "", "x")
	nj.Group = "native"
	_, err = c.JoinClassic(ctx, nj)
	assert.ErrorIs(t, err, ErrInconsistentProtocol)
	// Nor can a member of another protocol type, or without a protocol
	// in common.
	other := classicJoin("", "", "x")
	other.ProtocolType = "connect"
	_, err = c.JoinClassic(ctx, other)
	assert.ErrorIs(t, err, ErrInconsistentProtocol)

	// Both leave: the group empties at generation 3, and takes commits
	// from outside.
	errs, err = c.LeaveClassic(ctx, "g", []ClassicLeaving{{MemberID: a2.MemberID}, {MemberID: b2.MemberID}, {MemberID: "nobody"}})
	require.NoError(t, err)
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.ErrorIs(t, errs[2], ErrUnknownMember)
	require.NoError(t, c.Expire(ctx))
	assert.Equal(t, int32(3), c.State().Group("g").ClassicFloor)
	assert.Empty(t, c.State().Group("g").Classic.Members)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "g", Generation: -1, Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 9}}})
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "g"))
}

// A Kafka group whose members all left is described as the Kafka group
// it is, with its protocol type and its committed offsets, once its live
// state is gone and on a coordinator rebuilt from the log: the same
// protocol type Kafka's DescribeGroups gives, never a native group's.
func TestClassicEmptyGroupKeepsItsProtocolType(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, -1)
	ctx := context.Background()
	a := waitJoin(t, newMember(t, c, "meta-a"))
	syncAll(t, c, a)
	_, err := c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: a.MemberID, Generation: a.Generation, Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 3}}})
	require.NoError(t, err)
	_, err = c.LeaveClassic(ctx, "g", []ClassicLeaving{{MemberID: a.MemberID}})
	require.NoError(t, err)
	require.NoError(t, c.Expire(ctx))
	c.mu.Lock()
	_, live := c.classic["g"]
	c.mu.Unlock()
	require.False(t, live, "the empty group's live state is dropped")

	rebuilt := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: -1})
	for i, r := range log.recs {
		rebuilt.Load(r, int64(i))
	}
	rebuilt.Start(int64(len(log.recs)))
	for name, c := range map[string]*Coordinator{"after the members left": c, "rebuilt from the log": rebuilt} {
		t.Run(name, func(t *testing.T) {
			d, err := c.Describe(ctx, "g")
			require.NoError(t, err)
			assert.Equal(t, "consumer", d.ProtocolType)
			assert.Equal(t, "empty", d.State)
			assert.Equal(t, int32(2), d.GroupEpoch, "the generation it emptied at")
			assert.Empty(t, d.Members)
			require.Len(t, d.Offsets, 1)
			assert.Equal(t, int64(3), d.Offsets[0].Offset)
			kafka, err := c.KafkaGroups(ctx)
			require.NoError(t, err)
			require.Len(t, kafka, 1)
			assert.Equal(t, d.ProtocolType, kafka[0].ProtocolType, "as Kafka's ListGroups says")
		})
	}
}

// A new coordinator rebuilt from the log holds the last stable
// generation: its members heartbeat and commit on without a rebalance. A
// generation whose join phase completed but that never got its
// assignments is not reused: its members are told to join again.
func TestClassicRebuild(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, -1)
	ctx := context.Background()
	a := waitJoin(t, newMember(t, c, "meta-a"))
	syncAll(t, c, a)

	rebuild := func(snapshotEvery int) *Coordinator {
		t.Helper()
		n := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: -1, SnapshotEvery: snapshotEvery})
		for i, r := range log.recs {
			n.Load(r, int64(i))
		}
		n.Start(int64(len(log.recs)))
		return n
	}
	c2 := rebuild(0)
	require.NoError(t, c2.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation))
	_, err := c2.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: a.MemberID, Generation: a.Generation, Offsets: []ClassicOffset{{Topic: "t", Partition: 1, Offset: 4}}})
	require.NoError(t, err)
	s, err := c2.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.MemberID, Generation: a.Generation})
	require.NoError(t, err)
	assert.Equal(t, "for "+a.MemberID, string(s.Assignment), "the assignment outlives the coordinator")

	// A second member's join completes generation 2 on c2, which is
	// dropped before the leader's SyncGroup.
	bch := newMember(t, c2, "meta-b")
	require.Eventually(t, func() bool {
		return errors.Is(c2.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation), ErrRebalanceInProgress)
	}, 5*time.Second, time.Millisecond)
	a2 := waitJoin(t, joinAsync(c2, classicJoin(a.MemberID, "", "meta-a")))
	waitJoin(t, bch)
	require.Equal(t, int32(2), a2.Generation)

	c3 := rebuild(0)
	err = c3.HeartbeatClassic(ctx, "g", a.MemberID, "", a2.Generation)
	assert.ErrorIs(t, err, ErrRebalanceInProgress, "generation 2 is never served as stable")
	_, err = c3.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.MemberID, Generation: a2.Generation})
	assert.ErrorIs(t, err, ErrRebalanceInProgress)
	a3 := waitJoin(t, joinAsync(c3, classicJoin(a.MemberID, "", "meta-a")))
	assert.Equal(t, int32(3), a3.Generation, "the next generation is above every one written")

	// A snapshot restates the classic state.
	c4 := rebuild(1)
	_, err = c4.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: a.MemberID, Generation: a3.Generation, Offsets: []ClassicOffset{{Topic: "t", Partition: 1, Offset: 5}}})
	require.ErrorIs(t, err, ErrRebalanceInProgress, "generation 3 is completing")
	_, ok := c4.LastSnapshot()
	assert.False(t, ok)
	c4.mu.Lock()
	c4.writeSnapshot()
	c4.mu.Unlock()
	c5 := rebuild(0)
	assert.Equal(t, c4.State().Group("g").ClassicFloor, c5.State().Group("g").ClassicFloor)
	assert.Equal(t, c4.State().Group("g").Classic, c5.State().Group("g").Classic)
}

// A static member that joins again without its member id replaces its
// old id: in Stable it gets the same generation and assignment with no
// rebalance, and the old id is fenced.
func TestClassicStaticReplacement(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, -1)
	ctx := context.Background()
	first := waitJoin(t, joinAsync(c, classicJoin("", "inst-1", "m")))
	assert.Contains(t, first.MemberID, "inst-1-", "a static member's id starts with its instance id")
	syncAll(t, c, first)

	again, err := c.JoinClassic(ctx, classicJoin("", "inst-1", "m"))
	require.NoError(t, err)
	assert.Equal(t, first.Generation, again.Generation, "no rebalance")
	assert.NotEqual(t, first.MemberID, again.MemberID)
	assert.Equal(t, first.MemberID, again.Leader, "the leader id as it was: the member syncs as a follower")
	s, err := c.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: again.MemberID, InstanceID: "inst-1", Generation: again.Generation})
	require.NoError(t, err)
	assert.Equal(t, "for "+first.MemberID, string(s.Assignment), "it keeps its assignment")
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", first.MemberID, "inst-1", first.Generation), ErrFencedInstanceID)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "g", MemberID: first.MemberID, InstanceID: "inst-1", Generation: first.Generation,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 1}}})
	assert.ErrorIs(t, err, ErrFencedInstanceID)
}

// A member not heard from within its session is removed and the group
// rebalances; one waiting in a JoinGroup is alive however long it waits;
// members that do not sync in time are removed.
func TestClassicSessionsAndDeadlines(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, -1)
	ctx := context.Background()
	a := waitJoin(t, newMember(t, c, "a"))
	syncAll(t, c, a)
	bch := newMember(t, c, "b") // waits: a has not rejoined
	require.Eventually(t, func() bool {
		return errors.Is(c.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation), ErrRebalanceInProgress)
	}, 5*time.Second, time.Millisecond, "b waits in its JoinGroup")
	advance(c, clock, 11*time.Second)
	require.NoError(t, c.Expire(ctx))
	// a expired; b, waiting, is alive and the join completes with it alone.
	b := waitJoin(t, bch)
	assert.Equal(t, b.MemberID, b.Leader)
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation), ErrUnknownMember)
	// b never syncs: at the rebalance timeout it is removed.
	advance(c, clock, 31*time.Second)
	require.NoError(t, c.Expire(ctx))
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", b.MemberID, "", b.Generation), ErrUnknownMember)
}

// From Empty the first join phase waits the initial delay for more
// members, so members started together share one generation.
func TestClassicInitialDelay(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := newClassicCoordinator(log, clock, 3*time.Second)
	ach := newMember(t, c, "a")
	bch := newMember(t, c, "b")
	select {
	case <-ach:
		t.Fatal("the join phase ended before the initial delay")
	case <-time.After(50 * time.Millisecond):
	}
	advance(c, clock, 3*time.Second)
	require.NoError(t, c.Expire(context.Background()))
	a, b := waitJoin(t, ach), waitJoin(t, bch)
	assert.Equal(t, int32(1), a.Generation)
	assert.Equal(t, int32(1), b.Generation)
}

// Bad input: protocols over the member bound, more members than a group
// takes, an assignment over the bound, and requests naming another
// group's member are refused, and none writes anything.
func TestClassicBounds(t *testing.T) {
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: -1, MaxMemberBytes: 1024})
	c.Start(0)
	ctx := context.Background()

	big := classicJoin("", "", string(make([]byte, 1025)))
	_, err := c.JoinClassic(ctx, big)
	assert.ErrorIs(t, err, ErrGroupFull)
	short := classicJoin("", "", "m")
	short.SessionTimeout = 10 * time.Millisecond
	_, err = c.JoinClassic(ctx, short)
	assert.ErrorIs(t, err, ErrInvalidSessionTimeout)
	none := classicJoin("", "", "m")
	none.Protocols = nil
	_, err = c.JoinClassic(ctx, none)
	assert.ErrorIs(t, err, ErrInconsistentProtocol)
	assert.Zero(t, log.len())

	// A thousand ids handed out fill the group: the next is refused.
	for range MaxMembers {
		_, err := c.JoinClassic(ctx, classicJoin("", "", "m"))
		require.ErrorIs(t, err, ErrMemberIDRequired)
	}
	_, err = c.JoinClassic(ctx, classicJoin("", "", "m"))
	assert.ErrorIs(t, err, ErrGroupFull)
	// The ids not used expire with their session.
	advance(c, clock, 11*time.Second)
	require.NoError(t, c.Expire(ctx))

	a := waitJoin(t, newMember(t, c, "a"))
	// An assignment over the bound: the leader's SyncGroup is refused,
	// nothing is written, and the group rebalances.
	n := log.len()
	_, err = c.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
		Assignments: map[string][]byte{a.MemberID: make([]byte, 1025)}})
	assert.ErrorIs(t, err, ErrAssignmentTooLarge)
	assert.Equal(t, n, log.len())
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "g", a.MemberID, "", a.Generation), ErrRebalanceInProgress)
	// A member of this group is no member of another.
	assert.ErrorIs(t, c.HeartbeatClassic(ctx, "other", a.MemberID, "", a.Generation), ErrUnknownMember)
	_, err = c.SyncClassic(ctx, ClassicSync{Group: "other", MemberID: a.MemberID, Generation: a.Generation})
	assert.ErrorIs(t, err, ErrUnknownMember)
	_, err = c.CommitClassic(ctx, ClassicCommit{Group: "other", MemberID: a.MemberID, Generation: a.Generation,
		Offsets: []ClassicOffset{{Topic: "t", Partition: 0, Offset: 1}}})
	assert.ErrorIs(t, err, ErrIllegalGeneration)
	assert.Equal(t, n, log.len())
}

// The members of a classic group with their protocols take at most half
// a batch, so that its generation record, with the assignments (the
// other half), is written in one: a join that would pass it is
// GROUP_MAX_SIZE_REACHED, its id dropped so that the join phase does not
// wait for it, and the members that fit form the generation. Without the
// bound the phase's record did not fit in a batch, and every JoinGroup of
// the phase, and of each phase after it, failed with INVALID_REQUEST.
func TestClassicGroupRecordBound(t *testing.T) {
	const maxBatch = 64 << 10
	log, clock := &memLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now, InitialRebalanceDelay: -1,
		MaxMemberBytes: 1024, MaxBatchBytes: maxBatch})
	c.Start(0)
	ctx := context.Background()
	var ids []string
	for range 100 {
		res, err := c.JoinClassic(ctx, classicJoin("", "", "m"))
		require.ErrorIs(t, err, ErrMemberIDRequired)
		ids = append(ids, res.MemberID)
	}
	meta := string(make([]byte, 1024-len("range")))
	var outs []chan joinOutcome
	for _, id := range ids {
		outs = append(outs, joinAsync(c, classicJoin(id, "", meta)))
	}
	var joined []ClassicJoined
	full := 0
	for _, out := range outs {
		select {
		case o := <-out:
			if errors.Is(o.err, ErrGroupFull) {
				full++
				continue
			}
			require.NoError(t, o.err)
			joined = append(joined, o.res)
		case <-time.After(10 * time.Second):
			t.Fatal("JoinGroup not answered: the join phase waits for a refused id")
		}
	}
	t.Logf("%d members joined, %d refused", len(joined), full)
	assert.Equal(t, len(ids), len(joined)+full)
	assert.Greater(t, len(joined), 25, "as many as fit in half a batch")
	assert.Greater(t, full, 0, "not all fit")

	batchOf := func(r Record) int {
		k, v, err := r.Encode()
		require.NoError(t, err)
		b, err := record.AppendBatch(nil, []record.Record{{Key: k, Value: v}})
		require.NoError(t, err)
		return len(b)
	}
	last := func() Record {
		log.mu.Lock()
		defer log.mu.Unlock()
		return log.recs[len(log.recs)-1]
	}
	rec := last()
	require.Equal(t, KindClassic, rec.Kind)
	require.Len(t, rec.Classic.Members, len(joined))
	assert.LessOrEqual(t, batchOf(rec), maxBatch/2)

	// The leader's assignments, each at the bound: the stable generation
	// fits in one batch.
	var leader ClassicJoined
	for _, j := range joined {
		if j.MemberID == j.Leader {
			leader = j
		}
	}
	assignments := map[string][]byte{}
	for _, m := range leader.Members {
		assignments[m.MemberID] = make([]byte, 1024)
	}
	_, err := c.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: leader.MemberID, Generation: leader.Generation, Assignments: assignments})
	require.NoError(t, err)
	rec = last()
	require.True(t, rec.Classic.Stable)
	assert.LessOrEqual(t, batchOf(rec), maxBatch)
}
