package testcluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
