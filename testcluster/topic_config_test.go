package testcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// These tests run topic configuration (retention, segments) on three real
// nodes: a change reaches every replica, retention deletes old segments on
// each, nothing the cluster refuses changes anything, the configuration
// survives restarts, and a replica left behind the leader's log start is
// rebuilt by recover.

// fastRetention makes retention run every 200 ms instead of every minute.
var fastRetention = []string{"--retention-check-interval", "200ms"}

// bigBatch is one record of 128 KiB: seven of them fill a 1 MiB segment.
func bigBatch(t *testing.T, tag int) []byte {
	t.Helper()
	value := strings.Repeat(strconv.Itoa(tag%10), 128<<10)
	b, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte(value)}})
	require.NoError(t, err)
	return b
}

// produceBig appends n big batches to partition 0 of topic through addr
// (its leader) and returns the last acknowledgment.
func produceBig(t *testing.T, addr, topic string, n int) transport.ProduceResponse {
	t.Helper()
	var ack transport.ProduceResponse
	for i := range n {
		req := &transport.ProduceRequest{Topic: topic, Partition: 0, Batch: bigBatch(t, i)}
		require.Eventually(t, func() bool {
			err := call(t, addr, transport.APIProduce, req, &ack)
			if err != nil {
				t.Logf("produce to %s: %v", addr, err)
			}
			return err == nil
		}, 60*time.Second, 100*time.Millisecond)
	}
	return ack
}

// segmentBases lists the base offsets of a replica's segment files.
func segmentBases(t *testing.T, n *Node, topic string) []int64 {
	t.Helper()
	segs, err := segmentFiles(n.ReplicaDir(topic, 0))
	require.NoError(t, err)
	var bases []int64
	for _, s := range segs {
		bases = append(bases, s.base)
	}
	return bases
}

// waitSegments waits until ok accepts the segment bases of topic's
// partition 0 on every node of c.
func waitSegments(t *testing.T, c *Cluster, topic, what string, ok func(bases []int64) bool) {
	t.Helper()
	for _, n := range c.Nodes {
		require.Eventually(t, func() bool { return ok(segmentBases(t, n, topic)) }, 60*time.Second, 100*time.Millisecond,
			"node %d never showed %s: segments %v", n.ID, what, segmentBases(t, n, topic))
	}
}

// ctlTopicConfig is the config part of topic describe -o json.
type ctlTopicConfig struct {
	Config []struct {
		Key    string `json:"key"`
		Value  int64  `json:"value"`
		Source string `json:"source"`
	} `json:"config"`
	Partitions []struct {
		LogStartOffset *int64  `json:"log_start_offset"`
		HighWatermark  *int64  `json:"high_watermark"`
		Active         []int32 `json:"active"`
	} `json:"partitions"`
}

func (c ctlTopicConfig) value(key string) (int64, string) {
	for _, v := range c.Config {
		if v.Key == key {
			return v.Value, v.Source
		}
	}
	return 0, ""
}

func metadataEpoch(t *testing.T, addr string) int64 {
	t.Helper()
	var md transport.MetadataResponse
	require.NoError(t, call(t, addr, transport.APIMetadata, &transport.MetadataRequest{}, &md))
	return md.MetadataEpoch
}

