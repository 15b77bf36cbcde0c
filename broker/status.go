package broker

import (
	"slices"

	"gostream/transport"
)

// PartitionStatuses snapshots every hosted replica for status and metrics.
func (b *Replicas) PartitionStatuses() []transport.PartitionStatus {
	meta := b.Metadata()
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]transport.PartitionStatus, 0, len(b.mu.replicas))
	for tp, r := range b.mu.replicas {
		s := r.Part.State()
		start, hw, end := r.Part.Offsets()
		ps := transport.PartitionStatus{
			Topic: tp.topic, Partition: tp.partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
			Active: s.Active, HighWatermark: hw, LogStartOffset: start, LogEndOffset: end,
			SizeBytes: r.Log.Size(), FencedEpoch: r.Part.FencedEpoch(),
		}
		if err := r.Part.Problem(); err != nil {
			ps.Problem = err.Error()
		}
		var adding []int32 // replicas a move is adding: not missing while copied
		if meta != nil {
			if t := meta.Topic(tp.topic); t != nil {
				ps.Sealed = t.Sealed
				ps.Replicas = t.Partitions[tp.partition].Replicas
				adding = t.Partitions[tp.partition].Adding()
			}
		}
		if s.Leader == b.id {
			ps.Followers = r.Part.Followers()
			for _, f := range ps.Followers {
				if f.State != transport.FollowerInSync {
					ps.UnderReplicated = true
				}
			}
			for _, id := range ps.Replicas {
				if !slices.Contains(ps.Active, id) && !slices.Contains(adding, id) {
					ps.UnderReplicated = true
				}
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
