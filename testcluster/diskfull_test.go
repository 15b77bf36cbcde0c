package testcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// A full disk on a follower, then on a leader: writes fail with NoSpace
// (retriable), the failed replica shows in status and in cluster status,
// nothing acknowledged is lost, and once space is back the partition takes
// writes again by itself, without a restart.
func TestFullDiskIsNamedAndResumesWithoutARestart(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, CrashFS: true})
	cl := newClient(t, c)
	createTopic(t, cl, "full", 3, 3) // partition 1 is led by broker 2
	produceN(t, cl, "full", 1, 10, "before")
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1, Retries: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, victim := range []int32{3, 2} { // a follower, then the leader
		require.NoError(t, c.Node(victim).FillDisk())
		// The segment's preallocated space takes writes still, as on a
		// real disk; 64 KiB records use it up.
		big := strings.Repeat("x", 64<<10)
		var perr error
		for i := 0; i < 100; i++ {
			if _, perr = p.Send(ctx, client.ProducerRecord{Topic: "full", Partition: 1, ManualPartition: true, Value: []byte(big)}); perr != nil {
				break
			}
		}
		require.Error(t, perr)
		if victim == 2 {
			require.ErrorIs(t, perr, transport.ErrNoSpace, "the leader's full disk is named")
		} else {
			require.ErrorIs(t, perr, transport.ErrReplicationFailed, "the follower's failure is named")
			assert.Contains(t, perr.Error(), "broker 3: NoSpace")
		}
		t.Logf("with broker %d's disk full: %v", victim, perr)
		var res CtlResult

		require.Eventually(t, func() bool {
			res = ctlRun(t, c, "cluster", "status")
			return strings.Contains(res.Stdout, "no space left on device")
		}, 30*time.Second, 200*time.Millisecond, "cluster status shows the failed replica on broker %d:\n%s", victim, res.Stdout)

		require.NoError(t, c.Node(victim).FreeDisk())
		require.Eventually(t, func() bool {
			res = ctlRun(t, c, "produce", "full", "--partition", "1", "after")
			return res.Exit == 0
		}, 30*time.Second, 200*time.Millisecond, "writes resume once space is back: %s", res.Stderr)
		assert.True(t, c.Node(victim).Running(), "without a restart")
	}
	// The controller's disk: a change is refused as NoSpace, and made once
	// space is back.
	require.NoError(t, c.Node(1).FillDisk())
	res := ctlRun(t, c, "topic", "create", "later", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "NoSpace:"), res.Stderr)
	require.NoError(t, c.Node(1).FreeDisk())
	res = ctlRun(t, c, "topic", "create", "later", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 0, res.Exit, res.Stderr)

	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	got := consumeAll(t, newClient(t, c), "full", 1)
	for i := range 10 {
		assert.Contains(t, got, int64(i), "acknowledged offset %d", i)
	}
}
