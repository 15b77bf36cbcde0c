package broker

import (
	"slices"

	"gostream/transport"
)

// ReplicaSizes is every hosted replica of topics (all when empty) with the
// bytes of its log on disk, for the planners of rebalance and
// decommission (transport.APIReplicaSizes). Replicas that could not be
// opened are left out.
func (b *Replicas) ReplicaSizes(topics []string) []transport.ReplicaSize {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]transport.ReplicaSize, 0, len(b.mu.replicas))
	for tp, r := range b.mu.replicas {
		if len(topics) > 0 && !slices.Contains(topics, tp.topic) {
			continue
		}
		out = append(out, transport.ReplicaSize{Topic: tp.topic, TopicID: r.Part.TopicID, Partition: tp.partition,
			Bytes: r.Log.Size(), Leader: r.Part.State().Leader == b.id})
	}
	slices.SortFunc(out, func(x, y transport.ReplicaSize) int {
		if x.Topic != y.Topic {
			if x.Topic < y.Topic {
				return -1
			}
			return 1
		}
		return int(x.Partition - y.Partition)
	})
	return out
}
