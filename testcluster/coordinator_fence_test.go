package testcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// TestCutOffCoordinatorDoesNotServeStaleOffsets: the coordinator of a
// group is cut off from the other nodes, and the operator fails its
// partition of __consumer_offsets over; a commit goes to the new
// coordinator. The old one, which clients still reach, must not answer
// with the offset it holds, older than the one now committed: a reader
// would see the group's committed offset go back (invariant 9; the chaos
// harness saw it in raft-controller-isolated). It answers NotCoordinator,
// and the client finds the new one.
func TestCutOffCoordinatorDoesNotServeStaleOffsets(t *testing.T) {
	requireNetworkFaults(t)
	c := startClusterWith(t, Config{Nodes: 3, Netns: true})
	cl := newClient(t, c)
	createTopic(t, cl, "fenced", 1, 3)
	produceTo(t, cl, "fenced", 0, "v", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A group coordinated by a broker other than the controller's node.
	var group string
	var coord transport.FindCoordinatorResponse
	for i := 0; group == ""; i++ {
		require.Less(t, i, 64)
		g := fmt.Sprintf("fenced-%d", i)
		require.NoError(t, cl.CommitOffsets(ctx, g, client.CommitOffset{Topic: "fenced", Partition: 0, Offset: 3}))
		require.NoError(t, call(t, c.Node(1).RPC, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: g}, &coord))
		if coord.Leader != 1 {
			group = g
		}
	}
	old := c.Node(coord.Leader)
	var others []int32
	for _, n := range c.Nodes {
		if n.ID != old.ID {
			others = append(others, n.ID)
		}
	}
	require.NoError(t, c.Partition([]int32{old.ID}, others))
	t.Cleanup(func() { c.HealNetwork() })
	res, err := c.Ctl(ctx, "", "failover", "--broker", fmt.Sprint(old.ID))
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)

	// The new coordinator takes a commit.
	cl2 := newClient(t, c)
	require.Eventually(t, func() bool {
		err := cl2.CommitOffsets(ctx, group, client.CommitOffset{Topic: "fenced", Partition: 0, Offset: 7})
		if err != nil {
			t.Logf("commit to the new coordinator: %v", err)
		}
		return err == nil
	}, time.Minute, 250*time.Millisecond)

	// The old one, asked directly, does not answer with 3.
	var offs transport.OffsetFetchResponse
	err = call(t, old.RPC, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: group}, &offs)
	require.Error(t, err, "the cut-off coordinator answered %+v", offs.Offsets)
	assert.True(t, errors.Is(err, transport.ErrNotCoordinator), "%v", err)
	var desc transport.DescribeGroupResponse
	err = call(t, old.RPC, transport.APIDescribeGroup, &transport.GroupRequest{Group: group}, &desc)
	require.Error(t, err, "the cut-off coordinator described %+v", desc.Offsets)
	assert.True(t, errors.Is(err, transport.ErrNotCoordinator), "%v", err)

	// A client finds the new coordinator and the new offset.
	got, ok, err := cl2.Committed(ctx, group, "fenced", 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(7), got.Offset)
}
