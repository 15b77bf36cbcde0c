package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/controller"
	"gostream/transport"
)

// callCoordinator calls a group API on the node until the coordinator is
// there (the offsets topic is new, or being rebuilt).
func callCoordinator(t *testing.T, ctx context.Context, c *transport.Conn, api transport.API, req, resp transport.Message) error {
	t.Helper()
	for {
		err := c.Call(ctx, api, req, resp)
		if !errors.Is(err, transport.ErrCoordinatorLoading) && !errors.Is(err, transport.ErrNotCoordinator) && !errors.Is(err, transport.ErrNotReady) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The first use of a group creates __consumer_offsets; commits are kept
// across a restart (the coordinator rebuilds them from its log); a refused
// commit writes nothing; the internal topic takes no public writes.
func TestRPCGroupOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.OffsetsPartitions = 4
	n := startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "orders", Partitions: 2, ReplicationFactor: 1}, &ti))
	var pr transport.ProduceResponse
	require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 1, Batch: batchOf(t, "a", "b", "c")}, &pr))

	var fc transport.FindCoordinatorResponse
	require.NoError(t, c.Call(ctx, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: "billing"}, &fc))
	assert.Equal(t, int32(1), fc.Leader)
	assert.Less(t, fc.Partition, int32(4))

	var fetched transport.OffsetFetchResponse
	require.NoError(t, callCoordinator(t, ctx, c, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: "billing"}, &fetched))
	assert.Empty(t, fetched.Offsets, "never committed")

	commit := func(off int64) error {
		return callCoordinator(t, ctx, c, transport.APIOffsetCommit, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 1, Offset: off, Metadata: "m"}}}, nil)
	}
	require.NoError(t, commit(2))
	assert.ErrorIs(t, commit(1), transport.ErrOffsetRegression)
	assert.ErrorIs(t, commit(4), transport.ErrInvalidOffset, "above the high watermark")
	err := callCoordinator(t, ctx, c, transport.APIOffsetCommit, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 2, Offset: 0}}}, nil)
	assert.ErrorIs(t, err, transport.ErrUnknownPartition)

	err = c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: transport.OffsetsTopic, Partition: 0, Batch: batchOf(t, "x")}, &pr)
	assert.ErrorIs(t, err, transport.ErrInvalidRequest)
	assert.ErrorIs(t, c.Call(ctx, transport.APIDeleteTopic, &transport.TopicRequest{Name: transport.OffsetsTopic}, nil), transport.ErrInvalidRequest)
	err = c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "__mine", Partitions: 1, ReplicationFactor: 1}, &ti)
	assert.ErrorIs(t, err, transport.ErrInvalidTopicName)

	// The metrics: one empty group, no member, its lag behind the HW.
	metrics := scrape(t, cfg.HTTP)
	assert.Contains(t, metrics, `gostream_groups{state="empty"} 1`)
	assert.Contains(t, metrics, `gostream_groups{state="stable"} 0`)
	assert.Contains(t, metrics, "gostream_group_members 0")
	assert.Contains(t, metrics, `gostream_group_lag_records{group="billing",partition="1",topic="orders"} 1`)
	assert.Contains(t, metrics, "gostream_group_lag_series_omitted 0")
	assert.Contains(t, metrics, `gostream_request_duration_seconds_count{api="OffsetCommit"}`, "commit latency")

	require.NoError(t, n.stop(t))
	startNode(t, cfg)
	c = dialNode(t, cfg.Listen)
	fetched = transport.OffsetFetchResponse{}
	require.NoError(t, callCoordinator(t, ctx, c, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: "billing"}, &fetched))
	require.Len(t, fetched.Offsets, 1)
	assert.Equal(t, int64(2), fetched.Offsets[0].Offset)
	assert.Equal(t, "m", fetched.Offsets[0].Metadata)
	assert.ErrorIs(t, commit(1), transport.ErrOffsetRegression, "the rebuilt coordinator knows the committed offset")

	// A member joins and is given both partitions.
	var hb transport.GroupHeartbeatResponse
	require.NoError(t, callCoordinator(t, ctx, c, transport.APIGroupHeartbeat, &transport.GroupHeartbeatRequest{Group: "readers", Topics: []string{"orders"}}, &hb))
	assert.Equal(t, []transport.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}, hb.Assigned)
	var desc transport.DescribeGroupResponse
	require.NoError(t, callCoordinator(t, ctx, c, transport.APIDescribeGroup, &transport.GroupRequest{Group: "readers"}, &desc))
	require.Len(t, desc.Members, 1)
	assert.Equal(t, hb.MemberID, desc.Members[0].MemberID)
	assert.ErrorIs(t, callCoordinator(t, ctx, c, transport.APIDeleteGroup, &transport.GroupRequest{Group: "readers"}, nil), transport.ErrGroupNotEmpty)
}

