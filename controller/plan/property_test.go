package plan_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gostream/controller/plan"
	"gostream/metadata"
	"gostream/transport"
)

// randomCluster is a cluster of 1 to 9 brokers, some in racks, with
// topics whose replicas lie anywhere (as moves and failures leave them),
// some partitions being moved, and random sizes.
func randomCluster(r *rand.Rand) (*metadata.Cluster, map[plan.Key]int64) {
	n := 1 + r.IntN(9)
	racks := []string{"", "a", "b", "c"}[:1+r.IntN(4)]
	c := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c", ControllerID: 1}
	for id := 1; id <= n; id++ {
		c.PutBroker(metadata.Broker{ID: int32(id), Addr: fmt.Sprintf("h:%d", id), Rack: racks[r.IntN(len(racks))]})
	}
	ids := c.BrokerIDs()
	sizes := map[plan.Key]int64{}
	for ti := range 1 + r.IntN(4) {
		rf := 1 + r.IntN(min(n, 4))
		t := metadata.Topic{Name: fmt.Sprintf("t%d", ti), ID: metadata.NewID(), ReplicationFactor: rf}
		// Some topics crowd a few brokers, as those created before the
		// others joined.
		pool := ids[:rf+r.IntN(n-rf+1)]
		for p := range 1 + r.IntN(40) {
			list := slices.Clone(pool)
			r.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
			list = list[:rf]
			part := metadata.Partition{Replicas: list, Active: slices.Clone(list), Leader: list[0]}
			if r.IntN(10) == 0 {
				target := slices.Clone(ids)
				r.Shuffle(len(target), func(i, j int) { target[i], target[j] = target[j], target[i] })
				part.Move = &metadata.Move{Target: target[:rf], From: list, Throttle: 1}
				part.Replicas = metadata.MoveReplicas(list, target[:rf])
			}
			t.Partitions = append(t.Partitions, part)
			sizes[plan.Key{Topic: t.Name, Partition: int32(p)}] = r.Int64N(4 << 30)
		}
		c.Topics = append(c.Topics, t)
	}
	return c, sizes
}

// rackCount is the racks a list covers; a broker without one is its own.
func rackCount(c *metadata.Cluster, list []int32) int {
	seen := map[string]bool{}
	for _, id := range list {
		b, _ := c.Broker(id)
		k := b.Rack
		if k == "" {
			k = fmt.Sprint("broker-", id)
		}
		seen[k] = true
	}
	return len(seen)
}

// checkPlan checks what every plan promises (package documentation).
// A rebalance never leaves a partition in fewer racks; a decommission
// may, when the brokers left are not in the racks needed (checked in
// TestDecommissionProperties).
func checkPlan(t *testing.T, c *metadata.Cluster, in plan.Input, mp transport.MovePlan) {
	checkPlanRacks(t, c, in, mp, true)
}

func checkPlanRacks(t *testing.T, c *metadata.Cluster, in plan.Input, mp transport.MovePlan, racks bool) {
	t.Helper()
	require.Equal(t, transport.MovePlanVersion, mp.Version)
	require.NotNil(t, mp.Summary)
	seen := map[string]bool{}
	newReplicas := 0
	for _, m := range mp.Partitions {
		where := fmt.Sprintf("%s/%d", m.Topic, m.Partition)
		require.False(t, seen[where], "%s planned twice", where)
		seen[where] = true
		tp := c.Topic(m.Topic)
		require.NotNil(t, tp, where)
		p := tp.Partitions[m.Partition]
		require.Nil(t, p.Move, "%s is being moved and was planned", where)
		require.Equal(t, p.Replicas, m.From, where)
		require.Len(t, m.Replicas, len(p.Replicas), "%s: replica count not kept", where)
		require.False(t, slices.Equal(m.From, m.Replicas), "%s: planned without a change", where)
		for i, id := range m.Replicas {
			_, ok := c.Broker(id)
			require.True(t, ok, "%s: broker %d not registered", where, id)
			require.NotContains(t, m.Replicas[:i], id, "%s: broker %d twice", where, id)
			if !slices.Contains(m.From, id) {
				newReplicas++
				if in.Targets != nil {
					require.Contains(t, in.Targets, id, "%s: moved onto broker %d, not a target", where, id)
				}
			}
		}
		if racks {
			require.GreaterOrEqual(t, rackCount(c, m.Replicas), rackCount(c, m.From), "%s: %v covers fewer racks than %v", where, m.Replicas, m.From)
		}
	}
	require.Equal(t, len(mp.Partitions), mp.Summary.Moves)
	require.Equal(t, newReplicas, mp.Summary.NewReplicas)
}

