package kafkaapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete v0 is advertised and served: a node that coordinates no
// group answers it NOT_COORDINATOR (so the client looks the coordinator
// up), not UNSUPPORTED_VERSION. The groups themselves are testcluster's
// (TestKafkaOffsetDelete).
func TestOffsetDeleteIsServed(t *testing.T) {
	n := startOneNode(t, map[string]int{"orders": 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	var found *kmsg.ApiVersionsResponseApiKey
	for i := range av.ApiKeys {
		if av.ApiKeys[i].ApiKey == kmsg.OffsetDelete.Int16() {
			found = &av.ApiKeys[i]
		}
	}
	require.NotNil(t, found, "OffsetDelete is advertised")
	assert.Equal(t, [2]int16{0, 0}, [2]int16{found.MinVersion, found.MaxVersion})

	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = "orders"
	rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	require.NoError(t, err)
	assert.Equal(t, kerr.NotCoordinator.Code, resp.ErrorCode)
	assert.Empty(t, resp.Topics, "a group error comes with no topics, as Kafka answers")
}
