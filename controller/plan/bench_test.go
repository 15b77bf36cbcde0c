package plan_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"gostream/controller/plan"
	"gostream/metadata"
)

// grownCluster is 2,000 partitions of three replicas (20 topics of 100),
// placed while the cluster had six brokers, over nine brokers in three
// racks: what `cluster rebalance` meets after a cluster grows by half.
func grownCluster(tb testing.TB) (*metadata.Cluster, map[plan.Key]int64) {
	c := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c", ControllerID: 1}
	for id := int32(1); id <= 6; id++ {
		c.PutBroker(metadata.Broker{ID: id, Addr: fmt.Sprint("h:", id), Rack: fmt.Sprint("rack-", (id-1)%3)})
	}
	r := rand.New(rand.NewPCG(1, 2))
	sizes := map[plan.Key]int64{}
	for i := range 20 {
		name := fmt.Sprintf("topic-%02d", i)
		_, err := c.AddTopic(name, 100, 3)
		require.NoError(tb, err)
		for p := range 100 {
			sizes[plan.Key{Topic: name, Partition: int32(p)}] = r.Int64N(2 << 30)
		}
	}
	for id := int32(7); id <= 9; id++ {
		c.PutBroker(metadata.Broker{ID: id, Addr: fmt.Sprint("h:", id), Rack: fmt.Sprint("rack-", (id-1)%3)})
	}
	return c, sizes
}

// BenchmarkRebalance plans 2,000 partitions over nine brokers, three of
// them new (docs/benchmarks.md: well under a second).
func BenchmarkRebalance(b *testing.B) {
	c, sizes := grownCluster(b)
	in := plan.Input{Cluster: c, Sizes: sizes}
	b.ReportAllocs()
	var moves int
	for b.Loop() {
		mp, err := plan.Rebalance(in)
		if err != nil {
			b.Fatal(err)
		}
		moves = mp.Summary.Moves
	}
	b.ReportMetric(float64(moves), "moves")
}

// BenchmarkDecommission plans moving a ninth of 2,000 partitions' replicas
// off one of nine brokers.
func BenchmarkDecommission(b *testing.B) {
	c, sizes := grownCluster(b)
	mp, err := plan.Rebalance(plan.Input{Cluster: c, Sizes: sizes})
	require.NoError(b, err)
	for _, m := range mp.Partitions {
		t := c.Topic(m.Topic)
		t.Partitions[m.Partition].Replicas = m.Replicas
	}
	in := plan.Input{Cluster: c, Sizes: sizes}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := plan.Decommission(in, 5); err != nil {
			b.Fatal(err)
		}
	}
}

// The benchmark's plan is the one the benchmark's figure is of: every
// broker ends within one replica, one leader and a tenth of the mean
// bytes of the others, racks intact, with no more replicas copied than
// the counts need.
func TestRebalanceGrownCluster(t *testing.T) {
	c, sizes := grownCluster(t)
	in := plan.Input{Cluster: c, Sizes: sizes}
	mp, err := plan.Rebalance(in)
	require.NoError(t, err)
	checkPlan(t, c, in, mp)
	replicas, leaders := loads(apply(t, c, mp))
	require.LessOrEqual(t, spread(replicas), 1, "%v", replicas)
	require.LessOrEqual(t, spread(leaders), 1, "%v", leaders)
	require.Equal(t, 1998, mp.Summary.NewReplicas, "a third of the replicas move to the three new brokers, and no more")
	var lo, hi, total int64 = 1 << 62, 0, 0
	for _, b := range mp.Summary.Brokers {
		lo, hi, total = min(lo, b.BytesAfter), max(hi, b.BytesAfter), total+b.BytesAfter
	}
	require.LessOrEqual(t, hi-lo, total/9/10, "bytes within a tenth of the mean of each other")
	t.Logf("%d moves, %d replicas, %.1f GiB to copy", mp.Summary.Moves, mp.Summary.NewReplicas, float64(mp.Summary.BytesToCopy)/(1<<30))
}
