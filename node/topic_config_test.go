package node_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// configOf returns a TopicInfo's config as key -> value, and the keys that
// are the node's defaults.
func configOf(ti transport.TopicInfo) (map[string]int64, map[string]bool) {
	values, defaults := map[string]int64{}, map[string]bool{}
	for _, c := range ti.Config {
		values[c.Key] = c.Value
		defaults[c.Key] = c.Default
	}
	return values, defaults
}

func describeOne(t *testing.T, ctx context.Context, c *transport.Conn, name string) (transport.MetadataResponse, transport.TopicInfo) {
	t.Helper()
	var md transport.MetadataResponse
	require.NoError(t, c.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{Topics: []string{name}}, &md))
	require.Len(t, md.Topics, 1)
	return md, md.Topics[0]
}

// TestRPCTopicConfig: a topic created with a configuration shows it beside
// the node's defaults; the log runs with it (small segments, retention by
// size); alter changes it as one metadata change, refuses bad keys and
// values and changes nothing then; the configuration survives a restart.
func TestRPCTopicConfig(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	cfg.RetentionInterval = 50 * time.Millisecond
	cfg.RetentionMs = 3600 * 1000 // a node default of one hour
	n := startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var ti transport.TopicInfo
	err := c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "bad", Partitions: 1, ReplicationFactor: 1,
		Config: []transport.ConfigEntry{{Key: "segment.bytes", Value: 100}}}, &ti)
	require.ErrorIs(t, err, transport.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "segment.bytes 100")
	err = c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "bad", Partitions: 1, ReplicationFactor: 1,
		Config: []transport.ConfigEntry{{Key: "retention.hours", Value: 1}}}, &ti)
	require.ErrorIs(t, err, transport.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `unknown key "retention.hours"`)
	var md transport.MetadataResponse
	err = c.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{Topics: []string{"bad"}}, &md)
	require.ErrorIs(t, err, transport.ErrUnknownTopic, "a refused create creates nothing")

	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "logs", Partitions: 1, ReplicationFactor: 1,
		Config: []transport.ConfigEntry{{Key: "segment.bytes", Value: 1 << 20}, {Key: "retention.bytes", Value: 1 << 20}}}, &ti))
	values, defaults := configOf(ti)
	assert.Equal(t, map[string]int64{"retention.bytes": 1 << 20, "retention.ms": 3600 * 1000, "segment.bytes": 1 << 20, "segment.ms": 7 * 24 * 3600 * 1000}, values)
	assert.Equal(t, map[string]bool{"retention.bytes": false, "retention.ms": true, "segment.bytes": false, "segment.ms": true}, defaults)
	_, described := describeOne(t, ctx, c, "logs")
	assert.Equal(t, ti.Config, described.Config)

	// 3.5 MiB in batches of 128 KiB: 1 MiB segments roll, and retention
	// keeps about 1 MiB of them.
	value := strings.Repeat("x", 128<<10)
	var ack transport.ProduceResponse
	for range 28 {
		require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "logs", Partition: 0, Batch: batchOf(t, value)}, &ack))
	}
	dir := filepath.Join(cfg.DataDir, "topics", "logs", "partition-0")
	require.Eventually(t, func() bool {
		segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		return len(segs) <= 2
	}, 10*time.Second, 20*time.Millisecond, "retention keeps about 1 MiB of 1 MiB segments")
	var lo transport.ListOffsetsResponse
	require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "logs", Partition: 0}, &lo))
	// Seven batches fit a segment: segments 0, 7, 14 and 21 (active).
	// Segment 21 alone holds less than 1 MiB, so 14 stays too.
	assert.Equal(t, int64(14), lo.LogStartOffset, "the log start moved past the deleted segments")
	assert.Equal(t, int64(28), lo.HighWatermark)
	var fr transport.FetchResponse
	err = c.Call(ctx, transport.APIFetch, &transport.FetchRequest{Topic: "logs", Partition: 0, Offset: 0, MaxBytes: 1 << 20}, &fr)
	require.ErrorIs(t, err, transport.ErrOffsetOutOfRange, "a read below the log start")

	// Bad alters change nothing, not even the metadata epoch.
	before, _ := describeOne(t, ctx, c, "logs")
	for _, req := range []*transport.AlterTopicConfigRequest{
		{Name: "logs", Set: []transport.ConfigEntry{{Key: "retention.bytes", Value: 0}}},
		{Name: "logs", Set: []transport.ConfigEntry{{Key: "segment.ms", Value: 60000}, {Key: "cleanup.policy", Value: 1}}},
		{Name: "logs", Delete: []string{"retention.hours"}},
		{Name: "logs", Set: []transport.ConfigEntry{{Key: "segment.ms", Value: 60000}, {Key: "segment.ms", Value: 70000}}},
		{Name: "logs", Set: []transport.ConfigEntry{{Key: "segment.ms", Value: 60000}}, Delete: []string{"segment.ms"}},
		{Name: "logs"},
	} {
		err := c.Call(ctx, transport.APIAlterTopicConfig, req, &ti)
		assert.ErrorIs(t, err, transport.ErrInvalidConfig, "%+v", req)
	}
	err = c.Call(ctx, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "nope", Set: []transport.ConfigEntry{{Key: "segment.ms", Value: 60000}}}, &ti)
	assert.ErrorIs(t, err, transport.ErrUnknownTopic)
	after, afterTopic := describeOne(t, ctx, c, "logs")
	assert.Equal(t, before.MetadataEpoch, after.MetadataEpoch)
	assert.Equal(t, before.Topics[0].Config, afterTopic.Config)

	// A good one: retention.bytes unlimited, segment.bytes back to the
	// node's default, retention.ms its own.
	require.NoError(t, c.Call(ctx, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "logs",
		Set:    []transport.ConfigEntry{{Key: "retention.bytes", Value: -1}, {Key: "retention.ms", Value: -1}},
		Delete: []string{"segment.bytes"}}, &ti))
	values, defaults = configOf(ti)
	assert.Equal(t, map[string]int64{"retention.bytes": -1, "retention.ms": -1, "segment.bytes": 128 << 20, "segment.ms": 7 * 24 * 3600 * 1000}, values)
	assert.Equal(t, map[string]bool{"retention.bytes": false, "retention.ms": false, "segment.bytes": true, "segment.ms": true}, defaults)
	changed, _ := describeOne(t, ctx, c, "logs")
	assert.Equal(t, after.MetadataEpoch+1, changed.MetadataEpoch, "one metadata change")
	// The same alter again changes nothing.
	require.NoError(t, c.Call(ctx, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "logs",
		Set: []transport.ConfigEntry{{Key: "retention.ms", Value: -1}}}, &ti))
	again, _ := describeOne(t, ctx, c, "logs")
	assert.Equal(t, changed.MetadataEpoch, again.MetadataEpoch)

	// The configuration is in the controller's metadata: it survives a
	// restart.
	require.NoError(t, n.stop(t))
	startNode(t, cfg)
	c = dialNode(t, cfg.Listen)
	require.Eventually(t, func() bool {
		var md transport.MetadataResponse
		err := c.Call(ctx, transport.APIMetadata, &transport.MetadataRequest{Topics: []string{"logs"}}, &md)
		return err == nil && len(md.Topics) == 1
	}, 10*time.Second, 20*time.Millisecond)
	_, restarted := describeOne(t, ctx, c, "logs")
	assert.Equal(t, ti.Config, restarted.Config)
}
