package quorum

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// netCandidate is a candidate on a real RPC server: Raft diverted off
// the frames' listener.
type netCandidate struct {
	srv   *transport.Server
	layer *Layer
	group *Group
}

func startNetCandidates(t testing.TB, clusterIDs []string) []*netCandidate {
	t.Helper()
	var lns []net.Listener
	var cands []Candidate
	for i := range clusterIDs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		cands = append(cands, Candidate{ID: int32(i + 1), Addr: ln.Addr().String()})
	}
	var out []*netCandidate
	for i, id := range clusterIDs {
		nc := &netCandidate{layer: NewLayer(cands[i].Addr, func() string { return id }, hclog.NewNullLogger())}
		nc.srv = transport.NewServer(transport.ServerConfig{DivertByte: Marker, Divert: nc.layer.Divert},
			transport.HandlerFunc(func(ctx context.Context, req *transport.Request) transport.Reply {
				return transport.Immediate(nil, transport.ErrUnsupportedVersion)
			}))
		go nc.srv.Serve(lns[i])
		g, err := Open(Config{Dir: t.TempDir(), Self: cands[i], Candidates: cands, Seed: i == 0, Transport: NewTransport(nc.layer, hclog.NewNullLogger()),
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		nc.group = g
		out = append(out, nc)
	}
	t.Cleanup(func() {
		for _, nc := range out {
			nc.group.Close()
			nc.layer.Close()
			nc.srv.Close()
		}
	})
	return out
}

// Raft runs over the RPC address beside the frames: three candidates
// commit, and every one applies.
func TestGroupOverTheRPCAddress(t *testing.T) {
	cs := startNetCandidates(t, []string{"c1", "c1", "c1"})
	var l *Group
	require.Eventually(t, func() bool {
		for _, c := range cs {
			if c.group.IsLeader() {
				l = c.group
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, l.Propose(context.Background(), NoMetadata, testMeta(1), nil))
	require.Eventually(t, func() bool {
		for _, c := range cs {
			if m := c.group.Metadata(); m == nil || m.Epoch != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
}

// A candidate of another cluster is refused by the others: it never
// receives the group's entries, and the group goes on without it.
func TestGroupRefusesAnotherClustersCandidate(t *testing.T) {
	cs := startNetCandidates(t, []string{"c1", "c1", "other"})
	var l *Group
	require.Eventually(t, func() bool {
		for _, c := range cs[:2] {
			if c.group.IsLeader() {
				l = c.group
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, l.Propose(context.Background(), NoMetadata, testMeta(1), nil))
	require.Eventually(t, func() bool {
		m := cs[0].group.Metadata()
		n := cs[1].group.Metadata()
		return m != nil && n != nil && m.Epoch == 1 && n.Epoch == 1
	}, 10*time.Second, 10*time.Millisecond)
	assert.Never(t, func() bool { return cs[2].group.Metadata() != nil }, 500*time.Millisecond, 20*time.Millisecond,
		"the other cluster's candidate was given the group's entries")
}
