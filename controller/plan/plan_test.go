package plan_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/controller/plan"
	"gostream/metadata"
	"gostream/transport"
)

// cluster returns a cluster of brokers with the racks given (racks[i] is
// broker i+1's; "" for none).
func cluster(racks ...string) *metadata.Cluster {
	c := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c", ControllerID: 1}
	for i, r := range racks {
		c.PutBroker(metadata.Broker{ID: int32(i + 1), Addr: fmt.Sprintf("host:%d", i+1), Rack: r})
	}
	return c
}

// withTopic adds a topic whose partitions have the replica lists given.
func withTopic(c *metadata.Cluster, name string, lists ...[]int32) *metadata.Cluster {
	t := metadata.Topic{Name: name, ID: metadata.NewID(), ReplicationFactor: len(lists[0])}
	for _, l := range lists {
		t.Partitions = append(t.Partitions, metadata.Partition{Replicas: l, Active: slices.Clone(l), Leader: l[0]})
	}
	c.Topics = append(c.Topics, t)
	slices.SortFunc(c.Topics, func(a, b metadata.Topic) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return c
}

// sizes gives every partition of c size bytes.
func sizes(c *metadata.Cluster, size int64) map[plan.Key]int64 {
	out := map[plan.Key]int64{}
	for _, t := range c.Topics {
		for p := range t.Partitions {
			out[plan.Key{Topic: t.Name, Partition: int32(p)}] = size
		}
	}
	return out
}

// apply is c with the plan's lists.
func apply(t *testing.T, c *metadata.Cluster, mp transport.MovePlan) *metadata.Cluster {
	t.Helper()
	n := c.Clone()
	for _, m := range mp.Partitions {
		tp := n.Topic(m.Topic)
		require.NotNil(t, tp, m.Topic)
		p := &tp.Partitions[m.Partition]
		require.Equal(t, p.Replicas, m.From, "%s/%d: from is the list now", m.Topic, m.Partition)
		p.Replicas, p.Active, p.Leader = slices.Clone(m.Replicas), slices.Clone(m.Replicas), m.Replicas[0]
	}
	require.NoError(t, n.Validate())
	return n
}

// loads counts replicas and preferred leaders per broker.
func loads(c *metadata.Cluster) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, b := range c.Brokers {
		replicas[b.ID], leaders[b.ID] = 0, 0
	}
	for _, t := range c.Topics {
		for _, p := range t.Partitions {
			for r, id := range p.Replicas {
				replicas[id]++
				if r == 0 {
					leaders[id]++
				}
			}
		}
	}
	return replicas, leaders
}

func spread(m map[int32]int) int {
	lo, hi := -1, -1
	for _, v := range m {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return hi - lo
}

func TestRebalanceOfABalancedClusterIsEmpty(t *testing.T) {
	c := cluster("", "", "")
	_, err := c.AddTopic("orders", 6, 3)
	require.NoError(t, err)
	_, err = c.AddTopic("events", 3, 2)
	require.NoError(t, err)
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1<<30)})
	require.NoError(t, err)
	assert.Empty(t, mp.Partitions)
	assert.NotNil(t, mp.Partitions, "an empty plan lists [] in JSON")
	require.NotNil(t, mp.Summary)
	assert.Zero(t, mp.Summary.Moves)
	assert.Zero(t, mp.Summary.BytesToCopy)
	assert.Equal(t, transport.MovePlanVersion, mp.Version)
	for _, b := range mp.Summary.Brokers {
		assert.Equal(t, b.Replicas, b.ReplicasAfter)
		assert.Equal(t, b.Leaders, b.LeadersAfter)
	}
}

