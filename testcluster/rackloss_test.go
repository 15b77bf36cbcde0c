package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAutopilotSurvivesARackLoss: six nodes in three racks (a: 1, 4; b:
// 2, 5; c: 3, 6), the controller's candidates 1 to 3, one in each rack;
// a topic of replication factor 3 has a replica in every rack. With the
// autopilot running and nobody typing, rack a is lost at once (kill -9
// of 1 and 4, a candidate among them): the autopilot fails both over,
// writes go on, and nothing acknowledged is lost; the rack comes back and
// is recovered.
func TestAutopilotSurvivesARackLoss(t *testing.T) {
	c := newClusterWith(t, Config{Nodes: 6, Candidates: 3})
	for id, r := range map[int32]string{1: "a", 4: "a", 2: "b", 5: "b", 3: "c", 6: "c"} {
		c.Node(id).Args = append(c.Node(id).Args, "--rack", r)
	}
	require.NoError(t, c.Start())
	cl := newClient(t, c)
	tm := createTopic(t, cl, "racked", 6, 3)
	rackOf := map[int32]string{1: "a", 4: "a", 2: "b", 5: "b", 3: "c", 6: "c"}
	for _, p := range tm.Partitions {
		seen := map[string]bool{}
		for _, b := range p.Replicas {
			seen[rackOf[b]] = true
		}
		require.Len(t, seen, 3, "partition %d has a replica in every rack: %v", p.Partition, p.Replicas)
	}
	startAutopilot(t, c, "rack-pilot", quickPolicy...)
	writers := make([]*ackedWriter, len(tm.Partitions))
	for i := range tm.Partitions {
		writers[i] = startAckedWriter(t, cl, "racked", int32(i), 128)
	}
	require.Eventually(t, func() bool {
		for _, w := range writers {
			if w.count() < 20 {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond)

	require.NoError(t, c.Node(1).Kill())
	require.NoError(t, c.Node(4).Kill())
	lost := time.Now()
	counts := make([]int, len(writers))
	for i, w := range writers {
		counts[i] = w.count()
	}
	// Every partition takes writes again once the autopilot has failed
	// rack a over: within its grace period and a margin.
	require.Eventually(t, func() bool {
		for i, w := range writers {
			if w.count() < counts[i]+20 {
				return false
			}
		}
		return true
	}, quickGrace+30*time.Second, 100*time.Millisecond, "writes resume on every partition after the loss of rack a")
	t.Logf("every partition took 20 writes again %s after the loss of rack a", time.Since(lost).Round(100*time.Millisecond))

	require.NoError(t, c.StartNode(1))
	require.NoError(t, c.StartNode(4))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.RefreshMetadata(ctx, "racked"); err != nil {
			return false
		}
		tm, err := cl.DescribeTopic(ctx, "racked")
		if err != nil {
			return false
		}
		for _, p := range tm.Partitions {
			if len(p.Active) != len(p.Replicas) {
				return false
			}
		}
		return true
	}, 2*time.Minute, 500*time.Millisecond, "the autopilot recovers rack a")
	for i, w := range writers {
		acked := w.finish()
		got := consumeAll(t, cl, "racked", int32(i))
		for off, v := range acked {
			require.Equal(t, v, got[off], "partition %d: acknowledged record at offset %d", i, off)
		}
		assert.NotEmpty(t, acked)
	}
}
