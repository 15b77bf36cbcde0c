package testcluster

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopicCreatedDuringAnOutageIsPlacedOnLiveBrokers: with broker 4 of
// four killed, a topic of replication factor 3 is placed on the three
// that answer, and every partition takes writes at once; one of
// replication factor 4 is refused, naming the broker that does not
// answer, and nothing is created (before, replicas went to the dead
// broker and the create ended NotReady with a half-usable topic).
func TestTopicCreatedDuringAnOutageIsPlacedOnLiveBrokers(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	require.NoError(t, c.Node(4).Kill())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, "", "topic", "create", "outage", "--partitions", "8", "--replication-factor", "3")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)

	require.NoError(t, cl.RefreshMetadata(ctx))
	tm, err := cl.DescribeTopic(ctx, "outage")
	require.NoError(t, err)
	require.Len(t, tm.Partitions, 8)
	leaders := map[int32]bool{}
	for p, part := range tm.Partitions {
		assert.NotContains(t, part.Replicas, int32(4), "outage/%d has a replica on the dead broker", p)
		assert.Len(t, part.Replicas, 3)
		leaders[part.Leader] = true
	}
	assert.Len(t, leaders, 3, "leadership spread over the three live brokers")
	for p := range tm.Partitions {
		produceTo(t, cl, "outage", int32(p), "v", 2)
	}

	res, err = c.Ctl(ctx, "", "topic", "create", "toowide", "--partitions", "2", "--replication-factor", "4")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Regexp(t, `^InvalidReplicationFactor: .*broker 4 do(es)? not answer`, res.Stderr)
	assert.Contains(t, res.Stderr, "nothing was created")
	res, err = c.Ctl(ctx, "", "topic", "list", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	type topic struct {
		Name string `json:"name"`
	}
	var list struct {
		Topics []topic `json:"topics"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &list), res.Stdout)
	require.NotEmpty(t, list.Topics)
	assert.False(t, slices.ContainsFunc(list.Topics, func(x topic) bool { return x.Name == "toowide" }), "nothing was created: %s", res.Stdout)

	// Back, broker 4 takes replicas of new topics again.
	require.NoError(t, c.StartNode(4))
	require.Eventually(t, func() bool {
		res, err := c.Ctl(ctx, "", "topic", "create", "wide", "--partitions", "2", "--replication-factor", "4")
		return err == nil && res.Exit == 0
	}, time.Minute, 500*time.Millisecond)
}
