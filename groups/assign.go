package groups

import (
	"slices"
	"sort"
)

// RangeAssign assigns partitions to members by the range strategy, topic
// by topic: the members subscribed to a topic, sorted by member id, take
// its partitions in contiguous ranges, n/m each, the first n mod m one
// more. subscriptions maps a member id to its topics; partitions maps a
// topic to its partition count (a topic it does not name is skipped). The
// result names every member, with its partitions sorted by topic and
// partition.
func RangeAssign(subscriptions map[string][]string, partitions map[string]int32) map[string][]TopicPartition {
	out := make(map[string][]TopicPartition, len(subscriptions))
	byTopic := map[string][]string{}
	for m, topics := range subscriptions {
		out[m] = nil
		for _, t := range topics {
			if !slices.Contains(byTopic[t], m) {
				byTopic[t] = append(byTopic[t], m)
			}
		}
	}
	for t, members := range byTopic {
		n, ok := partitions[t]
		if !ok || n <= 0 {
			continue
		}
		sort.Strings(members)
		m := int32(len(members))
		per, extra := n/m, n%m
		next := int32(0)
		for i, member := range members {
			take := per
			if int32(i) < extra {
				take++
			}
			for p := next; p < next+take; p++ {
				out[member] = append(out[member], TopicPartition{Topic: t, Partition: p})
			}
			next += take
		}
	}
	for m := range out {
		sortPartitions(out[m])
	}
	return out
}

// Reconcile is one member's next step towards a target assignment, given
// who owns which partitions now (owners; a partition not in it is owned by
// nobody): assigned is what the member may own now, its target minus
// every partition another member still owns; revoke is what it owns and
// must release, its owned partitions outside its target. A partition moves
// only once its old owner has released it (or has been removed), so it
// never has two owners, and a partition whose owner keeps it in its
// target is never touched.
func Reconcile(target map[string][]TopicPartition, owners map[TopicPartition]string, member string) (assigned, revoke []TopicPartition) {
	mine := target[member]
	for _, tp := range mine {
		if o, owned := owners[tp]; !owned || o == member {
			assigned = append(assigned, tp)
		}
	}
	for tp, o := range owners {
		if o == member && !slices.Contains(mine, tp) {
			revoke = append(revoke, tp)
		}
	}
	sortPartitions(assigned)
	sortPartitions(revoke)
	return assigned, revoke
}

func sortPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}
