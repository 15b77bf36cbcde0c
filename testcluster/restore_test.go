package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

func controllerMetadataPath(c *Cluster) string {
	return filepath.Join(c.Node(1).DataDir, "controller", "metadata.json")
}

// ctlRun runs gostream-ctl and logs what it printed.
func ctlRun(t *testing.T, c *Cluster, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", args...)
	require.NoError(t, err)
	return res
}

// An older copy of the controller's metadata put back (a backup restored,
// a snapshot rolled back): the controller finds brokers ahead of it and
// refuses every change, writing nothing, and says what to do; the restore
// it names adopts the newest copy the brokers hold, and the cluster works
// again with every topic.
func TestControllerWithOldMetadataRefusesAndIsRestored(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "a", 1, 3)
	backup, err := os.ReadFile(controllerMetadataPath(c))
	require.NoError(t, err)
	for _, name := range []string{"b1", "b2", "b3", "b4"} {
		createTopic(t, cl, name, 1, 3)
	}

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	require.NoError(t, os.WriteFile(controllerMetadataPath(c), backup, 0o644))
	require.NoError(t, c.StartNode(1))

	res := ctlRun(t, c, "topic", "create", "c", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stderr, "StaleMetadata:"), res.Stderr)
	assert.Contains(t, res.Stderr, "restore-metadata")
	now, err := os.ReadFile(controllerMetadataPath(c))
	require.NoError(t, err)
	assert.Equal(t, string(backup), string(now), "nothing is written while the metadata is refused")

	res = ctlRun(t, c, "cluster", "status", "-o", "json")
	assert.Contains(t, res.Stdout, "refuses every change")
	assert.Contains(t, res.Stdout, "gostream-ctl cluster restore-metadata --dry-run")

	res = ctlRun(t, c, "cluster", "restore-metadata", "--dry-run")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "Would adopt")
	assert.Contains(t, res.Stdout, "b1, b2, b3, b4")
	now, err = os.ReadFile(controllerMetadataPath(c))
	require.NoError(t, err)
	assert.Equal(t, string(backup), string(now), "a dry run writes nothing")

	res = ctlRun(t, c, "cluster", "restore-metadata")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "Adopted")

	res = ctlRun(t, c, "topic", "list")
	require.Equal(t, 0, res.Exit, res.Stderr)
	for _, name := range []string{"a", "b1", "b2", "b3", "b4"} {
		assert.Contains(t, res.Stdout, name+" ")
	}
	produceN(t, newClient(t, c), "b1", 0, 3, "x")
	res = ctlRun(t, c, "topic", "create", "c", "--partitions", "1", "--replication-factor", "3")
	require.Equal(t, 0, res.Exit, res.Stderr)
	cl2 := newClient(t, c)
	produceN(t, cl2, "c", 0, 3, "c")
	assert.Len(t, consumeAll(t, cl2, "c", 0), 3)
}

// A deleted metadata file: the controller creates no new cluster in its
// place, refuses every change, and the restore brings the cluster back
// with its own id and data.
func TestControllerWithMissingMetadataIsRestored(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "a", 1, 3)
	produceN(t, cl, "a", 0, 5, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := cl.Metadata(ctx)
	require.NoError(t, err)

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	require.NoError(t, os.Remove(controllerMetadataPath(c)))
	require.NoError(t, c.StartNode(1))
	res := ctlRun(t, c, "topic", "create", "c", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "is missing")
	assert.NoFileExists(t, controllerMetadataPath(c), "no new metadata is made in its place")

	res = ctlRun(t, c, "cluster", "restore-metadata")
	require.Equal(t, 0, res.Exit, res.Stderr)
	cl2 := newClient(t, c)
	md2, err := cl2.Metadata(ctx)
	require.NoError(t, err)
	assert.Equal(t, md.ClusterID, md2.ClusterID, "the same cluster")
	assert.Len(t, consumeAll(t, cl2, "a", 0), 5)
	produceN(t, cl2, "a", 0, 2, "after")
}

// A request that only claims a broker holds newer metadata (a forged or
// buggy metadata poll) does not stop the controller: it believes an epoch
// only from the broker itself, at its address.
func TestClaimedEpochIsCheckedWithTheBroker(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "x", 1, 3)
	for _, claim := range []transport.FetchMetadataRequest{
		{KnownEpoch: 1 << 40, BrokerID: 2, Addr: "127.0.0.1:1"},
		{KnownEpoch: 1 << 40, BrokerID: 77, Addr: "127.0.0.1:1"},
	} {
		var blob transport.MetadataBlob
		require.NoError(t, call(t, c.Node(1).Addr(), transport.APIFetchMetadata, &claim, &blob))
	}
	res := ctlRun(t, c, "topic", "create", "y", "--partitions", "1", "--replication-factor", "3")
	require.Equal(t, 0, res.Exit, "the controller still makes changes: %s", res.Stderr)
}
