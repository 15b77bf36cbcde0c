package testcluster

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/client"
)

// Every node has a second listener of each protocol, "external", on
// ports of its own and advertised as localhost:PORT (the nodes' own
// listener, "internal", is advertised as 127.0.0.1:PORT). A client
// bootstraps through either and is told, for every node, the addresses
// of the listener it came in on: the Go client and gostream-ctl, and
// franz-go and kcat on Kafka's, produce and read through the external
// addresses alone.
func TestNamedListenersAnswerWithTheirOwnAddresses(t *testing.T) {
	c := newClusterWith(t, Config{Nodes: 3, Kafka: true})
	for _, n := range c.Nodes {
		rpc, err := freeAddr("127.0.0.1")
		require.NoError(t, err)
		kafka, err := freeAddr("127.0.0.1")
		require.NoError(t, err)
		_, rpcPort, _ := net.SplitHostPort(rpc)
		_, kafkaPort, _ := net.SplitHostPort(kafka)
		n.Listeners = []NamedListener{{Name: "external", RPC: rpc, Kafka: kafka,
			AdvertiseRPC: "localhost:" + rpcPort, AdvertiseKafka: "localhost:" + kafkaPort}}
	}
	require.NoError(t, c.Start())
	ctlOK(t, c, "topic", "create", "two-doors", "--partitions", "3", "--replication-factor", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	brokersVia := func(bootstrap string) map[int32]string {
		t.Helper()
		cl, err := client.New(ctx, client.Config{Bootstrap: []string{bootstrap}})
		require.NoError(t, err)
		defer cl.Close()
		md, err := cl.Metadata(ctx)
		require.NoError(t, err)
		out := map[int32]string{}
		for _, b := range md.Brokers {
			out[b.ID] = b.Addr
		}
		return out
	}
	for _, n := range c.Nodes {
		ext := n.Listeners[0].AdvertiseRPC
		external := brokersVia(ext)
		internal := brokersVia(n.RPC)
		for _, m := range c.Nodes {
			assert.Equal(t, m.Listeners[0].AdvertiseRPC, external[m.ID], "node %d as told through node %d's external listener", m.ID, n.ID)
			assert.Equal(t, m.RPC, internal[m.ID], "node %d as told through node %d's internal listener", m.ID, n.ID)
		}
	}

	// gostream-ctl through the external addresses only.
	var ext []string
	for _, n := range c.Nodes {
		ext = append(ext, n.Listeners[0].AdvertiseRPC)
	}
	res, err := c.Ctl(ctx, "", "--bootstrap", strings.Join(ext, ","), "produce", "two-doors", "--key", "k", "from outside")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)

	// Kafka: Metadata through the external listener names the external
	// addresses, and a client that reaches nothing else produces.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Listeners[0].AdvertiseKafka))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "two-doors", Key: []byte("k"), Value: []byte("kafka from outside")}).FirstErr())
	kcat := kcatPath(t)
	out, err := exec.CommandContext(ctx, kcat, "-b", c.Node(3).Listeners[0].AdvertiseKafka, "-L").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, n := range c.Nodes {
		assert.Contains(t, string(out), fmt.Sprintf("broker %d at %s", n.ID, n.Listeners[0].AdvertiseKafka))
	}
	out, err = exec.CommandContext(ctx, kcat, "-b", c.Node(1).Listeners[0].AdvertiseKafka, "-t", "two-doors", "-C", "-e", "-o", "beginning", "-f", "%s\\n").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "from outside")
	assert.Contains(t, string(out), "kafka from outside")
}
