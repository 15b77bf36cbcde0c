package testcluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// A topic of 10,000 partitions, the most a topic may have: its metadata
// reaches every broker without a push timing out, and a topic created
// right after it is known to every broker at once.
func TestHugeTopicMetadataReachesEveryBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 30,000 replicas")
	}
	c := startCluster(t, 3)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel0()
	cl, err := client.New(ctx0, client.Config{Bootstrap: strings.Split(c.Bootstrap(), ","), RequestTimeout: 2 * time.Minute})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	_, err = cl.CreateTopic(ctx, "huge", 10000, 3)
	require.NoError(t, err)
	t.Logf("created a topic of 10,000 partitions in %s", time.Since(start))
	// A broker still opening its 10,000 replicas on a busy machine may
	// not answer the controller for a moment: the controller then
	// refuses a topic of three replicas, creating nothing, and an
	// operator would try again.
	for {
		_, err = cl.CreateTopic(ctx, "after", 1, 3)
		if !errors.Is(err, transport.ErrInvalidReplication) || !strings.Contains(err.Error(), "does not answer") || ctx.Err() != nil {
			break
		}
		t.Logf("creating the next topic: %v; trying again", err)
		time.Sleep(time.Second)
	}
	require.NoError(t, err)
	created := time.Now()
	for _, n := range c.Nodes {
		require.Eventually(t, func() bool {
			var resp transport.MetadataResponse
			err := call(t, n.Addr(), transport.APIMetadata, &transport.MetadataRequest{Topics: []string{"after"}}, &resp)
			return err == nil && len(resp.Topics) == 1
		}, 10*time.Second, 50*time.Millisecond, "broker %d knows the topic created after the huge one", n.ID)
	}
	t.Logf("every broker knew the next topic %s after it was created", time.Since(created))
	for _, n := range c.Nodes {
		assert.NotContains(t, n.LogTail(2000), "broker did not take new metadata", "node %d", n.ID)
		assert.NotContains(t, c.Node(1).LogTail(5000), "did not take new metadata")
	}
}
