package quorum

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// testGroup is three candidates on raft's in-memory transport, with real
// stores on disk.
type testGroup struct {
	t       *testing.T
	first   *metadata.Cluster // the seed's first metadata, if any
	dirs    map[int32]string
	members map[int32]*Group
	trans   map[int32]*raft.InmemTransport
	cands   []Candidate
}

func newTestGroup(t *testing.T, n int) *testGroup { return newSeededGroup(t, n, nil) }

// newSeededGroup is newTestGroup whose seed's log begins with first.
func newSeededGroup(t *testing.T, n int, first *metadata.Cluster) *testGroup {
	g := &testGroup{t: t, first: first, dirs: map[int32]string{}, members: map[int32]*Group{}, trans: map[int32]*raft.InmemTransport{}}
	for id := int32(1); id <= int32(n); id++ {
		g.cands = append(g.cands, Candidate{ID: id, Addr: fmt.Sprintf("cand-%d", id)})
		g.dirs[id] = t.TempDir()
	}
	for _, c := range g.cands {
		g.start(c.ID)
	}
	t.Cleanup(func() {
		for _, m := range g.members {
			m.Close()
		}
	})
	return g
}

// start opens candidate id on a fresh transport joined to the others;
// candidate 1 seeds.
func (g *testGroup) start(id int32) {
	g.t.Helper()
	c := g.cands[id-1]
	_, tr := raft.NewInmemTransport(raft.ServerAddress(c.Addr))
	for oid, o := range g.trans {
		if oid == id {
			continue
		}
		tr.Connect(raft.ServerAddress(g.cands[oid-1].Addr), o)
		o.Connect(raft.ServerAddress(c.Addr), tr)
	}
	g.trans[id] = tr
	m, err := Open(Config{Dir: g.dirs[id], Self: c, Candidates: g.cands, Seed: id == 1, Transport: tr,
		First: g.first, FirstHistory: firstHistory(g.first),
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
	require.NoError(g.t, err)
	g.members[id] = m
}

// kill stops candidate id and cuts it off.
func (g *testGroup) kill(id int32) {
	g.t.Helper()
	require.NoError(g.t, g.members[id].Close())
	delete(g.members, id)
	g.trans[id].DisconnectAll()
	for _, o := range g.trans {
		o.Disconnect(raft.ServerAddress(g.cands[id-1].Addr))
	}
	delete(g.trans, id)
}

// leader waits for one candidate to lead.
func (g *testGroup) leader() *Group {
	g.t.Helper()
	var l *Group
	require.Eventually(g.t, func() bool {
		for _, m := range g.members {
			if m.IsLeader() {
				l = m
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no leader elected")
	return l
}

func testMeta(epoch int64) *metadata.Cluster {
	return &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: epoch}
}

func event(what string) transport.HistoryEvent {
	return transport.HistoryEvent{Time: time.Unix(1_700_000_000, 0).UTC(), Requester: "test", ChangeResult: transport.ChangeResult{Note: what}}
}

// waitEpoch waits until every running candidate has applied epoch.
func (g *testGroup) waitEpoch(epoch int64) {
	g.t.Helper()
	require.Eventually(g.t, func() bool {
		for _, m := range g.members {
			if meta := m.Metadata(); meta == nil || meta.Epoch != epoch {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "epoch %d not applied everywhere", epoch)
}

// Changes are committed by the group and applied on every candidate; a
// change from an old view is refused and changes nothing; a candidate
// that is not the leader says which one is; when the leader dies another
// takes over with every committed change, and the old leader's state
// catches up when it returns.
func TestGroupCommitsAndSurvivesTheLeader(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	l := g.leader()
	require.NoError(t, l.Propose(ctx, NoMetadata, testMeta(1), []transport.HistoryEvent{event("created")}))
	require.NoError(t, l.Propose(ctx, 1, testMeta(2), nil))
	g.waitEpoch(2)

	err := l.Propose(ctx, 1, testMeta(3), nil)
	require.ErrorIs(t, err, ErrConflict, "a change from epoch 1 when 2 is committed")
	assert.Equal(t, int64(2), l.Metadata().Epoch)
	require.ErrorIs(t, l.Propose(ctx, NoMetadata, testMeta(1), nil), ErrConflict, "a second first metadata")

	for _, m := range g.members {
		if m == l {
			continue
		}
		err := m.Propose(ctx, 2, testMeta(3), nil)
		var nl *NotLeaderError
		require.ErrorAs(t, err, &nl)
		assert.Equal(t, l.cfg.Self, nl.Leader, "the follower names the leader")
		assert.ErrorIs(t, err, ErrNotLeader)
	}

	old := l.cfg.Self.ID
	g.kill(old)
	l2 := g.leader()
	require.NotEqual(t, old, l2.cfg.Self.ID)
	require.NoError(t, l2.Barrier(ctx))
	assert.Equal(t, int64(2), l2.Metadata().Epoch, "the new leader has every committed change")
	require.NoError(t, l2.Propose(ctx, 2, testMeta(3), []transport.HistoryEvent{event("after")}))

	g.start(old)
	g.waitEpoch(3)
	h := g.members[old].History()
	require.Len(t, h, 2)
	assert.Equal(t, "created", h[0].Note)
	assert.Equal(t, "after", h[1].Note)
}

// A candidate restarted after a snapshot has the state from the
// snapshot and the entries after it.
func TestGroupRestartsFromSnapshot(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	l := g.leader()
	require.NoError(t, l.Propose(ctx, NoMetadata, testMeta(1), nil))
	require.NoError(t, l.Record(ctx, []transport.HistoryEvent{event("one")}))
	g.waitEpoch(1)
	var follower int32
	for id, m := range g.members {
		if m != l {
			follower = id
		}
	}
	require.NoError(t, g.members[follower].raft.Snapshot().Error())
	require.NoError(t, l.Propose(ctx, 1, testMeta(2), []transport.HistoryEvent{event("two")}))
	g.waitEpoch(2)

	g.kill(follower)
	g.start(follower)
	m := g.members[follower]
	require.Eventually(t, func() bool { return m.Metadata() != nil && m.Metadata().Epoch == 2 }, 10*time.Second, 10*time.Millisecond)
	h := m.History()
	require.Len(t, h, 2)
	assert.Equal(t, []string{"one", "two"}, []string{h[0].Note, h[1].Note})
}

// Damaged state stops the candidate with the path and how to rebuild it;
// nothing is rewritten.
func TestGroupRefusesDamagedState(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	l := g.leader()
	require.NoError(t, l.Propose(ctx, NoMetadata, testMeta(1), nil))
	g.waitEpoch(1)
	var follower int32
	for id, m := range g.members {
		if m != l {
			follower = id
		}
	}
	require.NoError(t, g.members[follower].raft.Snapshot().Error())
	g.kill(follower)
	dir := g.dirs[follower]

	snaps, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	data, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(snaps[0], data, 0o644))
	_, tr := raft.NewInmemTransport("cand-x")
	_, err = Open(Config{Dir: dir, Self: g.cands[follower-1], Candidates: g.cands, Transport: tr})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), filepath.Join(dir, "snapshots"))
	assert.Contains(t, err.Error(), fmt.Sprintf("gostream-ctl controller remove --id %d", follower))
	after, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	assert.Equal(t, data, after, "the damaged snapshot is left as it was")

	// A damaged log store.
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(snaps[0], data, 0o644))
	db := filepath.Join(dir, "raft.db")
	raw, err := os.ReadFile(db)
	require.NoError(t, err)
	for i := 0; i < 64; i++ {
		raw[i] ^= 0xff // the first meta page
	}
	for i := 4096; i < 4096+64; i++ {
		raw[i] ^= 0xff // the second
	}
	require.NoError(t, os.WriteFile(db, raw, 0o600))
	_, err = Open(Config{Dir: dir, Self: g.cands[follower-1], Candidates: g.cands, Transport: tr})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), db)
}

// The leader can be moved on purpose; a removal that would leave fewer
// reachable candidates than a quorum is refused, and one that keeps a
// quorum is made.
func TestGroupTransferAndMembership(t *testing.T) {
	g := newTestGroup(t, 3)
	ctx := context.Background()
	l := g.leader()
	require.NoError(t, l.Propose(ctx, NoMetadata, testMeta(1), nil))
	var to int32
	for id, m := range g.members {
		if m != l {
			to = id
		}
	}
	require.NoError(t, l.Transfer(ctx, to))
	require.Eventually(t, func() bool { return g.members[to].IsLeader() }, 10*time.Second, 10*time.Millisecond)
	l = g.members[to]
	require.ErrorIs(t, l.Transfer(ctx, 9), ErrInvalid)

	// One follower dies; removing the other live one would leave the
	// leader and the dead one: refused.
	var dead, live int32
	for id, m := range g.members {
		if m == l {
			continue
		}
		if dead == 0 {
			dead = id
		} else {
			live = id
		}
	}
	g.kill(dead)
	require.Eventually(t, func() bool {
		for _, m := range l.Status().Members {
			if m.ID == dead && !m.Reachable {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the leader never saw the dead candidate unreachable")
	err := l.Remove(ctx, live)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "fewer than the 2 a quorum needs")
	require.NoError(t, l.Remove(ctx, dead), "removing the dead one keeps a quorum")
	st := l.Status()
	assert.Len(t, st.Members, 2)
	assert.Equal(t, "Leader", st.State)
	require.NoError(t, l.Propose(ctx, 1, testMeta(2), nil), "the two left commit")
	require.ErrorIs(t, l.Remove(ctx, dead), ErrInvalid, "not a member any more")
}

// A malformed entry, which no candidate of ours writes, changes nothing.
func TestFSMRefusesMalformedEntries(t *testing.T) {
	f := &fsm{}
	for _, data := range [][]byte{nil, {9, '{', '}'}, {entryVersion, '{'}, {entryVersion, '{', '}'}, append([]byte{entryVersion}, `{"kind":"change"}`...),
		append([]byte{entryVersion}, `{"kind":"change","base":-1,"meta":{"version":1}}`...)} {
		res := f.Apply(&raft.Log{Type: raft.LogCommand, Data: data})
		a, ok := res.(applied)
		require.True(t, ok)
		assert.True(t, errors.Is(a.err, ErrMalformedEntry), "%q: %v", data, a.err)
		assert.Nil(t, f.meta)
	}
}

func firstHistory(first *metadata.Cluster) []transport.HistoryEvent {
	if first == nil {
		return nil
	}
	return []transport.HistoryEvent{event("the single controller's trail")}
}

// TestSeedsFirstMetadataIsInTheLog: a seed given its first metadata
// writes it into the log it bootstraps, so every candidate applies it
// once the first leader commits anything, and no leader ever holds an
// empty state. Restarted, the seed bootstraps nothing again.
func TestSeedsFirstMetadataIsInTheLog(t *testing.T) {
	first := testMeta(7)
	g := newSeededGroup(t, 3, first)
	assert.True(t, g.members[1].Seeded())
	assert.False(t, g.members[2].Seeded())
	l := g.leader()
	require.NoError(t, l.Barrier(context.Background()))
	g.waitEpoch(7)
	for id, m := range g.members {
		assert.Equal(t, first.ClusterID, m.Metadata().ClusterID, "candidate %d", id)
		require.Len(t, m.History(), 1, "candidate %d", id)
		assert.Equal(t, "the single controller's trail", m.History()[0].Note)
	}
	require.NoError(t, l.Propose(context.Background(), 7, testMeta(8), nil))
	g.waitEpoch(8)
	g.kill(1)
	g.start(1)
	assert.False(t, g.members[1].Seeded(), "a candidate with Raft state does not bootstrap again")
	g.waitEpoch(8)
}

// TestLeaderAppliesWhatFollowersDecode: the leader applies its own
// change from what it proposed, not from the log; what it holds is what
// every other candidate decodes, an empty topic config included.
func TestLeaderAppliesWhatFollowersDecode(t *testing.T) {
	g := newTestGroup(t, 3)
	l := g.leader()
	m := testMeta(1)
	m.PutBroker(metadata.Broker{ID: 1, Addr: "10.0.0.1:9400"})
	_, err := m.AddTopic("orders", 2, 1)
	require.NoError(t, err)
	m.AssignTopicIDs()
	m.Topics[0].Config = map[string]int64{}
	require.NoError(t, l.Propose(context.Background(), NoMetadata, m, []transport.HistoryEvent{event("create")}))
	g.waitEpoch(1)
	assert.NotSame(t, m, l.Metadata(), "the leader holds a copy of what it proposed")
	assert.Nil(t, l.Metadata().Topics[0].Config, "normalized as Parse normalizes")
	want, err := metadata.Marshal(l.Metadata())
	require.NoError(t, err)
	for id, c := range g.members {
		got, err := metadata.Marshal(c.Metadata())
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "candidate %d", id)
		assert.Equal(t, l.Metadata(), c.Metadata(), "candidate %d", id)
		assert.Equal(t, l.History(), c.History(), "candidate %d", id)
	}
	assert.Empty(t, l.fsm.own, "nothing proposed is kept once applied")
	bad := testMeta(2)
	bad.ClusterID = ""
	require.ErrorIs(t, l.Propose(context.Background(), 1, bad, nil), ErrMalformedEntry, "refused before it is proposed")
	assert.Equal(t, int64(1), l.Metadata().Epoch)
}

// ConfirmLeader is true for the leader a quorum answers, false for a
// follower, and false for a leader cut off from the others though its
// Raft state still said Leader when it was asked (its lease had not run
// out). An answer the follower sent before the cut and the leader reads
// after it may still confirm the first call after the cut (Raft counts
// every answer that arrives while a confirmation waits), so the test asks
// until a call made while the state said Leader comes back false.
func TestConfirmLeaderAsksAQuorum(t *testing.T) {
	g := newTestGroup(t, 3)
	l := g.leader()
	assert.True(t, l.ConfirmLeader(5*time.Second), "the leader, every voter answering")
	for _, m := range g.members {
		if m != l {
			assert.False(t, m.ConfirmLeader(5*time.Second), "follower %d", m.cfg.Self.ID)
		}
	}

	id := l.cfg.Self.ID
	g.trans[id].DisconnectAll()
	for oid, o := range g.trans {
		if oid != id {
			o.Disconnect(raft.ServerAddress(g.cands[id-1].Addr))
		}
	}
	require.True(t, l.IsLeader(), "Raft still says Leader right after the cut")
	for deadline := time.Now().Add(10 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "a leader no quorum answers is confirmed")
		require.True(t, l.IsLeader(), "Raft's lease ran out before a confirmation failed")
		if !l.ConfirmLeader(5 * time.Second) {
			break
		}
	}
}
