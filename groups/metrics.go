package groups

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxLagSeries bounds the group lag series one node exports: past it, the
// rest are counted, not exported, so that a cluster with many groups
// cannot blow up a Prometheus server.
const MaxLagSeries = 1000

// lagFreshness is how old a high watermark the coordinator learned from
// another broker may be and still make a lag; an older one gives no
// series (unknown is not zero).
const lagFreshness = 30 * time.Second

// Collector exports the groups of the coordinators a host holds (on
// /metrics):
// their number by state, their members, and each committed partition's
// lag behind its high watermark.
type Collector struct {
	host                          *Host
	groups, members, lag, omitted *prometheus.Desc
}

func NewCollector(host *Host) *Collector {
	return &Collector{
		host: host,
		groups: prometheus.NewDesc("gostream_groups", "Consumer groups this node coordinates, by state (stable, rebalancing, empty).",
			[]string{"state"}, nil),
		members: prometheus.NewDesc("gostream_group_members", "Members of the consumer groups this node coordinates.", nil, nil),
		lag: prometheus.NewDesc("gostream_group_lag_records",
			"Records between a group's committed offset and the partition's high watermark (absent while the high watermark is unknown; at most 1000 series a node).",
			[]string{"group", "topic", "partition"}, nil),
		omitted: prometheus.NewDesc("gostream_group_lag_series_omitted", "Group lag series not exported because of the bound on their number.", nil, nil),
	}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.groups
	ch <- c.members
	ch <- c.lag
	ch <- c.omitted
}

type lagPoint struct {
	group     string
	tp        TopicPartition
	committed int64
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	byState := map[string]int{"stable": 0, "rebalancing": 0, "empty": 0}
	members := 0
	var points []lagPoint
	for _, coord := range c.host.Coordinators() {
		for _, g := range coord.Stats() {
			byState[g.State]++
			members += g.Members
			for tp, off := range g.Offsets {
				points = append(points, lagPoint{g.Name, tp, off})
			}
		}
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(members))
	slices.SortFunc(points, func(a, b lagPoint) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition))
	})
	omitted := max(len(points)-MaxLagSeries, 0)
	for _, p := range points[:len(points)-omitted] {
		hw, ok := c.host.RecentHighWatermark(p.tp.Topic, p.tp.Partition, lagFreshness)
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(hw-p.committed, 0)), p.group, p.tp.Topic, strconv.Itoa(int(p.tp.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(c.omitted, prometheus.GaugeValue, float64(omitted))
}