// TestTopicConfigOnThreeNodes: a topic created with the defaults (128 MiB
// segments, nothing deleted by size) is altered to 1 MiB segments and 1
// MiB of retention: every replica rolls and deletes its old segments,
// readers below the new log start get OffsetOutOfRange naming it, and the
// replicas stay identical. The cluster refuses a bad key or value itself
// and changes nothing. The configuration survives a restart of the
// controller, and a restarted follower reopens its log with it.
func TestTopicConfigOnThreeNodes(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, NodeArgs: fastRetention})
	leader := c.Nodes[0].RPC
	res := checkCtl(t, c, "topic created", 60*time.Second, exitZero, "topic", "create", "logs", "--partitions", "1", "--replication-factor", "3")
	require.Contains(t, res.Stdout, "created topic logs")

	// 3.5 MiB under the defaults: one segment on every replica.
	produceBig(t, leader, "logs", 28)
	for _, n := range c.Nodes {
		assert.Equal(t, []int64{0}, segmentBases(t, n, "logs"), "node %d", n.ID)
	}

	before := metadataEpoch(t, leader)
	res = runCtl(t, c, "topic", "alter", "logs", "--config", "segment.bytes=1048576", "--config", "retention.bytes=1048576")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Equal(t, before+1, metadataEpoch(t, leader), "one metadata change")

	// The next append rolls the 3.5 MiB segment; 1 MiB segments follow,
	// seven batches each (28, 35, 42, 49); retention keeps the newest that
	// hold at least 1 MiB (42 and 49) on every replica.
	ack := produceBig(t, leader, "logs", 28)
	require.Equal(t, int64(55), ack.BaseOffset)
	assert.ElementsMatch(t, []int32{1, 2, 3}, ack.Replicas)
	waitSegments(t, c, "logs", "the old segments deleted", func(bases []int64) bool {
		return len(bases) > 0 && bases[0] >= 42 && len(bases) <= 2
	})

	d := ctlJSON[ctlTopicConfig](t, c, "topic", "describe", "logs")
	require.Len(t, d.Partitions, 1)
	require.NotNil(t, d.Partitions[0].LogStartOffset)
	start := *d.Partitions[0].LogStartOffset
	assert.GreaterOrEqual(t, start, int64(42))
	for key, want := range map[string]int64{"segment.bytes": 1 << 20, "retention.bytes": 1 << 20} {
		v, src := d.value(key)
		assert.Equal(t, want, v, key)
		assert.Equal(t, "topic", src, key)
	}

	// A read below the log start is OffsetOutOfRange, naming the start.
	res = runCtl(t, c, "consume", "logs", "--partition", "0", "--offset", "0")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "OffsetOutOfRange: "), res.Stderr)
	assert.Contains(t, res.Stderr, fmt.Sprintf("starts at offset %d, not 0", start), res.Stderr)
	var fr transport.FetchResponse
	err := call(t, leader, transport.APIFetch, &transport.FetchRequest{Topic: "logs", Partition: 0, Offset: 3, MaxBytes: 1 << 20}, &fr)
	require.ErrorIs(t, err, transport.ErrOffsetOutOfRange)
	assert.Contains(t, err.Error(), fmt.Sprintf("starts at %d", start))
	checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "--topic", "logs")

	// The cluster refuses what a client that skips the checks sends: the
	// key is named, and the metadata does not change on any node.
	epoch := metadataEpoch(t, leader)
	var ti transport.TopicInfo
	err = call(t, leader, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "logs",
		Set: []transport.ConfigEntry{{Key: "retention.ms", Value: 60000}, {Key: "segment.bytes", Value: 12}}}, &ti)
	require.ErrorIs(t, err, transport.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "segment.bytes 12")
	err = call(t, leader, transport.APIAlterTopicConfig, &transport.AlterTopicConfigRequest{Name: "logs",
		Set: []transport.ConfigEntry{{Key: "log.cleanup.policy", Value: 1}}}, &ti)
	require.ErrorIs(t, err, transport.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `"log.cleanup.policy"`)
	err = call(t, leader, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "other", Partitions: 1, ReplicationFactor: 3,
		Config: []transport.ConfigEntry{{Key: "retention.bytes", Value: -7}}}, &ti)
	require.ErrorIs(t, err, transport.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "retention.bytes -7")
	for _, n := range c.Nodes {
		assert.Equal(t, epoch, metadataEpoch(t, n.RPC), "node %d", n.ID)
	}
	assert.Equal(t, d.Config, ctlJSON[ctlTopicConfig](t, c, "topic", "describe", "logs").Config)

	// The controller restarts: the configuration is in its metadata.
	require.NoError(t, c.Node(1).Stop(30*time.Second))
	require.NoError(t, c.StartNode(1))
	after := checkCtl(t, c, "describe after the controller's restart", 60*time.Second, exitZero, "topic", "describe", "logs", "-o", "json")
	var restarted ctlTopicConfig
	require.NoError(t, json.Unmarshal([]byte(after.Stdout), &restarted))
	assert.Equal(t, d.Config, restarted.Config)

	// A follower restarts: it reopens its log with the topic's
	// configuration, so its segments go on rolling at 1 MiB and
	// retention goes on deleting there.
	require.NoError(t, c.Node(3).Stop(30*time.Second))
	require.NoError(t, c.StartNode(3))
	ack = produceBig(t, leader, "logs", 14)
	assert.ElementsMatch(t, []int32{1, 2, 3}, ack.Replicas)
	waitSegments(t, c, "logs", "segments rolled and deleted after the restarts", func(bases []int64) bool {
		return len(bases) > 0 && bases[0] >= 56 && len(bases) <= 2
	})
	checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "--topic", "logs")
}

