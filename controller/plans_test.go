package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/controller/plan"
	"gostream/metadata"
	"gostream/transport"
)

// sizeBrokers answers ReplicaSizes for each broker with what it hosts in
// the metadata, each replica of size bytes, and nothing for the silent.
type sizeBrokers struct {
	mu     sync.Mutex
	meta   *metadata.Cluster
	size   func(topic string, partition int32, broker int32) int64
	silent map[int32]bool
	asked  map[int32]transport.ReplicaSizesRequest
}

func (f *sizeBrokers) Call(_ context.Context, addr string, api transport.API, req, resp transport.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var id int32
	if _, err := fmt.Sscanf(addr, "broker-%d", &id); err != nil || f.silent[id] {
		return fmt.Errorf("%w: dial %s: connection refused", transport.ErrBrokerNotAvailable, addr)
	}
	switch api {
	case transport.APIDescribeCluster:
		*resp.(*transport.DescribeClusterResponse) = transport.DescribeClusterResponse{NodeID: id, RootID: rootOf(id)}
		return nil
	case transport.APIReplicaSizes:
		var r transport.ReplicaSizesRequest
		if err := json.Unmarshal(req.(*transport.JSONMessage).Data, &r); err != nil {
			return err
		}
		if f.asked == nil {
			f.asked = map[int32]transport.ReplicaSizesRequest{}
		}
		f.asked[id] = r
		var out transport.ReplicaSizes
		for _, t := range f.meta.Topics {
			for p, part := range t.Partitions {
				for _, b := range part.Replicas {
					if b == id {
						out.Replicas = append(out.Replicas, transport.ReplicaSize{Topic: t.Name, TopicID: t.ID, Partition: int32(p),
							Bytes: f.size(t.Name, int32(p), id), Leader: part.Leader == id})
					}
				}
			}
		}
		// A replica of a topic the controller does not know is ignored.
		out.Replicas = append(out.Replicas, transport.ReplicaSize{Topic: "gone", Partition: 0, Bytes: 1 << 40, Leader: true})
		data, err := json.Marshal(out)
		*resp.(*transport.JSONMessage) = transport.JSONMessage{Data: data}
		return err
	}
	return fmt.Errorf("%w: %s", transport.ErrUnsupportedVersion, api)
}

// openPlanning opens a controller over four brokers (4 holding nothing)
// and topic orders of 6 partitions, replication factor 3, on 1 to 3.
func openPlanning(t *testing.T, f *sizeBrokers) *Controller {
	t.Helper()
	dir := t.TempDir()
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 5}
	for id := int32(1); id <= 4; id++ {
		meta.PutBroker(metadata.Broker{ID: id, Addr: fmt.Sprintf("broker-%d", id), RootID: rootOf(id)})
	}
	_, err := meta.AddTopicOn("orders", 6, 3, []int32{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, metadata.NewStore(filepath.Join(dir, "metadata.json")).Save(meta))
	f.meta = meta
	self, _ := meta.Broker(1)
	c, err := Open(Config{Dir: dir, Self: self, Logger: hclog.NewNullLogger(), Pool: f,
		Apply: func(*metadata.Cluster) error { return nil }, Push: func(context.Context, *metadata.Cluster) {}})
	require.NoError(t, err)
	return c
}

// The controller plans with the sizes the brokers report, the leader's
// replica's over a follower's, onto the brokers that answer.
func TestPlanMovesAsksTheBrokers(t *testing.T) {
	f := &sizeBrokers{size: func(_ string, p int32, b int32) int64 { return int64(p+1)<<30 + int64(b) }}
	c := openPlanning(t, f)
	ctx := context.Background()

	p, err := c.PlanMoves(ctx, transport.PlanRequest{Kind: transport.PlanRebalance})
	require.NoError(t, err)
	require.NotEmpty(t, p.Partitions)
	for _, m := range p.Partitions {
		lead := m.From[0]
		added := 0
		for _, id := range m.Replicas {
			if id == 4 {
				added++
			}
		}
		assert.Equal(t, int64(added)*(int64(m.Partition+1)<<30+int64(lead)), m.Bytes, "orders/%d: the leader's size", m.Partition)
	}
	lo, hi, total := 18, 0, 0
	for _, b := range p.Summary.Brokers {
		lo, hi, total = min(lo, b.ReplicasAfter), max(hi, b.ReplicasAfter), total+b.ReplicasAfter
	}
	assert.Equal(t, 18, total)
	assert.LessOrEqual(t, hi-lo, 1, "%+v", p.Summary.Brokers)
	assert.Equal(t, transport.ReplicaSizesRequest{}, f.asked[2])

	// Broker 4 does not answer: nothing goes to it, and a note says so.
	f.silent = map[int32]bool{4: true}
	p, err = c.PlanMoves(ctx, transport.PlanRequest{Kind: transport.PlanRebalance, Topics: []string{"orders"}})
	require.NoError(t, err)
	assert.Empty(t, p.Partitions)
	require.NotEmpty(t, p.Summary.Notes)
	assert.Contains(t, p.Summary.Notes[0], "broker 4 does not answer")
	assert.Equal(t, transport.ReplicaSizesRequest{Topics: []string{"orders"}}, f.asked[2])

	// Decommission: broker 3's replicas go to 4, which answers again.
	f.silent = nil
	p, err = c.PlanMoves(ctx, transport.PlanRequest{Kind: transport.PlanDecommission, Broker: 3})
	require.NoError(t, err)
	require.Len(t, p.Partitions, 6)
	for _, m := range p.Partitions {
		assert.NotContains(t, m.Replicas, int32(3))
		assert.Contains(t, m.Replicas, int32(4))
	}
	f.silent = map[int32]bool{4: true}
	_, err = c.PlanMoves(ctx, transport.PlanRequest{Kind: transport.PlanDecommission, Broker: 3})
	require.ErrorIs(t, err, plan.ErrNotEnoughBrokers)
	assert.Contains(t, err.Error(), "orders/0 (3 replicas)")
}

func TestPlanMovesRefusesBadRequests(t *testing.T) {
	c := openPlanning(t, &sizeBrokers{size: func(string, int32, int32) int64 { return 0 }})
	ctx := context.Background()
	for name, tt := range map[string]struct {
		req  transport.PlanRequest
		want error
	}{
		"no kind":                    {transport.PlanRequest{}, ErrInvalidRequest},
		"another kind":               {transport.PlanRequest{Kind: "shuffle"}, ErrInvalidRequest},
		"rebalance names a broker":   {transport.PlanRequest{Kind: transport.PlanRebalance, Broker: 2}, ErrInvalidRequest},
		"decommission of no broker":  {transport.PlanRequest{Kind: transport.PlanDecommission}, ErrInvalidRequest},
		"decommission with topics":   {transport.PlanRequest{Kind: transport.PlanDecommission, Broker: 2, Topics: []string{"orders"}}, ErrInvalidRequest},
		"unknown topic":              {transport.PlanRequest{Kind: transport.PlanRebalance, Topics: []string{"nope"}}, metadata.ErrUnknownTopic},
		"decommission of an unknown": {transport.PlanRequest{Kind: transport.PlanDecommission, Broker: 9}, plan.ErrUnknownBroker},
	} {
		_, err := c.PlanMoves(ctx, tt.req)
		assert.ErrorIs(t, err, tt.want, name)
	}
}
