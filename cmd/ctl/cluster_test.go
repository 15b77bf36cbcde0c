package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

// The tests in cluster_test.go, topic_test.go, produce_test.go,
// consume_test.go and bench_test.go run the real binaries: a gostream-node
// per test (testcluster) and gostream-ctl against it, as a user would.

// startCluster starts a one-node cluster that the test's cleanup kills.
func startCluster(t *testing.T) *testcluster.Cluster { return startClusterOf(t, 1) }

// startClusterOf starts a cluster of nodes nodes that the test's cleanup
// kills, showing the tail of each node's log if the test failed.
func startClusterOf(t *testing.T, nodes int) *testcluster.Cluster {
	t.Helper()
	return startClusterWith(t, testcluster.Config{Nodes: nodes})
}

// startClusterWith starts the cluster cfg describes, as startClusterOf.
func startClusterWith(t *testing.T, cfg testcluster.Config) *testcluster.Cluster {
	t.Helper()
	cfg.Dir, cfg.Race, cfg.Logf = t.TempDir(), raceEnabled, t.Logf
	c, err := testcluster.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.LogTail(40))
			}
		}
	})
	require.NoError(t, c.Start())
	return c
}

// ctlTimeout bounds one gostream-ctl run in these tests.
const ctlTimeout = 2 * time.Minute

// ctl runs gostream-ctl against c with stdin and args.
func ctl(t *testing.T, c *testcluster.Cluster, stdin string, args ...string) testcluster.CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	res, err := c.Ctl(ctx, stdin, args...)
	require.NoError(t, err, "gostream-ctl %s", strings.Join(args, " "))
	return res
}

// ctlOK runs gostream-ctl, requires exit status 0 and returns stdout.
func ctlOK(t *testing.T, c *testcluster.Cluster, stdin string, args ...string) string {
	t.Helper()
	res := ctl(t, c, stdin, args...)
	require.Equal(t, 0, res.Exit, "gostream-ctl %s: %s", strings.Join(args, " "), res.Stderr)
	return res.Stdout
}

// ctlFails runs gostream-ctl and checks that it fails with exit status
// code and one stderr line that starts with prefix.
func ctlFails(t *testing.T, c *testcluster.Cluster, code int, prefix, stdin string, args ...string) testcluster.CtlResult {
	t.Helper()
	res := ctl(t, c, stdin, args...)
	assert.Equal(t, code, res.Exit, "gostream-ctl %s", strings.Join(args, " "))
	assert.True(t, strings.HasPrefix(res.Stderr, prefix), "stderr %q should start with %q", res.Stderr, prefix)
	assert.Equal(t, 1, strings.Count(res.Stderr, "\n"), "one line: %q", res.Stderr)
	return res
}

// lines splits output into its lines, none for empty output.
func lines(out string) []string {
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// decodeLines decodes one JSON object per line of out.
func decodeLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	for _, l := range lines(out) {
		var v T
		require.NoError(t, json.Unmarshal([]byte(l), &v), "line %q", l)
		all = append(all, v)
	}
	return all
}

// requireKeys checks that the JSON object raw has exactly the keys want.
func requireKeys(t *testing.T, raw json.RawMessage, want ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(m)), "keys of %s", raw)
	return m
}

func TestClusterStatusAndBrokerList(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "a", "--partitions", "3")
	ctlOK(t, c, "", "topic", "create", "b", "--partitions", "2")
	rpc := c.Nodes[0].RPC

	out := ctlOK(t, c, "", "cluster", "status", "-o", "json")
	m := requireKeys(t, json.RawMessage(out), "controller", "brokers", "partitions", "warnings")
	assert.JSONEq(t, `1`, string(m["controller"]))
	assert.JSONEq(t, `[{"id":1,"address":"`+rpc+`","registered":"registered","gossip":"alive"}]`, string(m["brokers"]))
	assert.JSONEq(t, `{"total":5,"under_replicated":0,"offline":0}`, string(m["partitions"]))
	assert.JSONEq(t, `[]`, string(m["warnings"]))

	out = ctlOK(t, c, "", "cluster", "status")
	assert.Contains(t, out, "Controller: broker 1 (answers)")
	assert.Contains(t, out, "Gossip states as seen by the controller, broker 1.")
	assert.Contains(t, out, "Partitions: 5 total, 0 under-replicated, 0 offline")
	assert.Contains(t, out, "No warnings.")

	out = ctlOK(t, c, "", "broker", "list")
	require.Len(t, lines(out), 3)
	assert.Equal(t, []string{"ID", "ADDRESS", "REGISTERED", "GOSSIP", "RPC", "ROLE"}, strings.Fields(lines(out)[0]))
	assert.Equal(t, []string{"1", rpc, "registered", "alive", "answers", "controller"}, strings.Fields(lines(out)[1]))
	out = ctlOK(t, c, "", "-o", "json", "broker", "list")
	assert.JSONEq(t, `{"controller":1,"brokers":[{"id":1,"address":"`+rpc+`","registered":"registered","gossip":"alive"}]}`, out)
}