// TestRecoverWhenTheLeaderDeletedWhatTheReplicaHeld: a follower is lost
// and dropped from the active set; while it is away, retention on the
// leader deletes every offset it held. When it returns, recover rebuilds
// it from the leader's log start (its old files kept in its quarantine/),
// verify finds it identical, and writes reach it again.
func TestRecoverWhenTheLeaderDeletedWhatTheReplicaHeld(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, NodeArgs: fastRetention})
	leader := c.Nodes[0].RPC
	start := loseBroker3PastRetention(t, c, "r")
	assert.Equal(t, []int64{0}, segmentBases(t, c.Node(3), "r"), "broker 3, stopped, still holds offsets 0 to 4")

	require.NoError(t, c.StartNode(3))
	rec := recoverBroker3(t, c)
	assert.Equal(t, int64(40), rec.CopiedTo)
	assert.Equal(t, []int32{1, 2, 3}, rec.NewActive)

	bases := segmentBases(t, c.Node(3), "r")
	require.NotEmpty(t, bases)
	assert.GreaterOrEqual(t, bases[0], start, "rebuilt from the leader's log start")
	damaged, err := filepath.Glob(filepath.Join(c.Node(3).ReplicaDir("r", 0), storage.QuarantineDir, "damaged-*", "00000000000000000000.log"))
	require.NoError(t, err)
	require.Len(t, damaged, 1, "the old files are kept in quarantine, not deleted")
	fi, err := os.Stat(damaged[0])
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(4*128<<10), "with the four records it held")

	checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "--topic", "r")
	ack := produceBig(t, leader, "r", 1)
	assert.ElementsMatch(t, []int32{1, 2, 3}, ack.Replicas, "broker 3 takes writes again")
}

// loseBroker3PastRetention creates topic (one partition on brokers 1 to
// 3, 1 MiB segments and retention), writes four big records, kills broker
// 3 and fails it over, then writes 36 more until retention on the leader
// has deleted every offset broker 3 held. It returns the leader's log
// start then.
func loseBroker3PastRetention(t *testing.T, c *Cluster, topic string) int64 {
	t.Helper()
	leader := c.Nodes[0].RPC
	checkCtl(t, c, "topic created", 60*time.Second, exitZero, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3",
		"--config", "segment.bytes=1048576", "--config", "retention.bytes=1048576")
	produceBig(t, leader, topic, 4)

	require.NoError(t, c.Node(3).Kill())
	checkCtl(t, c, "broker 3 dropped", 60*time.Second, exitZero, "failover", "--broker", "3")
	ack := produceBig(t, leader, topic, 36)
	assert.ElementsMatch(t, []int32{1, 2}, ack.Replicas)
	var start int64
	require.Eventually(t, func() bool {
		var lo transport.ListOffsetsResponse
		if err := call(t, leader, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: topic, Partition: 0}, &lo); err != nil {
			return false
		}
		start = lo.LogStartOffset
		return start > 4
	}, 60*time.Second, 100*time.Millisecond, "retention on the leader moves its log start past broker 3's log end")
	return start
}

// recoverBroker3 runs recover --broker 3 and returns its one change,
// which must have succeeded.
func recoverBroker3(t *testing.T, c *Cluster) ctlChange {
	t.Helper()
	res := checkCtl(t, c, "a recovery of broker 3", 60*time.Second, exitZero, "recover", "--broker", "3", "-o", "json")
	var rec ctlChangeReport
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rec), res.Stdout)
	require.Len(t, rec.Results, 1)
	assert.Empty(t, rec.Results[0].Error)
	return rec.Results[0]
}