// A fourth broker joins a cluster of three: a quarter of the replicas
// move onto it, nothing else moves but lists reordered for leaders, and
// replicas and leaders come out even.
func TestRebalanceOntoANewBroker(t *testing.T) {
	c := cluster("", "", "")
	_, err := c.AddTopic("orders", 12, 3)
	require.NoError(t, err)
	c.PutBroker(metadata.Broker{ID: 4, Addr: "host:4"})
	in := plan.Input{Cluster: c, Sizes: sizes(c, 100<<20)}
	mp, err := plan.Rebalance(in)
	require.NoError(t, err)

	assert.Equal(t, 9, mp.Summary.NewReplicas, "a quarter of the 36 replicas")
	assert.Equal(t, int64(9*100<<20), mp.Summary.BytesToCopy)
	for _, m := range mp.Partitions {
		added := 0
		for _, id := range m.Replicas {
			if !slices.Contains(m.From, id) {
				added++
				assert.Equal(t, int32(4), id, "%s/%d: only broker 4 gets replicas", m.Topic, m.Partition)
			}
		}
		assert.Equal(t, int64(added)*(100<<20), m.Bytes)
		assert.NotEmpty(t, m.Reason)
	}
	after := apply(t, c, mp)
	replicas, leaders := loads(after)
	assert.Equal(t, map[int32]int{1: 9, 2: 9, 3: 9, 4: 9}, replicas)
	assert.Equal(t, map[int32]int{1: 3, 2: 3, 3: 3, 4: 3}, leaders)
	for _, b := range mp.Summary.Brokers {
		assert.Equal(t, replicas[b.Broker], b.ReplicasAfter)
		assert.Equal(t, leaders[b.Broker], b.LeadersAfter)
	}

	again, err := plan.Rebalance(plan.Input{Cluster: after, Sizes: in.Sizes})
	require.NoError(t, err)
	assert.Empty(t, again.Partitions, "the plan's result is balanced")
}

// A partition with both replicas in rack a while rack b has brokers gets
// one moved there, a follower rather than the leader.
func TestRebalanceSpreadsRacks(t *testing.T) {
	c := withTopic(cluster("a", "a", "b", "b"), "orders",
		[]int32{1, 2}, []int32{3, 4}, []int32{1, 3}, []int32{4, 2})
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1)})
	require.NoError(t, err)
	after := apply(t, c, mp)
	rackOf := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}
	for p, part := range after.Topic("orders").Partitions {
		assert.NotEqual(t, rackOf[part.Replicas[0]], rackOf[part.Replicas[1]], "orders/%d %v in one rack", p, part.Replicas)
	}
	assert.Contains(t, after.Topic("orders").Partitions[0].Replicas, int32(1), "the follower moved, not the leader")
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, mp.Summary.Racks)
	assert.Contains(t, mp.Partitions[0].Reason, "rack spread")
	replicas, _ := loads(after)
	assert.LessOrEqual(t, spread(replicas), 1)
}

// Every list led by broker 1: reordering evens the leaders out and
// copies nothing.
func TestRebalanceEvensLeadersByReordering(t *testing.T) {
	var lists [][]int32
	for range 6 {
		lists = append(lists, []int32{1, 2, 3})
	}
	c := withTopic(cluster("", "", ""), "orders", lists...)
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1<<30)})
	require.NoError(t, err)
	assert.Zero(t, mp.Summary.NewReplicas)
	assert.Zero(t, mp.Summary.BytesToCopy)
	assert.Equal(t, 4, mp.Summary.Moves, "two lists each for brokers 2 and 3")
	_, leaders := loads(apply(t, c, mp))
	assert.Equal(t, map[int32]int{1: 2, 2: 2, 3: 2}, leaders)
	for _, m := range mp.Partitions {
		assert.ElementsMatch(t, m.From, m.Replicas)
		assert.Equal(t, "preferred leaders per broker", m.Reason)
	}
}

