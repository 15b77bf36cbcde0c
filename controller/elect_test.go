package controller

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// replicaView is what a fake broker answers about its replica.
type replicaView struct {
	logEnd, hw int64
}

// fakeBrokers answers the controller's replica calls from fixed views:
// ReplicaState (recording fences), ReplicaDigest (every replica holds the
// same batches on shared offsets) and RecoverReplica; and DescribeCluster
// as the broker at the address, with the root id openWith gives it,
// unless silent names it.
type fakeBrokers struct {
	mu        sync.Mutex
	byAddr    map[string]int32
	views     map[int32]replicaView
	recovered []int32
	silent    map[int32]bool
}

func (f *fakeBrokers) Call(_ context.Context, addr string, api transport.API, req, resp transport.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.byAddr[addr]
	if !ok || f.silent[b] {
		return fmt.Errorf("%w: dial %s: connection refused", transport.ErrBrokerNotAvailable, addr)
	}
	v := f.views[b]
	switch api {
	case transport.APIDescribeCluster:
		*resp.(*transport.DescribeClusterResponse) = transport.DescribeClusterResponse{NodeID: b, RootID: rootOf(b)}
	case transport.APIReplicaState:
		*resp.(*transport.ReplicaStateResponse) = transport.ReplicaStateResponse{LogEndOffset: v.logEnd, HighWatermark: v.hw, LastEpoch: 1}
	case transport.APIReplicaDigest:
		r := req.(*transport.ReplicaDigestRequest)
		*resp.(*transport.ReplicaDigestResponse) = transport.ReplicaDigestResponse{Digest: []byte{byte(r.From), byte(r.To)}}
	case transport.APIRecoverReplica:
		f.recovered = append(f.recovered, req.(*transport.CatchUpRequest).Broker)
		*resp.(*transport.RecoverReplicaResponse) = transport.RecoverReplicaResponse{}
	default:
		return errors.New("not faked")
	}
	return nil
}

func rootOf(b int32) string { return strings.Repeat(string(rune('0'+b)), 32) }

// openWith opens a controller on metadata of three brokers and one
// partition led by broker 1, preferred replica 3, all three active.
func openWith(t *testing.T, f *fakeBrokers) *Controller {
	t.Helper()
	dir := t.TempDir()
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 5}
	f.byAddr = map[string]int32{}
	for id := int32(1); id <= 3; id++ {
		addr := "broker-" + string(rune('0'+id))
		f.byAddr[addr] = id
		meta.PutBroker(metadata.Broker{ID: id, Addr: addr, RootID: rootOf(id)})
	}
	meta.Topics = []metadata.Topic{{Name: "t", ID: "0123456789abcdef0123456789abcdef", ReplicationFactor: 3,
		Partitions: []metadata.Partition{{Replicas: []int32{3, 1, 2}, Active: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ReservedEpoch: 1}}}}
	require.NoError(t, metadata.NewStore(filepath.Join(dir, "metadata.json")).Save(meta))
	self, _ := meta.Broker(1)
	c, err := Open(Config{Dir: dir, Self: self, Logger: hclog.NewNullLogger(), Pool: f,
		Apply: func(*metadata.Cluster) error { return nil }, Push: func(context.Context, *metadata.Cluster) {}})
	require.NoError(t, err)
	return c
}

// elect-leaders never hands leadership to a replica short of what was
// acknowledged: broker 3, just put back by recover, still lacks [5041,
// 5100), which broker 1 acknowledged before it counted broker 3 in. The
// move is not made (without the check, broker 3 led and 1 and 2 were cut
// back to 5041, acknowledged records and all); broker 1 leads at the new
// epoch, with every replica active.
func TestElectLeadersNeverMovesToAReplicaShortOfTheAcknowledged(t *testing.T) {
	f := &fakeBrokers{views: map[int32]replicaView{1: {5109, 5100}, 2: {5109, 5060}, 3: {5041, 5041}}}
	c := openWith(t, f)
	rep, err := c.ElectLeaders(context.Background(), transport.ElectLeadersRequest{})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1, "no replica was left out, so none is recovered: %+v", rep.Results)
	r := rep.Results[0]
	assert.Empty(t, r.Error)
	assert.Equal(t, int32(1), r.NewLeader)
	assert.Equal(t, int32(2), r.NewEpoch)
	assert.Equal(t, []int32{1, 2, 3}, r.NewActive)
	assert.Contains(t, r.Note, "broker 3 lacks acknowledged records [5041, 5100)")
	assert.Empty(t, f.recovered)
	p := c.Metadata().Topics[0].Partitions[0]
	assert.Equal(t, int32(1), p.Leader)
	assert.Equal(t, []int32{1, 2, 3}, p.Active)

	// Once broker 3 has caught up, the move is made; what only the others
	// hold past it was never acknowledged, and they are recovered.
	f.mu.Lock()
	f.views = map[int32]replicaView{1: {5120, 5110}, 2: {5120, 5110}, 3: {5110, 5110}}
	f.mu.Unlock()
	rep, err = c.ElectLeaders(context.Background(), transport.ElectLeadersRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Results)
	assert.Equal(t, int32(3), rep.Results[0].NewLeader)
	assert.Equal(t, []int32{3}, rep.Results[0].NewActive)
	assert.ElementsMatch(t, []int32{1, 2}, f.recovered)
}

// A leadership move whose named replica does not answer has fenced the
// old leader and the others with the new epoch already; it must not end
// there, or the partition has no leader that takes writes and nothing
// lifts the fence (a move's lead step to a broker killed meanwhile left
// its partition so for good). Broker 1, which holds the most, leads at
// the new epoch; broker 3, silent, leaves the active set, and is
// recovered in the same request (a fake leader's recovery of it succeeds).
func TestElectLeadersToASilentReplicaLeavesALeader(t *testing.T) {
	f := &fakeBrokers{views: map[int32]replicaView{1: {100, 100}, 2: {100, 100}, 3: {100, 100}}, silent: map[int32]bool{3: true}}
	c := openWith(t, f)
	rep, err := c.ElectLeaders(context.Background(), transport.ElectLeadersRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Results)
	r := rep.Results[0]
	assert.Empty(t, r.Error)
	assert.Equal(t, int32(1), r.NewLeader)
	assert.Equal(t, int32(2), r.NewEpoch, "the epoch the replicas were fenced with")
	assert.Equal(t, []int32{1, 2}, r.NewActive)
	assert.Contains(t, r.Note, "broker 3, named to lead, does not answer: broker 1 leads at the new epoch instead")
	p := c.Metadata().Topics[0].Partitions[0]
	assert.Equal(t, int32(1), p.Leader)
	assert.Equal(t, int32(2), p.LeaderEpoch, "the metadata carries the epoch the old leader was fenced with")
	assert.Equal(t, []int32{3}, f.recovered)
}
