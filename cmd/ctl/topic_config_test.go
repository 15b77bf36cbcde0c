package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

// startClusterWithArgs is startCluster with extra gostream-node flags.
func startClusterWithArgs(t *testing.T, nodeArgs ...string) *testcluster.Cluster {
	t.Helper()
	c, err := testcluster.New(testcluster.Config{Nodes: 1, Dir: t.TempDir(), Race: raceEnabled, Logf: t.Logf, NodeArgs: nodeArgs})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			t.Logf("node log tail:\n%s", c.Nodes[0].LogTail(40))
		}
	})
	require.NoError(t, c.Start())
	return c
}

// describedConfig is the config part of topic describe -o json.
type describedConfig struct {
	Config []configJSON `json:"config"`
}

// TestTopicConfigCommands: topic create --config sets a topic's own keys
// and topic describe shows them beside the node's defaults (set by
// gostream-node flags); topic alter sets and removes keys; bad keys and
// values are refused, naming the key, and change nothing.
func TestTopicConfigCommands(t *testing.T) {
	c := startClusterWithArgs(t, "--segment-bytes", "2MiB", "--retention-ms", "3600000")

	out := ctlOK(t, c, "", "topic", "create", "logs", "--partitions", "1",
		"--config", "retention.bytes=1073741824", "--config", "segment.ms=60000")
	assert.Equal(t, "created topic logs: 1 partition, replication factor 1, retention.bytes=1073741824, segment.ms=60000\n", out)

	wantJSON := `[
		{"key":"retention.bytes","value":1073741824,"source":"topic"},
		{"key":"retention.ms","value":3600000,"source":"default"},
		{"key":"segment.bytes","value":2097152,"source":"default"},
		{"key":"segment.ms","value":60000,"source":"topic"}]`
	described := ctlOK(t, c, "", "topic", "describe", "logs", "-o", "json")
	top := requireKeys(t, json.RawMessage(described), "name", "id", "replication_factor", "sealed", "partitions", "config")
	assert.JSONEq(t, wantJSON, string(top["config"]))
	out = ctlOK(t, c, "", "topic", "describe", "logs")
	assert.Equal(t, [][]string{
		{"retention.bytes", "1073741824", "(1", "GiB)", "topic"},
		{"retention.ms", "3600000", "(1h0m0s)", "default"},
		{"segment.bytes", "2097152", "(2", "MiB)", "default"},
		{"segment.ms", "60000", "(1m0s)", "topic"},
	}, tableRows(out, "CONFIG", "VALUE"), out)

	// A topic without a configuration of its own takes the defaults.
	ctlOK(t, c, "", "topic", "create", "plain", "--partitions", "1")
	var plain describedConfig
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "topic", "describe", "plain", "-o", "json")), &plain))
	for _, v := range plain.Config {
		assert.Equal(t, "default", v.Source, v.Key)
	}

	// Bad alters: refused before anything is sent (exit 1), naming the
	// key; an unknown topic is the cluster's refusal (exit 2).
	res := ctlFails(t, c, 1, "InvalidConfig: segment.bytes 1024: ", "", "topic", "alter", "logs", "--config", "segment.bytes=1024")
	assert.Contains(t, res.Stderr, "1048576 (1 MiB)")
	ctlFails(t, c, 1, `InvalidConfig: unknown key "retention.minutes"`, "", "topic", "alter", "logs", "--config", "retention.minutes=5")
	ctlFails(t, c, 1, `InvalidConfig: retention.ms "1d": not a number`, "", "topic", "alter", "logs", "--config", "retention.ms=1d")
	ctlFails(t, c, 2, "UnknownTopic: ", "", "topic", "alter", "nosuch", "--config", "retention.ms=1000")
	ctlFails(t, c, 1, "InvalidConfig: ", "", "topic", "create", "other", "--partitions", "1", "--config", "retention.bytes=0")
	ctlFails(t, c, 2, "UnknownTopic: ", "", "topic", "describe", "other")
	assert.JSONEq(t, described, ctlOK(t, c, "", "topic", "describe", "logs", "-o", "json"), "nothing changed")

	// A good alter: one key set, one removed (back to the node's default).
	out = ctlOK(t, c, "", "topic", "alter", "logs", "--config", "retention.ms=-1", "--delete-config", "segment.ms")
	assert.True(t, strings.HasPrefix(out, "altered topic logs; its configuration is now:\n"), out)
	assert.Equal(t, [][]string{
		{"retention.bytes", "1073741824", "(1", "GiB)", "topic"},
		{"retention.ms", "-1", "(forever)", "topic"},
		{"segment.bytes", "2097152", "(2", "MiB)", "default"},
		{"segment.ms", "604800000", "(7d)", "default"},
	}, tableRows(out, "CONFIG", "VALUE"), out)
	out = ctlOK(t, c, "", "topic", "alter", "logs", "--config", "retention.bytes=-1", "-o", "json")
	assert.JSONEq(t, `{"topic":"logs","config":[
		{"key":"retention.bytes","value":-1,"source":"topic"},
		{"key":"retention.ms","value":-1,"source":"topic"},
		{"key":"segment.bytes","value":2097152,"source":"default"},
		{"key":"segment.ms","value":604800000,"source":"default"}]}`, out)
	var after describedConfig
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "topic", "describe", "logs", "-o", "json")), &after))
	var got describedConfig
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, got.Config, after.Config, "describe shows what alter answered")
}

// TestBenchTopicIsBounded: the topic bench produce creates keeps at most
// 256 MiB a partition unless --config says otherwise, and the bench says
// so.
func TestBenchTopicIsBounded(t *testing.T) {
	c := startCluster(t)
	res := ctl(t, c, "", "bench", "produce", "--records", "10", "--topic", "b1")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stderr, "bench: created topic b1: 1 partition, replication factor 1, keeping per partition retention.bytes=268435456 (256 MiB), retention.ms=604800000 (7d)")
	var d describedConfig
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "topic", "describe", "b1", "-o", "json")), &d))
	assert.Equal(t, []configJSON{
		{Key: "retention.bytes", Value: 256 << 20, Source: "topic"},
		{Key: "retention.ms", Value: 604800000, Source: "default"},
		{Key: "segment.bytes", Value: 64 << 20, Source: "topic"},
		{Key: "segment.ms", Value: 604800000, Source: "default"},
	}, d.Config)

	res = ctl(t, c, "", "bench", "produce", "--records", "10", "--topic", "b1")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stderr, "bench: topic b1 exists; it keeps its configuration (keeping per partition retention.bytes=268435456 (256 MiB)")

	res = ctl(t, c, "", "bench", "produce", "--records", "10", "--topic", "b2", "--config", "retention.bytes=-1")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stderr, "retention.bytes=-1 (unlimited)")
}