// Replica counts even, bytes not: broker 1 holds the two large
// partitions; one of them swaps places with a small one of broker 2's.
func TestRebalanceEvensBytes(t *testing.T) {
	c := withTopic(cluster("", ""), "orders", []int32{1}, []int32{1}, []int32{2}, []int32{2})
	sz := map[plan.Key]int64{{"orders", 0}: 10 << 30, {"orders", 1}: 10 << 30, {"orders", 2}: 1 << 30, {"orders", 3}: 1 << 30}
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sz})
	require.NoError(t, err)
	require.Equal(t, 2, mp.Summary.Moves, "one swap")
	assert.Equal(t, int64(11<<30), mp.Summary.BytesToCopy)
	for _, b := range mp.Summary.Brokers {
		assert.Equal(t, int64(11<<30), b.BytesAfter, "broker %d", b.Broker)
		assert.Equal(t, 2, b.ReplicasAfter, "broker %d", b.Broker)
	}

	// Below MinByteSpread, bytes are not worth a move.
	small := map[plan.Key]int64{{"orders", 0}: 10 << 20, {"orders", 1}: 10 << 20, {"orders", 2}: 1 << 20, {"orders", 3}: 1 << 20}
	mp, err = plan.Rebalance(plan.Input{Cluster: c, Sizes: small})
	require.NoError(t, err)
	assert.Empty(t, mp.Partitions)
}

// Of the replicas that could move to even out the counts, those with the
// fewest bytes do.
func TestRebalancePrefersFewerBytes(t *testing.T) {
	c := withTopic(cluster("", ""), "orders", []int32{1}, []int32{1}, []int32{1}, []int32{1})
	// Small enough that bytes, which differ by less than MinByteSpread
	// once the counts are even, move nothing more.
	sz := map[plan.Key]int64{{"orders", 0}: 30 << 20, {"orders", 1}: 5 << 20, {"orders", 2}: 20 << 20, {"orders", 3}: 4 << 20}
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sz})
	require.NoError(t, err)
	var moved []int32
	for _, m := range mp.Partitions {
		moved = append(moved, m.Partition)
	}
	assert.ElementsMatch(t, []int32{1, 3}, moved)
}

func TestRebalanceLeavesMovingPartitionsAlone(t *testing.T) {
	c := withTopic(cluster("", "", ""), "orders", []int32{1, 2}, []int32{1, 2}, []int32{1, 2})
	p := &c.Topic("orders").Partitions[1]
	p.Move = &metadata.Move{Target: []int32{3, 2}, From: []int32{1, 2}, Throttle: 1}
	p.Replicas = metadata.MoveReplicas(p.Move.From, p.Move.Target)
	require.NoError(t, c.Validate())
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1)})
	require.NoError(t, err)
	for _, m := range mp.Partitions {
		assert.NotEqual(t, int32(1), m.Partition, "a moving partition is planned")
	}
	require.NotEmpty(t, mp.Summary.Notes)
	assert.Contains(t, mp.Summary.Notes[0], "orders/1")
	assert.Contains(t, mp.Summary.Notes[0], "being moved")
}

func TestRebalanceTopicsAndTargets(t *testing.T) {
	c := cluster("", "", "")
	_, err := c.AddTopic("a", 6, 2)
	require.NoError(t, err)
	_, err = c.AddTopic("b", 6, 2)
	require.NoError(t, err)
	c.PutBroker(metadata.Broker{ID: 4, Addr: "host:4"})

	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1), Topics: []string{"b"}})
	require.NoError(t, err)
	require.NotEmpty(t, mp.Partitions)
	for _, m := range mp.Partitions {
		assert.Equal(t, "b", m.Topic)
	}

	// Broker 4 does not answer: nothing moves onto it, and the rest is
	// balanced already.
	mp, err = plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes(c, 1), Targets: []int32{1, 2, 3}})
	require.NoError(t, err)
	assert.Empty(t, mp.Partitions)

	_, err = plan.Rebalance(plan.Input{Cluster: c, Topics: []string{"nope"}})
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
	assert.Contains(t, err.Error(), `"nope"`)
}

