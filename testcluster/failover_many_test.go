package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// TestFailoverOfManyPartitionsKilledHalfWayIsSafeToRerun: a failover of
// every partition of a dead broker, with the controller killed after it
// fenced them all and before it recorded anything, leaves every partition
// with its old leader (only reserved epochs moved), and the same command
// run again fails every one over, with epochs above the dead attempt's,
// and drops the broker from the rest, with nothing acknowledged lost.
func TestFailoverOfManyPartitionsKilledHalfWayIsSafeToRerun(t *testing.T) {
	const partitions = 90
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "many", partitions, 3)
	acked := map[int32]map[int64]string{}
	for p := int32(0); p < partitions; p++ {
		acked[p] = produceTo(t, cl, "many", p, "before", 2)
	}
	before, err := cl.DescribeTopic(context.Background(), "many")
	require.NoError(t, err)
	led, followed := 0, 0
	for _, p := range before.Partitions {
		switch {
		case p.Leader == 2:
			led++
		case contains(p.Active, 2):
			followed++
		}
	}
	require.Equal(t, partitions/3, led, "round-robin placement")
	require.NoError(t, c.Node(2).Kill())

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	c.Node(1).Env = []string{"GOSTREAM_CRASHPOINT=failover-after-fence"}
	require.NoError(t, c.StartNode(1))
	_, err = operator(t, c, transport.APIFailover, map[string]any{"broker": 2})
	require.Error(t, err, "the controller died mid-failover")
	require.Eventually(t, func() bool { return !c.Node(1).Running() }, 10*time.Second, 50*time.Millisecond)

	c.Node(1).Env = nil
	require.NoError(t, c.StartNode(1))
	require.NoError(t, cl.RefreshMetadata(context.Background()))
	mid, err := cl.DescribeTopic(context.Background(), "many")
	require.NoError(t, err)
	assert.Equal(t, before.Partitions, mid.Partitions, "nothing was recorded: every partition keeps its leader, epoch and active set")

	res, err := operator(t, c, transport.APIFailover, map[string]any{"broker": 2})
	require.NoError(t, err)
	failedOver, dropped := 0, 0
	for _, r := range res {
		require.Empty(t, r.Error, "%s/%d", r.Topic, r.Partition)
		assert.NotContains(t, r.NewActive, int32(2))
		switch r.Action {
		case "failover":
			failedOver++
			assert.Equal(t, r.OldEpoch+2, r.NewEpoch, "%s/%d: the rerun takes an epoch above the one the dead attempt reserved and fenced with", r.Topic, r.Partition)
		case "drop-follower":
			dropped++
		}
	}
	assert.Equal(t, led, failedOver)
	assert.Equal(t, followed, dropped)

	require.NoError(t, cl.RefreshMetadata(context.Background()))
	for p := int32(0); p < partitions; p++ {
		for k, v := range produceTo(t, cl, "many", p, "after", 1) {
			acked[p][k] = v
		}
	}
	for p := int32(0); p < partitions; p++ {
		got := consumeAll(t, cl, "many", p)
		for off, v := range acked[p] {
			assert.Equal(t, v, got[off], "acknowledged record at %d/%d", p, off)
		}
	}
}
