package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

func planCluster(t *testing.T) *metadata.Cluster {
	t.Helper()
	m := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c", ControllerID: 1}
	for id := int32(1); id <= 4; id++ {
		m.PutBroker(metadata.Broker{ID: id, Addr: "h:1"})
	}
	_, err := m.AddTopicOn("t", 2, 3, []int32{1, 2, 3})
	require.NoError(t, err)
	return m
}

// A plan is checked whole: every wrong partition is named, and none
// moves.
func TestCheckPlanRefusesWhole(t *testing.T) {
	m := planCluster(t)
	ok := transport.PlannedMove{Topic: "t", Partition: 0, Replicas: []int32{4, 2, 3}}
	starts, err := checkPlan(m, transport.MovePlan{Version: 1, Partitions: []transport.PlannedMove{ok}})
	require.NoError(t, err)
	require.Len(t, starts, 1)
	assert.Equal(t, []int32{4, 2, 3}, starts[0].target)

	for _, tc := range []struct {
		name string
		pm   transport.PlannedMove
		is   error
		want string
	}{
		{"unknown topic", transport.PlannedMove{Topic: "x", Replicas: []int32{1}}, metadata.ErrUnknownTopic, `"x"`},
		{"unknown partition", transport.PlannedMove{Topic: "t", Partition: 5, Replicas: []int32{1}}, ErrUnknownPartition, "no partition 5"},
		{"unknown broker", transport.PlannedMove{Topic: "t", Partition: 1, Replicas: []int32{1, 9}}, ErrUnknownBroker, "names broker 9"},
		{"twice", transport.PlannedMove{Topic: "t", Partition: 1, Replicas: []int32{2, 2}}, ErrInvalidRequest, "names broker 2 twice"},
		{"none", transport.PlannedMove{Topic: "t", Partition: 1}, ErrInvalidReplication, "at least one replica"},
		{"too many", transport.PlannedMove{Topic: "t", Partition: 1, Replicas: []int32{1, 2, 3, 4, 5}}, ErrInvalidReplication, "the cluster has 4 brokers"},
		{"named twice", ok, ErrInvalidRequest, "named twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkPlan(m, transport.MovePlan{Partitions: []transport.PlannedMove{ok, tc.pm}})
			require.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "nothing moved")
		})
	}
	_, err = checkPlan(m, transport.MovePlan{Version: 2, Partitions: []transport.PlannedMove{ok}})
	require.ErrorIs(t, err, ErrInvalidRequest)
	_, err = checkPlan(m, transport.MovePlan{})
	require.ErrorIs(t, err, ErrInvalidRequest)

	m.Topics[0].Partitions[0].Move = &metadata.Move{Target: []int32{4, 2, 3}, From: []int32{1, 2, 3}, Throttle: 1}
	_, err = checkPlan(m, transport.MovePlan{Partitions: []transport.PlannedMove{ok}})
	require.ErrorIs(t, err, ErrInvalidRequest)
	assert.Contains(t, err.Error(), "already moving")
}

// A move's next step: copy each replica of the target not active, then
// lead from the target's first, then finish.
func TestNextMoveStep(t *testing.T) {
	p := metadata.Partition{Replicas: []int32{4, 2, 3, 1}, Active: []int32{1, 2, 3}, Leader: 1,
		Move: &metadata.Move{Target: []int32{4, 2, 3}, From: []int32{1, 2, 3}, Throttle: 1}}
	step, b := nextMoveStep(p)
	assert.Equal(t, stepCopy, step)
	assert.Equal(t, int32(4), b)
	p.Active = []int32{1, 2, 3, 4}
	step, b = nextMoveStep(p)
	assert.Equal(t, stepLead, step)
	assert.Equal(t, int32(4), b)
	p.Leader = 4
	step, _ = nextMoveStep(p)
	assert.Equal(t, stepFinish, step)
	p.Active = []int32{1, 3, 4} // 2 dropped meanwhile: copied again
	step, b = nextMoveStep(p)
	assert.Equal(t, stepCopy, step)
	assert.Equal(t, int32(2), b)
}

func TestSettleReplicationFactor(t *testing.T) {
	tp := &metadata.Topic{ReplicationFactor: 3, Partitions: []metadata.Partition{{Replicas: []int32{1, 2}}, {Replicas: []int32{2, 3, 1}}}}
	settleReplicationFactor(tp)
	assert.Equal(t, 3, tp.ReplicationFactor, "mixed counts: unchanged")
	tp.Partitions[1].Replicas = []int32{2, 3}
	settleReplicationFactor(tp)
	assert.Equal(t, 2, tp.ReplicationFactor)
}
