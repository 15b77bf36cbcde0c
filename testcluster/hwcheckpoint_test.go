package testcluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkpointedHW reads a node's high watermark checkpoint for one replica,
// -1 when it holds none.
func checkpointedHW(n *Node, topic string, partition int32) int64 {
	data, err := os.ReadFile(filepath.Join(n.DataDir, "high-watermarks"))
	if err != nil {
		return -1
	}
	var f struct {
		Replicas []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			HW        int64  `json:"hw"`
		} `json:"replicas"`
	}
	if json.Unmarshal(data, &f) != nil {
		return -1
	}
	for _, r := range f.Replicas {
		if r.Topic == topic && r.Partition == partition {
			return r.HW
		}
	}
	return -1
}

// A leader restarted while a follower stays down serves the acknowledged
// records below its checkpointed high watermark at once; writes still wait
// for every active replica.
func TestRestartedLeaderServesWithAFollowerDown(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "hw", 3, 3) // partition 1 is led by broker 2
	produceN(t, cl, "hw", 1, 50, "v")
	require.Eventually(t, func() bool { return checkpointedHW(c.Node(2), "hw", 1) == 50 }, 20*time.Second, 50*time.Millisecond,
		"the leader checkpoints its HW")

	require.NoError(t, c.Node(3).Kill())
	require.NoError(t, c.Node(2).Kill())
	require.NoError(t, c.StartNode(2))

	start := time.Now()
	res := ctlRun(t, c, "consume", "hw", "--partition", "1", "--from-beginning")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Len(t, strings.Split(strings.TrimSpace(res.Stdout), "\n"), 1+50, "the table's header, and every acknowledged record is read with broker 3 down")
	t.Logf("read 50 records %s after the restart", time.Since(start))

	res = ctlRun(t, c, "produce", "hw", "--partition", "1", "x")
	assert.Equal(t, 2, res.Exit, "a write still needs every active replica")
	assert.Contains(t, res.Stderr, "broker 3")
}
