package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"gostream/broker"
)

// replicationCollector reports, at scrape time, the lag of every follower
// of the partitions this node leads and how many of them are
// under-replicated.
type replicationCollector struct {
	id              int32
	b               *broker.Replicas
	lag             *prometheus.Desc
	underReplicated *prometheus.Desc
}

func newReplicationCollector(id int32, b *broker.Replicas) *replicationCollector {
	return &replicationCollector{
		id: id,
		b:  b,
		lag: prometheus.NewDesc("gostream_follower_lag_records",
			"Records a follower lacks behind its leader's log end (leaders only; absent while unknown).",
			[]string{"topic", "partition", "follower"}, nil),
		underReplicated: prometheus.NewDesc("gostream_under_replicated_partitions",
			"Partitions led here whose active set is smaller than their replicas, or with a follower not in sync.", nil, nil),
	}
}

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.underReplicated
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	under := 0
	for _, ps := range c.b.PartitionStatuses() {
		if ps.Leader != c.id {
			continue
		}
		if ps.UnderReplicated {
			under++
		}
		for _, f := range ps.Followers {
			if f.LogEndOffset < 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(ps.LogEndOffset-f.LogEndOffset),
				ps.Topic, itoa(ps.Partition), itoa(f.Broker))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(under))
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
