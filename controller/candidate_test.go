package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/transport"
)

// candidates is three controller candidates on raft's in-memory
// transport, each a group and a controller that adopts its changes.
type candidates struct {
	groups map[int32]*quorum.Group
	ctrls  map[int32]*Controller
	trans  map[int32]*raft.InmemTransport
}

func startCandidates(t *testing.T) *candidates {
	cs := &candidates{groups: map[int32]*quorum.Group{}, ctrls: map[int32]*Controller{}, trans: map[int32]*raft.InmemTransport{}}
	var list []quorum.Candidate
	for id := int32(1); id <= 3; id++ {
		list = append(list, quorum.Candidate{ID: id, Addr: fmt.Sprintf("cand-%d", id)})
	}
	for _, c := range list {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(c.Addr))
		for _, o := range cs.trans {
			tr.Connect(o.LocalAddr(), o)
			o.Connect(tr.LocalAddr(), tr)
		}
		cs.trans[c.ID] = tr
		var ctrl atomic.Pointer[Controller] // the group may apply before the controller exists
		g, err := quorum.Open(quorum.Config{Dir: t.TempDir(), Self: c, Candidates: list, Seed: c.ID == 1, Transport: tr,
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			OnChange: func(m *metadata.Cluster) {
				if c := ctrl.Load(); c != nil {
					c.Adopt(m)
				}
			}})
		require.NoError(t, err)
		self := metadata.Broker{ID: c.ID, Addr: c.Addr, RootID: fmt.Sprintf("%032d", c.ID)}
		ctrl.Store(OpenCandidate(Config{Self: self, Pool: &fakeBrokers{}, Apply: func(*metadata.Cluster) error { return nil }, Push: func(context.Context, *metadata.Cluster) {}}, g))
		cs.groups[c.ID], cs.ctrls[c.ID] = g, ctrl.Load()
	}
	t.Cleanup(func() {
		for _, g := range cs.groups {
			g.Close()
		}
	})
	return cs
}

func (cs *candidates) leader(t *testing.T) int32 {
	t.Helper()
	var id int32
	require.Eventually(t, func() bool {
		for i, g := range cs.groups {
			if g.IsLeader() {
				id = i
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	return id
}

func (cs *candidates) kill(id int32) {
	cs.groups[id].Close()
	delete(cs.groups, id)
	cs.trans[id].DisconnectAll()
	for _, o := range cs.trans {
		o.Disconnect(cs.trans[id].LocalAddr())
	}
}

// The group's leader takes over as the active controller: it seeds the
// first metadata, names itself in it, and makes changes every candidate
// adopts; the others refuse changes with NotController. When it dies,
// another takes over with every change committed, and names itself.
func TestCandidatesTakeOverInTurn(t *testing.T) {
	cs := startCandidates(t)
	ctx := context.Background()
	first := cs.leader(t)
	for id, c := range cs.ctrls {
		if id != first {
			_, err := c.CreateTopic(ctx, &transport.CreateTopicRequest{Name: "early", Partitions: 1, ReplicationFactor: 1})
			require.ErrorIs(t, err, ErrNotController, "candidate %d before any takeover", id)
		}
	}
	var seed func() (*metadata.Cluster, []transport.HistoryEvent, error)
	if first == 1 {
		seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) {
			m, err := NewClusterMetadata(cs.ctrls[1].cfg.Self)
			return m, nil, err
		}
	}
	if seed == nil {
		// Only candidate 1 seeds; another leader waits for it.
		require.ErrorIs(t, cs.ctrls[first].TakeOver(ctx, nil), ErrNotController)
		require.NoError(t, cs.groups[first].Transfer(ctx, 1))
		require.Eventually(t, func() bool { return cs.groups[1].IsLeader() }, 10*time.Second, 10*time.Millisecond)
		first = 1
		seed = func() (*metadata.Cluster, []transport.HistoryEvent, error) {
			m, err := NewClusterMetadata(cs.ctrls[1].cfg.Self)
			return m, nil, err
		}
	}
	active := cs.ctrls[first]
	require.NoError(t, active.TakeOver(ctx, seed))
	assert.Equal(t, first, active.Metadata().ControllerID)
	_, err := active.CreateTopic(ctx, &transport.CreateTopicRequest{Name: "orders", Partitions: 2, ReplicationFactor: 1})
	require.NoError(t, err)
	epoch := active.Metadata().Epoch
	for id, c := range cs.ctrls {
		require.Eventually(t, func() bool { return c.Metadata().Epoch == epoch }, 10*time.Second, 10*time.Millisecond, "candidate %d adopts", id)
		assert.NotNil(t, c.Metadata().Topic("orders"), "candidate %d", id)
		if id != first {
			_, err := c.CreateTopic(ctx, &transport.CreateTopicRequest{Name: "nope", Partitions: 1, ReplicationFactor: 1})
			assert.ErrorIs(t, err, ErrNotController, "candidate %d is not active", id)
			assert.Contains(t, err.Error(), fmt.Sprintf("candidate %d@", first), "it names the active one")
		}
	}

	cs.kill(first)
	next := cs.leader(t)
	require.NotEqual(t, first, next)
	require.NoError(t, cs.ctrls[next].TakeOver(ctx, nil), "the metadata exists: no seed needed")
	m := cs.ctrls[next].Metadata()
	assert.Equal(t, next, m.ControllerID, "the metadata names the new active controller")
	assert.Greater(t, m.Epoch, epoch)
	assert.NotNil(t, m.Topic("orders"), "every committed change survives")
	_, err = cs.ctrls[next].CreateTopic(ctx, &transport.CreateTopicRequest{Name: "payments", Partitions: 1, ReplicationFactor: 1})
	require.NoError(t, err)

	// The old active controller's object, cut off, commits nothing.
	_, err = cs.ctrls[first].CreateTopic(ctx, &transport.CreateTopicRequest{Name: "stale", Partitions: 1, ReplicationFactor: 1})
	require.Error(t, err)
	assert.Nil(t, cs.ctrls[next].Metadata().Topic("stale"))
}
