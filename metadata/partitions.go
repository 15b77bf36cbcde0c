package metadata

import (
	"errors"
	"fmt"
	"slices"
)

// Growing a topic: the partitions added to it keep its replication
// factor, and their leaders continue its rotation (docs/reassignment.md,
// "More partitions").

// ErrInvalidAssignment means replica lists, given for the partitions a
// topic grows by, that cannot be used: too many or too few lists, a list
// of another length than the topic's replication factor, a broker named
// twice in one list, or one that is not registered.
var ErrInvalidAssignment = errors.New("metadata: invalid replica assignment")

// PlaceNewPartitions places the replicas of the partitions a topic grows
// by, from len(existing) partitions (existing holds each one's replicas,
// preferred leader first) to count, over brokers. Each new partition is
// led by the broker that is the preferred leader of the fewest of the
// topic's partitions so far (those already placed and the new ones before
// it), a tie going to the next broker in ascending id order after the
// preferred leader of the partition before it; its followers are the
// brokers after its leader in ascending id order, as Place puts them. A
// topic Place laid out over the same brokers thus grows exactly as if it
// had been created with count partitions, and one created while some
// broker was away gives that broker its share of the new leaders.
//
// It returns an error matching ErrInvalid for a count that does not grow
// the topic or passes MaxPartitions, or a replication factor below 1, and
// ErrNotEnoughBrokers when brokers are fewer than the replication factor.
func PlaceNewPartitions(brokers []int32, existing [][]int32, count, replicationFactor int) ([][]int32, error) {
	if count <= len(existing) || count > MaxPartitions {
		return nil, fmt.Errorf("%w: growing %d partitions to %d: want more than %d and at most %d", ErrInvalid, len(existing), count, len(existing), MaxPartitions)
	}
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d below 1", ErrInvalid, replicationFactor)
	}
	if replicationFactor > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d needs %d brokers, %d available", ErrNotEnoughBrokers, replicationFactor, replicationFactor, len(brokers))
	}
	ids := slices.Clone(brokers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if replicationFactor > len(ids) {
		return nil, fmt.Errorf("%w: replication factor %d needs %d brokers, %d available", ErrNotEnoughBrokers, replicationFactor, replicationFactor, len(ids))
	}
	leads := make(map[int32]int, len(ids))
	last := int32(0) // the preferred leader of the partition before; 0 is no broker
	for _, r := range existing {
		if len(r) > 0 {
			leads[r[0]]++
			last = r[0]
		}
	}
	out := make([][]int32, 0, count-len(existing))
	for range count - len(existing) {
		// The rotation goes on after last: the first broker above it.
		start, _ := slices.BinarySearch(ids, last+1)
		lead := -1
		for i := range ids {
			k := (start + i) % len(ids)
			if lead < 0 || leads[ids[k]] < leads[ids[lead]] {
				lead = k
			}
		}
		replicas := make([]int32, replicationFactor)
		for r := range replicas {
			replicas[r] = ids[(lead+r)%len(ids)]
		}
		out = append(out, replicas)
		leads[ids[lead]]++
		last = ids[lead]
	}
	return out, nil
}

// CheckAssignments checks replica lists given for the partitions a topic
// of from partitions grows by to reach count: one list per new partition,
// in order, each of replicationFactor distinct brokers registered in c.
// Its errors match ErrInvalidAssignment and name the partition whose list
// is wrong.
func (c *Cluster) CheckAssignments(assignments [][]int32, from, count, replicationFactor int) error {
	if want := count - from; len(assignments) != want {
		return fmt.Errorf("%w: growing from %d to %d partitions adds %d, and %d replica lists were given: give one per new partition, or none to have them placed",
			ErrInvalidAssignment, from, count, want, len(assignments))
	}
	for i, replicas := range assignments {
		p := from + i
		if len(replicas) != replicationFactor {
			return fmt.Errorf("%w: partition %d is given %d replicas %v; the topic's replication factor is %d", ErrInvalidAssignment, p, len(replicas), replicas, replicationFactor)
		}
		for j, b := range replicas {
			if slices.Contains(replicas[:j], b) {
				return fmt.Errorf("%w: partition %d lists broker %d twice in %v", ErrInvalidAssignment, p, b, replicas)
			}
			if _, ok := c.Broker(b); !ok {
				return fmt.Errorf("%w: partition %d names broker %d, which is not registered (brokers: %v)", ErrInvalidAssignment, p, b, c.BrokerIDs())
			}
		}
	}
	return nil
}

// AddPartitions appends partitions to the named topic, one per replica
// list (preferred leader first): each led by its first replica at leader
// epoch 0, every replica active, as AddTopic makes them. It checks the
// lists as CheckAssignments does, against the topic's replication
// factor, and changes nothing when one is wrong; an unknown topic is
// ErrUnknownTopic.
func (c *Cluster) AddPartitions(name string, replicas [][]int32) error {
	t := c.Topic(name)
	if t == nil {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	from := len(t.Partitions)
	if from+len(replicas) > MaxPartitions {
		return fmt.Errorf("%w: topic %q would have %d partitions, more than %d", ErrInvalid, name, from+len(replicas), MaxPartitions)
	}
	if err := c.CheckAssignments(replicas, from, from+len(replicas), t.ReplicationFactor); err != nil {
		return err
	}
	for _, r := range replicas {
		t.Partitions = append(t.Partitions, Partition{Replicas: slices.Clone(r), Active: slices.Clone(r), Leader: r[0]})
	}
	return nil
}
