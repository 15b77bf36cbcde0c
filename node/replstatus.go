package node

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"gostream/transport"
)

// replicationCollector reports, at scrape time, the lag of every follower
// of the partitions this node leads and how many of them are
// under-replicated.
type replicationCollector struct {
	b               *broker
	lag             *prometheus.Desc
	underReplicated *prometheus.Desc
}

func newReplicationCollector(b *broker) *replicationCollector {
	return &replicationCollector{
		b: b,
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
	for _, ps := range c.b.partitionStatuses() {
		if ps.Leader != c.b.id {
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

// partitionStatuses snapshots every hosted replica for status and metrics.
func (b *broker) partitionStatuses() []transport.PartitionStatus {
	meta := b.metadata()
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]transport.PartitionStatus, 0, len(b.mu.replicas))
	for tp, r := range b.mu.replicas {
		s := r.part.State()
		start, hw, end := r.part.Offsets()
		ps := transport.PartitionStatus{
			Topic: tp.topic, Partition: tp.partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
			Active: s.Active, HighWatermark: hw, LogStartOffset: start, LogEndOffset: end,
			SizeBytes: r.log.Size(), FencedEpoch: r.part.FencedEpoch(),
		}
		if err := r.part.Problem(); err != nil {
			ps.Problem = err.Error()
		}
		if meta != nil {
			if t := meta.Topic(tp.topic); t != nil {
				ps.Sealed = t.Sealed
				ps.Replicas = t.Partitions[tp.partition].Replicas
			}
		}
		if s.Leader == b.id {
			ps.Followers = r.part.Followers()
			for _, f := range ps.Followers {
				if f.State != transport.FollowerInSync {
					ps.UnderReplicated = true
				}
			}
			if len(ps.Active) < len(ps.Replicas) {
				ps.UnderReplicated = true
			}
		}
		out = append(out, ps)
	}
	for tp, err := range b.mu.offline {
		out = append(out, transport.PartitionStatus{Topic: tp.topic, Partition: tp.partition, Leader: -1, Offline: err.Error()})
	}
	slices.SortFunc(out, func(a, b transport.PartitionStatus) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