// A coordinator's snapshots bound its log: with small segments and
// frequent snapshots, retention deletes the offsets partition's segments
// below the newest complete snapshot, and a restart rebuilds every
// committed offset from what is left.
func TestRPCGroupOffsetsLogBoundedBySnapshots(t *testing.T) {
	old := controller.OffsetsSegmentBytes
	controller.OffsetsSegmentBytes = 1 << 20 // the least a topic may have
	t.Cleanup(func() { controller.OffsetsSegmentBytes = old })
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.OffsetsPartitions = 1
	cfg.GroupSnapshotEvery = 100
	cfg.RetentionInterval = 20 * time.Millisecond
	n := startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "orders", Partitions: 4, ReplicationFactor: 1}, &ti))
	var pr transport.ProduceResponse
	values := make([]string, 50)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	for p := range int32(4) {
		require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: p, Batch: batchOf(t, values...)}, &pr))
	}
	var fc transport.FindCoordinatorResponse
	require.NoError(t, c.Call(ctx, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: "g0"}, &fc)) // creates the topic
	// 1,000 commits of 20 groups, each with 4 KiB of metadata: segments
	// and snapshots.
	meta := strings.Repeat("m", 4<<10)
	want := map[string]int64{}
	for i := range 1000 {
		g := fmt.Sprintf("g%d", i%20)
		off := int64(i/20) + 1
		err := callCoordinator(t, ctx, c, transport.APIOffsetCommit, &transport.OffsetCommitRequest{Group: g, MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "orders", Partition: int32(i % 4), Offset: off, Metadata: meta}}}, nil)
		require.NoError(t, err)
		want[fmt.Sprintf("%s/%d", g, i%4)] = off
	}
	var lo transport.ListOffsetsResponse
	require.Eventually(t, func() bool {
		require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: transport.OffsetsTopic, Partition: 0}, &lo))
		return lo.LogStartOffset > 0
	}, 10*time.Second, 20*time.Millisecond, "retention deletes below the newest snapshot")
	t.Logf("offsets log: start %d, end %d", lo.LogStartOffset, lo.LogEndOffset)
	assert.Greater(t, lo.LogStartOffset, lo.LogEndOffset/2, "most of the log is gone")

	require.NoError(t, n.stop(t))
	startNode(t, cfg)
	c = dialNode(t, cfg.Listen)
	got := map[string]int64{}
	for i := range 20 {
		g := fmt.Sprintf("g%d", i)
		var fetched transport.OffsetFetchResponse
		require.NoError(t, callCoordinator(t, ctx, c, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: g}, &fetched))
		for _, o := range fetched.Offsets {
			got[fmt.Sprintf("%s/%d", g, o.Partition)] = o.Offset
		}
	}
	assert.Equal(t, want, got, "every committed offset, rebuilt from the snapshot on")
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// A damaged __consumer_offsets replica is not skipped: after a bit flips
// in its log, the group's requests fail with an error, never answer as if
// the group held nothing, and the node stays up.
func TestRPCGroupDamagedOffsetsReplicaIsNotSkipped(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.OffsetsPartitions = 1
	n := startNode(t, cfg)
	c := dialNode(t, cfg.Listen)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ti transport.TopicInfo
	require.NoError(t, c.Call(ctx, transport.APICreateTopic, &transport.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1}, &ti))
	var pr transport.ProduceResponse
	require.NoError(t, c.Call(ctx, transport.APIProduce, &transport.ProduceRequest{Topic: "orders", Partition: 0, Batch: batchOf(t, "a", "b")}, &pr))
	var fc transport.FindCoordinatorResponse
	require.NoError(t, c.Call(ctx, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: "billing"}, &fc))
	for _, off := range []int64{1, 2} {
		require.NoError(t, callCoordinator(t, ctx, c, transport.APIOffsetCommit, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 0, Offset: off}}}, nil))
	}
	require.NoError(t, n.stop(t))

	// Flip a bit inside the first commit's batch, whose checksum then fails.
	segs, err := filepath.Glob(filepath.Join(dir, "topics", transport.OffsetsTopic, "partition-0", "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	require.Greater(t, len(b), 80)
	b[70] ^= 0x10
	require.NoError(t, os.WriteFile(segs[0], b, 0o644))

	startNode(t, cfg)
	c = dialNode(t, cfg.Listen)
	var fetched transport.OffsetFetchResponse
	err = callCoordinator(t, ctx, c, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: "billing"}, &fetched)
	require.Error(t, err, "a damaged log is not read as a group with nothing committed: %+v", fetched)
	t.Logf("offset fetch from a damaged replica: %v", err)
	err = callCoordinator(t, ctx, c, transport.APIOffsetCommit, &transport.OffsetCommitRequest{Group: "billing", MemberEpoch: transport.NoMemberEpoch,
		Offsets: []transport.CommitOffset{{Topic: "orders", Partition: 0, Offset: 0}}}, nil)
	require.Error(t, err, "nor does it take a commit below what it lost")
	// The node still serves everything else.
	var lo transport.ListOffsetsResponse
	require.NoError(t, c.Call(ctx, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: "orders", Partition: 0}, &lo))
	assert.Equal(t, int64(2), lo.HighWatermark)
}
