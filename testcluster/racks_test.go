package testcluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// brokerRacks is what broker list -o json says of each broker's rack.
func brokerRacks(t *testing.T, c *Cluster) map[int32]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "broker", "list", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	var list struct {
		Brokers []struct {
			ID         int32  `json:"id"`
			Rack       string `json:"rack"`
			Registered string `json:"registered"`
		} `json:"brokers"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &list), res.Stdout)
	out := map[int32]string{}
	for _, b := range list.Brokers {
		if b.Registered == "registered" {
			out[b.ID] = b.Rack
		}
	}
	return out
}

// Four nodes in racks a (1, 2) and b (3, 4): every partition of a topic
// of replication factor 2 has a replica in each (round robin put 1 and 2
// together); the racks show in broker list and cluster status, Kafka
// clients see them in Metadata, and a node that comes back with another
// rack is registered with it.
func TestRacksPlacementStatusAndKafkaMetadata(t *testing.T) {
	c := newClusterWith(t, Config{Nodes: 4, Kafka: true})
	racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}
	for id, r := range racks {
		c.Node(id).Args = append(c.Node(id).Args, "--rack", r)
	}
	require.NoError(t, c.Start())
	cl := newClient(t, c)

	tm := createTopic(t, cl, "spread", 8, 2)
	for p, part := range tm.Partitions {
		require.Len(t, part.Replicas, 2)
		assert.NotEqual(t, racks[part.Replicas[0]], racks[part.Replicas[1]], "spread/%d %v in one rack", p, part.Replicas)
	}
	assert.Equal(t, racks, brokerRacks(t, c))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, "", "cluster", "status")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Regexp(t, `(?m)^ID\s+ADDRESS\s+RACK\s+REGISTERED`, res.Stdout)
	assert.Regexp(t, `(?m)^3\s+\S+\s+b\s+registered`, res.Stdout)

	kc, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka))
	require.NoError(t, err)
	defer kc.Close()
	kafkaRacks := func() map[int32]string {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, kc)
		require.NoError(t, err)
		out := map[int32]string{}
		for _, b := range resp.Brokers {
			if b.Rack != nil {
				out[b.NodeID] = *b.Rack
			}
		}
		return out
	}
	assert.Equal(t, racks, kafkaRacks())

	// Node 4 moves to rack c: its registration says so.
	require.NoError(t, c.Node(4).Stop(30*time.Second))
	c.Node(4).Args = []string{"--rack", "c"}
	require.NoError(t, c.StartNode(4))
	racks[4] = "c"
	require.Eventually(t, func() bool { return brokerRacks(t, c)[4] == "c" }, time.Minute, 500*time.Millisecond)
	require.Eventually(t, func() bool { return kafkaRacks()[4] == "c" }, time.Minute, 500*time.Millisecond,
		"node 2's metadata shows node 4's new rack")
}

// planFile reads a plan written by --out.
func planFile(t *testing.T, path string) transport.MovePlan {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var p transport.MovePlan
	require.NoError(t, json.Unmarshal(data, &p), string(data))
	return p
}

// Three nodes hold a topic, a fourth joins: cluster rebalance plans a
// quarter of the replicas onto it, with the bytes the brokers report,
// and writes the plan; broker decommission plans every replica off a
// broker, or refuses when replicas could not be kept, and neither moves
// anything.
func TestRebalanceAndDecommissionPlans(t *testing.T) {
	c := newClusterWith(t, Config{Nodes: 4})
	for id := int32(1); id <= 3; id++ {
		require.NoError(t, c.StartNode(id))
	}
	require.Eventually(t, func() bool { return len(brokerRacks(t, c)) == 3 }, time.Minute, 500*time.Millisecond)
	cl := newClient(t, c)
	createTopic(t, cl, "orders", 12, 3)
	produceTo(t, cl, "orders", 0, strings.Repeat("x", 1000), 50)

	require.NoError(t, c.StartNode(4))
	require.Eventually(t, func() bool { return len(brokerRacks(t, c)) == 4 }, time.Minute, 500*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	planPath := filepath.Join(dir, "rebalance.json")
	res, err := c.Ctl(ctx, "", "cluster", "rebalance", "--out", planPath)
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stdout, "Plan: ")
	assert.Contains(t, res.Stdout, "9 replicas to copy")
	assert.Contains(t, res.Stdout, "gostream-ctl partition reassign --plan "+planPath+" --execute")
	p := planFile(t, planPath)
	assert.Equal(t, transport.MovePlanVersion, p.Version)
	require.NotNil(t, p.Summary)
	assert.Equal(t, 9, p.Summary.NewReplicas)
	var bytes int64
	for _, b := range p.Summary.Brokers {
		assert.Equal(t, 9, b.ReplicasAfter, "broker %d", b.Broker)
		assert.Equal(t, 3, b.LeadersAfter, "broker %d", b.Broker)
		bytes += b.Bytes
	}
	assert.Positive(t, bytes, "the brokers' sizes were asked")
	for _, m := range p.Partitions {
		for _, id := range m.Replicas {
			if !slices.Contains(m.From, id) {
				assert.Equal(t, int32(4), id, "orders/%d: a replica planned onto broker %d", m.Partition, id)
			}
		}
	}
	// -o json is the plan itself; planning again plans the same.
	res, err = c.Ctl(ctx, "", "cluster", "rebalance", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	var again transport.MovePlan
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &again), res.Stdout)
	assert.Equal(t, p.Partitions, again.Partitions)

	// Nothing moved: broker 4 holds nothing, so decommissioning it plans
	// nothing.
	res, err = c.Ctl(ctx, "", "broker", "decommission", "4")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "Broker 4 holds no replicas: nothing to move.")

	res, err = c.Ctl(ctx, "", "broker", "decommission", "1", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	var decom transport.MovePlan
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &decom), res.Stdout)
	assert.Len(t, decom.Partitions, 12)
	for _, m := range decom.Partitions {
		assert.NotContains(t, m.Replicas, int32(1))
		assert.Contains(t, m.Replicas, int32(4))
		assert.NotEqual(t, int32(4), m.Replicas[0], "orders/%d: the new replica leads", m.Partition)
	}

	// A topic on every broker cannot lose one.
	createTopic(t, cl, "wide", 2, 4)
	res, err = c.Ctl(ctx, "", "broker", "decommission", "2")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Regexp(t, `^InvalidReplicationFactor: broker 2 cannot be decommissioned: 2 partitions`, res.Stderr)
	assert.Contains(t, res.Stderr, "wide/0 (4 replicas)")
	assert.NotContains(t, res.Stderr, "orders/")

	for _, tt := range []struct {
		args []string
		exit int
		name string
	}{
		{[]string{"broker", "decommission", "9"}, 2, "UnknownBroker"},
		{[]string{"broker", "decommission", "x"}, 1, "InvalidArgument"},
		{[]string{"broker", "decommission"}, 1, "MissingArgument"},
		{[]string{"cluster", "rebalance", "--topic", "nope"}, 2, "UnknownTopic"},
	} {
		res, err := c.Ctl(ctx, "", tt.args...)
		require.NoError(t, err)
		assert.Equal(t, tt.exit, res.Exit, "%v: %s", tt.args, res.Stderr)
		assert.True(t, strings.HasPrefix(res.Stderr, tt.name+":"), "%v: %s", tt.args, res.Stderr)
	}

	// Broker 4 stops: nothing is planned onto it, and the plan says why.
	require.NoError(t, c.Node(4).Kill())
	res, err = c.Ctl(ctx, "", "cluster", "rebalance", "--topic", "orders")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "The cluster is balanced: nothing to move.")
	assert.Contains(t, res.Stdout, "broker 4 does not answer")
}
