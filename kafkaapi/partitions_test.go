package kafkaapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions answers per topic, as Kafka does: a topic named twice
// is INVALID_REQUEST, answered once, and nothing is asked of the
// controller for it; replica lists that cannot be used are
// INVALID_REPLICA_ASSIGNMENT on any node, found against its own metadata
// (t has 3 partitions of one replica on broker 1, the only broker); the
// rest goes to the controller (here none: NOT_CONTROLLER).
func TestCreatePartitionsPerTopicErrors(t *testing.T) {
	s := New(Config{Broker: 1, Core: groupCore(t)})
	req := kmsg.NewPtrCreatePartitionsRequest()
	add := func(topic string, count int32, lists ...[]int32) {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, l := range lists {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = l
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("twice", 4)
	add("t", 5, []int32{1})
	add("twice", 5)
	add("other", 6)
	resp, err := s.createPartitions(context.Background(), req)
	require.NoError(t, err)
	got := map[string]int16{}
	for _, rt := range resp.(*kmsg.CreatePartitionsResponse).Topics {
		_, dup := got[rt.Topic]
		assert.False(t, dup, "%s answered twice", rt.Topic)
		got[rt.Topic] = rt.ErrorCode
	}
	assert.Equal(t, map[string]int16{
		"twice": kerr.InvalidRequest.Code,
		"t":     kerr.InvalidReplicaAssignment.Code,
		"other": kerr.NotController.Code,
	}, got)

	// Each list wrong in its own way.
	for name, lists := range map[string][][]int32{
		"unregistered broker":   {{2}, {1}},
		"two replicas for RF 1": {{1, 1}, {1, 1}},
		"too many lists":        {{1}, {1}, {1}},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "t", 5
		for _, l := range lists {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: l})
		}
		req.Topics = append(req.Topics, rt)
		resp, err := s.createPartitions(context.Background(), req)
		require.NoError(t, err)
		topics := resp.(*kmsg.CreatePartitionsResponse).Topics
		require.Len(t, topics, 1)
		assert.Equal(t, kerr.InvalidReplicaAssignment.Code, topics[0].ErrorCode, name)
		require.NotNil(t, topics[0].ErrorMessage, name)
	}
}