// TestRecoverAnEmptyReplicaBelowTheLeadersStart: a returning replica
// that is an empty log beginning below the leader's log start (what a
// rebuild leaves when retention on the leader overtakes its copy) is
// rebuilt again from the leader's start and filled; it was left as it
// was, and every recover then failed with "batch at S, log ends at E".
func TestRecoverAnEmptyReplicaBelowTheLeadersStart(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, NodeArgs: fastRetention})
	loseBroker3PastRetention(t, c, "e")

	// Broker 3's replica: an empty log whose one segment begins at 4.
	dir := c.Node(3).ReplicaDir("e", 0)
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	idx, err := filepath.Glob(filepath.Join(dir, "*.index"))
	require.NoError(t, err)
	for _, f := range append(segs, idx...) {
		require.NoError(t, os.Remove(f))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000004.log"), nil, 0o644))

	require.NoError(t, c.StartNode(3))
	assert.Equal(t, int64(40), recoverBroker3(t, c).CopiedTo)
	checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "--topic", "e")
}

// TestRetentionNeverPassesTheHighWatermark: with a follower paused, the
// leader appends records that not every active replica holds (above the
// high watermark), in segments retention would delete by size. Retention
// deletes only below the high watermark, so when the follower resumes it
// is caught up from the leader's log and the replicas are identical.
func TestRetentionNeverPassesTheHighWatermark(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, NodeArgs: fastRetention})
	leader := c.Nodes[0].RPC
	checkCtl(t, c, "topic created", 60*time.Second, exitZero, "topic", "create", "hw", "--partitions", "1", "--replication-factor", "3",
		"--config", "segment.bytes=1048576")
	produceBig(t, leader, "hw", 7) // one full segment, on every replica: the high watermark is 7

	require.NoError(t, c.Node(3).Pause())
	t.Cleanup(func() { c.Node(3).Resume() })
	for i := range 28 {
		req := &transport.ProduceRequest{Topic: "hw", Partition: 0, TimeoutMs: 200, Batch: bigBatch(t, i)}
		err := call(t, leader, transport.APIProduce, req, &transport.ProduceResponse{})
		require.Error(t, err, "broker 3 is paused: nothing is acknowledged")
	}
	var lo transport.ListOffsetsResponse
	require.NoError(t, call(t, leader, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "hw", Partition: 0}, &lo))
	require.Equal(t, transport.ListOffsetsResponse{LogStartOffset: 0, HighWatermark: 7, LogEndOffset: 35}, lo)
	require.Equal(t, []int64{0, 7, 14, 21, 28}, segmentBases(t, c.Node(1), "hw"))

	// Retention by size now: 1 MiB would keep segments 21 and 28 only,
	// but 7, 14 and 21 hold records above the high watermark.
	res := runCtl(t, c, "topic", "alter", "hw", "--config", "retention.bytes=1048576")
	require.Equal(t, 0, res.Exit, res.Stderr)
	require.Eventually(t, func() bool {
		bases := segmentBases(t, c.Node(1), "hw")
		return len(bases) > 0 && bases[0] > 0
	}, 30*time.Second, 50*time.Millisecond, "retention runs on the leader")
	assert.Equal(t, []int64{7, 14, 21, 28}, segmentBases(t, c.Node(1), "hw"), "only segment 0 lies below the high watermark")

	require.NoError(t, c.Node(3).Resume())
	ack := produceBig(t, leader, "hw", 1)
	assert.ElementsMatch(t, []int32{1, 2, 3}, ack.Replicas, "broker 3 was caught up from the leader's log")
	checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "--topic", "hw")
	// A follower learns the high watermark with the next batch it is
	// sent, and deletes below it from then on.
	produceBig(t, leader, "hw", 1)
	waitSegments(t, c, "hw", "retention below the new high watermark", func(bases []int64) bool {
		return len(bases) > 0 && bases[0] >= 28
	})
}