// Over random clusters, every plan is valid, applying a rebalance keeps
// or improves the spread of replicas and of preferred leaders over the
// brokers (as far as the goals before them let it), and the cluster it
// leaves is balanced: planning it again plans nothing.
func TestRebalanceProperties(t *testing.T) {
	seed := testSeed()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 300 {
		c, sizes := randomCluster(r)
		require.NoError(t, c.Validate(), "case %d", i)
		in := plan.Input{Cluster: c, Sizes: sizes}
		if r.IntN(3) == 0 && len(c.Brokers) > 1 {
			in.Targets = c.BrokerIDs()[1:]
		}
		mp, err := plan.Rebalance(in)
		require.NoError(t, err, "case %d", i)
		checkPlan(t, c, in, mp)

		spreads := func(loads []transport.BrokerLoad) (before, after, lBefore, lAfter int) {
			var rb, ra, lb, la []int
			for _, b := range loads {
				if in.Targets == nil || slices.Contains(in.Targets, b.Broker) {
					rb, ra, lb, la = append(rb, b.Replicas), append(ra, b.ReplicasAfter), append(lb, b.Leaders), append(la, b.LeadersAfter)
				}
			}
			return slices.Max(rb) - slices.Min(rb), slices.Max(ra) - slices.Min(ra), slices.Max(lb) - slices.Min(lb), slices.Max(la) - slices.Min(la)
		}
		// Racks come first: a replica moved into another rack may leave
		// the counts less even than they were. Replica counts come before
		// leaders: a replica moved to even them out may carry a leadership
		// that no reordering can even out again; bytes come after, and
		// their moves keep the leaders as even.
		moved := func(reason string) bool {
			return slices.ContainsFunc(mp.Partitions, func(m transport.PlannedMove) bool { return strings.Contains(m.Reason, reason) })
		}
		rb, ra, lb, la := spreads(mp.Summary.Brokers)
		if !moved("rack spread") {
			require.LessOrEqual(t, ra, rb, "case %d: replicas spread %d, was %d", i, ra, rb)
			if !moved("replicas per broker") {
				require.LessOrEqual(t, la, max(lb, 1), "case %d: leaders spread %d, was %d", i, la, lb)
			}
		}

		after := apply(t, c, mp)
		again, err := plan.Rebalance(plan.Input{Cluster: after, Sizes: sizes, Targets: in.Targets})
		require.NoError(t, err)
		checkPlan(t, after, in, again)
		require.Empty(t, again.Partitions, "case %d: a rebalanced cluster is planned again", i)
	}
}

func TestDecommissionProperties(t *testing.T) {
	seed := testSeed()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range 300 {
		c, sizes := randomCluster(r)
		gone := int32(1 + r.IntN(len(c.Brokers)))
		in := plan.Input{Cluster: c, Sizes: sizes}
		mp, err := plan.Decommission(in, gone)
		// Refused exactly when a partition that holds the broker, not
		// being moved, has as many replicas as the brokers left.
		short := false
		for _, tp := range c.Topics {
			for _, p := range tp.Partitions {
				if p.Move == nil && slices.Contains(p.Replicas, gone) && len(p.Replicas) > len(c.Brokers)-1 {
					short = true
				}
			}
		}
		if short {
			require.ErrorIs(t, err, plan.ErrNotEnoughBrokers, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		checkPlanRacks(t, c, in, mp, false)
		after := apply(t, c, mp)
		for _, tp := range after.Topics {
			for p, part := range tp.Partitions {
				if part.Move == nil {
					require.NotContains(t, part.Replicas, gone, "case %d: %s/%d keeps broker %d", i, tp.Name, p, gone)
				}
			}
		}
		for _, m := range mp.Partitions {
			// The broker added is in a rack the others are not in, when
			// a broker left has one.
			others := slices.DeleteFunc(slices.Clone(m.From), func(id int32) bool { return id == gone })
			var added int32
			for _, id := range m.Replicas {
				if !slices.Contains(m.From, id) {
					added = id
				}
			}
			newRack := func(id int32) bool { return rackCount(c, append(slices.Clone(others), id)) > rackCount(c, others) }
			if slices.ContainsFunc(c.BrokerIDs(), func(id int32) bool { return id != gone && !slices.Contains(others, id) && newRack(id) }) {
				require.True(t, newRack(added), "case %d: %s/%d: broker %d added in a rack %v has, and another was free", i, m.Topic, m.Partition, added, others)
			}
			if m.From[0] != gone {
				require.Equal(t, m.From[0], m.Replicas[0], "case %d: %s/%d: the leader changed", i, m.Topic, m.Partition)
			} else if len(m.From) > 1 {
				require.Contains(t, m.From, m.Replicas[0], "case %d: %s/%d: a new replica leads", i, m.Topic, m.Partition)
			}
		}
	}
}

// testSeed is $PLAN_SEED, to run a failure again, or else the time.
func testSeed() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("PLAN_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
}
