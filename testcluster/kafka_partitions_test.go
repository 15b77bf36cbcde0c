package testcluster

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka admin client grows a topic with CreatePartitions (franz-go
// sends it to the controller Metadata names; sent to another node, the
// node forwards it): ValidateOnly changes nothing, the grown topic takes
// a record on a new partition, gostream-ctl and kcat -L see the new count,
// and lists given are used as given. Refused per topic, with Kafka's
// codes, and nothing changed: fewer or as many partitions
// (INVALID_PARTITIONS), an unknown topic (UNKNOWN_TOPIC_OR_PARTITION),
// __consumer_offsets (INVALID_REQUEST), a topic named twice
// (INVALID_REQUEST), lists the topic cannot take
// (INVALID_REPLICA_ASSIGNMENT).
func TestKafkaCreatePartitions(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "kp", "--partitions", "2", "--replication-factor", "3")
	ctlOK(t, c, "topic", "create", "other", "--partitions", "1", "--replication-factor", "3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type topicReq struct {
		name  string
		count int32
		lists [][]int32
	}
	grow := func(validateOnly bool, topics ...topicReq) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = validateOnly
		for _, tr := range topics {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = tr.name, tr.count
			for _, l := range tr.lists {
				rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: l})
			}
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			_, twice := out[rt.Topic]
			assert.False(t, twice, "%s answered twice", rt.Topic)
			out[rt.Topic] = rt.ErrorCode
			if rt.ErrorCode != 0 {
				t.Logf("%s: %s: %s", rt.Topic, kerr.ErrorForCode(rt.ErrorCode), *rt.ErrorMessage)
			}
		}
		return out
	}
	partitions := func(topic string) int {
		return len(ctlJSON[ctlReplicas](t, c, "topic", "describe", topic).Partitions)
	}
	// A group's coordinator, looked up, makes __consumer_offsets.
	require.Eventually(t, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
		resp, err := fc.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		for _, co := range resp.Coordinators {
			if co.ErrorCode != 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond)
	epoch := metadataEpoch(t, c.Node(1).RPC)

	assert.Equal(t, map[string]int16{"kp": 0}, grow(true, topicReq{"kp", 4, nil}))
	assert.Equal(t, map[string]int16{
		"other":              kerr.InvalidPartitions.Code,
		"nope":               kerr.UnknownTopicOrPartition.Code,
		"__consumer_offsets": kerr.InvalidRequest.Code,
		"kp":                 kerr.InvalidReplicaAssignment.Code,
	}, grow(false, topicReq{"other", 1, nil}, topicReq{"nope", 3, nil}, topicReq{"__consumer_offsets", 60, nil},
		topicReq{"kp", 4, [][]int32{{1, 2, 3}}}))
	assert.Equal(t, map[string]int16{"kp": kerr.InvalidRequest.Code, "other": kerr.InvalidPartitions.Code},
		grow(false, topicReq{"kp", 4, nil}, topicReq{"other", 1, nil}, topicReq{"kp", 5, nil}))
	assert.Equal(t, epoch, metadataEpoch(t, c.Node(1).RPC), "nothing changed")
	assert.Equal(t, 2, partitions("kp"))

	// For real: franz-go forgets its metadata of a topic it grows, so it
	// produces to the new partition at once.
	assert.Equal(t, map[string]int16{"kp": 0}, grow(false, topicReq{"kp", 4, nil}))
	assert.Equal(t, map[string]int16{"kp": kerr.InvalidPartitions.Code}, grow(false, topicReq{"kp", 4, nil}), "as many")
	assert.Equal(t, map[string]int16{"kp": kerr.InvalidPartitions.Code}, grow(false, topicReq{"kp", 3, nil}), "fewer")
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "kp", Partition: 3, Value: []byte("on a new partition")}).FirstErr())
	assert.Contains(t, ctlOK(t, c, "consume", "kp", "--partition", "3", "-o", "json").Stdout, `"value":"on a new partition"`)
	assert.Equal(t, 4, partitions("kp"))
	if _, err := exec.LookPath("kcat"); err == nil {
		kctx, kcancel := context.WithTimeout(ctx, 30*time.Second)
		defer kcancel()
		out, err := exec.CommandContext(kctx, kcatPath(t), "-b", c.Node(3).Kafka, "-L", "-t", "kp").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), `topic "kp" with 4 partitions`)
	}

	// Lists given, through a node that is not the controller: forwarded,
	// and used as given.
	node3, err := kgo.NewClient(kgo.SeedBrokers(c.Node(3).Kafka))
	require.NoError(t, err)
	defer node3.Close()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "kp", 5
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{2, 3, 1}}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, node3.Broker(3))
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "%v", resp.Topics[0].ErrorMessage)
	d := ctlJSON[ctlReplicas](t, c, "topic", "describe", "kp")
	require.Len(t, d.Partitions, 5)
	assert.Equal(t, []int32{2, 3, 1}, d.Partitions[4].Replicas)
	hist := ctlOK(t, c, "cluster", "history").Stdout
	assert.Contains(t, hist, "kp/4")
	assert.True(t, strings.Contains(hist, "(kafka)"), "the Kafka client is the requester: %s", hist)
}