func TestDecommission(t *testing.T) {
	c := cluster("", "", "", "")
	_, err := c.AddTopic("orders", 12, 3)
	require.NoError(t, err)
	_, err = c.AddTopic("logs", 4, 1)
	require.NoError(t, err)
	_, leadersBefore := loads(c)
	mp, err := plan.Decommission(plan.Input{Cluster: c, Sizes: sizes(c, 1<<20)}, 4)
	require.NoError(t, err)

	after := apply(t, c, mp)
	replicas, leaders := loads(after)
	assert.Zero(t, replicas[4], "broker 4 keeps nothing")
	assert.Zero(t, leaders[4])
	assert.LessOrEqual(t, spread(map[int32]int{1: replicas[1], 2: replicas[2], 3: replicas[3]}), 1)
	for _, m := range mp.Partitions {
		require.Len(t, m.Replicas, len(m.From))
		assert.Contains(t, m.From, int32(4))
		assert.Contains(t, m.Reason, "decommission of broker 4")
		if m.From[0] == 4 && len(m.From) > 1 {
			assert.Contains(t, m.From, m.Replicas[0], "%s/%d: leadership goes to a replica that holds the log", m.Topic, m.Partition)
		} else if m.From[0] != 4 {
			assert.Equal(t, m.From[0], m.Replicas[0], "%s/%d: the leader stays", m.Topic, m.Partition)
		}
	}
	assert.Equal(t, 9+1, mp.Summary.Moves, "every partition on broker 4: 9 of orders, 1 of logs")
	assert.Equal(t, leadersBefore[4], mp.Summary.Brokers[3].Leaders)
	assert.Zero(t, mp.Summary.Brokers[3].ReplicasAfter)
}

func TestDecommissionKeepsRacks(t *testing.T) {
	c := withTopic(cluster("a", "a", "b", "b"), "orders", []int32{1, 3}, []int32{3, 1})
	mp, err := plan.Decommission(plan.Input{Cluster: c, Sizes: sizes(c, 1)}, 3)
	require.NoError(t, err)
	require.Len(t, mp.Partitions, 2)
	assert.Equal(t, []int32{1, 4}, mp.Partitions[0].Replicas, "broker 4, in rack b, rather than broker 2, in rack a with the leader")
	assert.Equal(t, []int32{1, 4}, mp.Partitions[1].Replicas, "broker 1 leads in broker 3's place")
}

func TestDecommissionRefuses(t *testing.T) {
	c := cluster("", "", "")
	_, err := c.AddTopic("orders", 3, 3)
	require.NoError(t, err)
	_, err = c.AddTopic("logs", 3, 2)
	require.NoError(t, err)

	_, err = plan.Decommission(plan.Input{Cluster: c}, 3)
	require.ErrorIs(t, err, plan.ErrNotEnoughBrokers)
	assert.Contains(t, err.Error(), "orders/0 (3 replicas), orders/1 (3 replicas), orders/2 (3 replicas)")
	assert.NotContains(t, err.Error(), "logs/")
	assert.Contains(t, err.Error(), "(1, 2)")

	// Broker 2 does not answer: RF 2 cannot be kept either.
	_, err = plan.Decommission(plan.Input{Cluster: c, Targets: []int32{1, 3}}, 3)
	require.ErrorIs(t, err, plan.ErrNotEnoughBrokers)
	assert.Contains(t, err.Error(), "logs/")

	_, err = plan.Decommission(plan.Input{Cluster: c}, 9)
	require.ErrorIs(t, err, plan.ErrUnknownBroker)
	assert.Contains(t, err.Error(), "broker 9")
}

func TestDecommissionOfAnEmptyBroker(t *testing.T) {
	c := cluster("", "", "")
	_, err := c.AddTopic("orders", 2, 1)
	require.NoError(t, err)
	mp, err := plan.Decommission(plan.Input{Cluster: c}, 3)
	require.NoError(t, err)
	assert.Empty(t, mp.Partitions)
	assert.Contains(t, mp.Summary.Notes, "broker 3 holds no replicas: nothing to move")
}
