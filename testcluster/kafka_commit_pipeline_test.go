package testcluster

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// A Kafka connection's OffsetCommits are pipelined as its produces are:
// a commit waiting for its replicas does not hold up the next one read
// on the same connection. Two groups whose partitions of
// __consumer_offsets the same broker leads; a follower of both is paused
// and dropped from the second's partition (failover --broker with
// --partition), so that the first's cannot be acknowledged and the
// second's can. Their commits go out back to back on one connection.
// The second is committed all the same (another connection reads it),
// while the first is still unanswered; once the follower is back, both
// are answered, in order. (When each commit was answered before the next was
// read, one connection made one commit per replication round trip: 16
// franz-go committers sharing a client reached 0.69x of 16 native ones,
// bench-compare's B7.)
func TestKafkaCommitsPipelined(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "t", "--partitions", "3", "--replication-factor", "3")
	for p := range 3 {
		ctlOKIn(t, c, "v\n", "produce", "t", "--partition", fmt.Sprint(p))
	}

	// Each group's partition of __consumer_offsets (the first
	// FindCoordinator creates the topic), and each partition's leader and
	// replicas.
	coordinator := func(group string) (partition int32) {
		var resp transport.FindCoordinatorResponse
		require.Eventually(t, func() bool {
			err := call(t, c.Node(1).RPC, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: group}, &resp)
			return err == nil && resp.Leader > 0
		}, time.Minute, 200*time.Millisecond, "the coordinator of %s", group)
		return resp.Partition
	}
	coordinator("probe")
	var offsets struct {
		Partitions []struct {
			Partition int32   `json:"partition"`
			Leader    int32   `json:"leader"`
			Replicas  []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "topic", "describe", "__consumer_offsets", "-o", "json").Stdout), &offsets))
	leader, replicas := map[int32]int32{}, map[int32][]int32{}
	for _, p := range offsets.Partitions {
		leader[p.Partition], replicas[p.Partition] = p.Leader, p.Replicas
	}

	// Two groups with the same coordinator, on two partitions.
	var first, second string
	var lead, part int32
	byPartition := map[int32]string{}
	for i := 0; first == ""; i++ {
		require.Less(t, i, 500, "two groups with the same coordinator on two partitions")
		g := fmt.Sprintf("pipelined-%d", i)
		p := coordinator(g)
		if _, ok := byPartition[p]; ok {
			continue
		}
		byPartition[p] = g
		for q, h := range byPartition {
			if q != p && leader[q] == leader[p] {
				first, second, lead, part = h, g, leader[p], p
			}
		}
	}
	// The commits are of the partition of t the coordinator leads: the
	// high watermark that a commit is checked against is its own, not one
	// asked of the paused broker.
	var topic struct {
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "topic", "describe", "t", "-o", "json").Stdout), &topic))
	tp := int32(-1)
	for _, p := range topic.Partitions {
		if p.Leader == lead {
			tp = p.Partition
		}
	}
	require.NotEqual(t, int32(-1), tp, "a partition of t led by broker %d", lead)
	// A follower of both, not the controller, paused and dropped from the
	// second's partition.
	var paused int32
	for _, f := range replicas[part] {
		if f != lead && f != 1 {
			paused = f
		}
	}
	require.NotZero(t, paused, "a follower other than the controller among %v", replicas[part])
	t.Logf("groups %s and %s, coordinated by broker %d; broker %d paused and dropped from __consumer_offsets/%d", first, second, lead, paused, part)
	require.NoError(t, c.Node(paused).Pause())
	t.Cleanup(func() { c.Node(paused).Resume() })
	ctlOK(t, c, "failover", "--topic", "__consumer_offsets", "--partition", fmt.Sprint(part), "--broker", fmt.Sprint(paused))
	committed := func(group string) int64 {
		var resp transport.OffsetFetchResponse
		if err := call(t, c.Node(lead).RPC, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: group, Topics: []string{"t"}}, &resp); err != nil {
			return -2
		}
		for _, o := range resp.Offsets {
			if o.Partition == tp {
				return o.Offset
			}
		}
		return -1
	}
	require.Eventually(t, func() bool { return committed(second) == -1 }, 30*time.Second, 100*time.Millisecond,
		"the second group's coordinator serves again after the failover")

	conn, err := net.Dial("tcp", c.Node(lead).Kafka)
	require.NoError(t, err)
	defer conn.Close()
	var frames []byte
	for corr, g := range []string{first, second} {
		frames = append(frames, offsetCommitFrame(int32(corr+1), g, "t", tp, 1)...)
	}
	_, err = conn.Write(frames)
	require.NoError(t, err)
	sent := time.Now()

	require.Eventually(t, func() bool { return committed(second) == 1 }, 30*time.Second, 100*time.Millisecond,
		"the second commit is committed while the first waits for its paused follower")
	t.Logf("the second commit is read back %s after the two were sent", time.Since(sent).Round(time.Millisecond))
	conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var size [4]byte
	_, err = io.ReadFull(conn, size[:])
	if err == nil {
		corr, resp := readOffsetCommitBody(t, conn, size)
		require.Failf(t, "an answer came before the first commit could be acknowledged", "correlation id %d: %+v", corr, resp)
	}
	var ne net.Error
	require.ErrorAs(t, err, &ne, "no answer yet: the first commit waits for its follower")
	require.True(t, ne.Timeout(), "%v", err)

	require.NoError(t, c.Node(paused).Resume())
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	for corr := int32(1); corr <= 2; corr++ {
		got, resp := readOffsetCommitAnswer(t, conn)
		assert.Equal(t, corr, got, "answers in the order of the requests")
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		assert.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode, "commit %d", corr)
	}
	assert.Equal(t, int64(1), committed(first))
}

// offsetCommitFrame is an OffsetCommit v2 request frame: group commits
// offset of topic/partition from outside any membership.
func offsetCommitFrame(corr int32, group, topic string, partition int32, offset int64) []byte {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 2
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// The v1 request header: key, version, correlation id, client id.
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Version))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, 4)
	frame = append(frame, "test"...)
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// readOffsetCommitAnswer reads one OffsetCommit v2 answer from conn.
func readOffsetCommitAnswer(t *testing.T, conn net.Conn) (int32, *kmsg.OffsetCommitResponse) {
	t.Helper()
	var size [4]byte
	_, err := io.ReadFull(conn, size[:])
	require.NoError(t, err)
	return readOffsetCommitBody(t, conn, size)
}

// readOffsetCommitBody reads the rest of an OffsetCommit v2 answer whose
// size was read.
func readOffsetCommitBody(t *testing.T, conn net.Conn, size [4]byte) (int32, *kmsg.OffsetCommitResponse) {
	t.Helper()
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(conn, body)
	require.NoError(t, err)
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = 2
	require.NoError(t, resp.ReadFrom(body[4:]))
	return int32(binary.BigEndian.Uint32(body)), resp
}
