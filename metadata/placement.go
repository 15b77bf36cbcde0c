package metadata

import (
	"fmt"
	"slices"
	"strings"
)

// Placement of a new topic's replicas (docs/cluster.md, "Placement").
//
// The brokers are laid out on a ring that alternates racks: each next
// broker is of the rack with the most brokers left, another than the one
// before when there is one, racks in the order of their lowest broker id
// on ties, brokers in id order within a rack. Racks of equal size take
// turns (a, b, c, a, b, c); a larger rack's brokers are spread between
// the others' (a, b, a, c, a, b, a, c). A broker that names no rack is a
// rack of its own, so that without racks the ring is the brokers in id
// order.
//
// Partition p is led by the broker p places after a start on the ring:
// every topic's leaders go round the ring once per as many partitions as
// there are brokers, so that they are even within the topic. The start is
// where the leftover partitions (the partition count modulo the brokers)
// land on the brokers that lead the fewest partitions of the cluster
// already: many topics of one partition then take turns, instead of each
// being led by the lowest broker id.
//
// Each follower is, among the brokers not yet in the partition's list,
// one in a rack with the fewest of the partition's replicas (a rack it
// has none in first), and of those the nearest after the leader on the
// ring that holds at most replicationFactor-1 replicas more than the one
// that holds the fewest (counting those placed so far): a broker that
// holds much less than the others, one added later, takes followers
// first. The followers are listed in ring order after the leader. Over
// brokers that hold nothing and name no rack this is the round robin of
// the first release: partition p led by the (p mod n)-th broker,
// followed by the next ones. With racks, a last pass evens out the
// followers (evenFollowers).

// PlacementBroker is a broker as placement weighs it: its rack and what
// it holds already.
type PlacementBroker struct {
	ID int32
	// Rack is the broker's failure domain; "" is a rack of its own.
	Rack string
	// Leaders are the partitions it is the preferred leader (first
	// replica) of; Replicas the replicas it holds.
	Leaders  int
	Replicas int
}

// PlacementBrokers is each of ids as placement weighs it in c: its rack
// and the preferred leaderships and replicas it holds in c's topics (of
// a partition being moved, those of its target). An id c does not
// register weighs as a broker without a rack that holds nothing.
func (c *Cluster) PlacementBrokers(ids []int32) []PlacementBroker {
	out := make([]PlacementBroker, len(ids))
	at := make(map[int32]int, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if b, ok := c.Broker(id); ok {
			out[i].Rack = b.Rack
		}
		at[id] = i
	}
	for _, t := range c.Topics {
		for _, p := range t.Partitions {
			replicas := p.Replicas
			if p.Move != nil {
				replicas = p.Move.Target
			}
			for r, id := range replicas {
				i, ok := at[id]
				if !ok {
					continue
				}
				out[i].Replicas++
				if r == 0 {
					out[i].Leaders++
				}
			}
		}
	}
	return out
}

// PlaceOn places a new topic's replicas over brokers (registered ones)
// as PlaceOver does, weighing their racks and what they hold in c.
func (c *Cluster) PlaceOn(brokers []int32, partitions, replicationFactor int) ([][]int32, error) {
	return PlaceOver(c.PlacementBrokers(brokers), partitions, replicationFactor)
}

// PlaceOver assigns replicas to the partitions of a new topic over
// brokers, deterministically: replicas of a partition in distinct racks
// first, then on distinct brokers; leaders round the rack-alternating
// ring from the start that evens out the cluster's leaders; followers on
// the brokers that hold the fewest replicas (see the comment above). The
// brokers' order does not matter. It fails with ErrNotEnoughBrokers when
// there are fewer brokers than replicationFactor, and with ErrInvalid for
// a partition count or replication factor out of range or a broker given
// twice.
func PlaceOver(brokers []PlacementBroker, partitions, replicationFactor int) ([][]int32, error) {
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d outside [1, %d]", ErrInvalid, partitions, MaxPartitions)
	}
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d below 1", ErrInvalid, replicationFactor)
	}
	if replicationFactor > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d needs %d brokers, %d available", ErrNotEnoughBrokers, replicationFactor, replicationFactor, len(brokers))
	}
	ring, err := rackRing(brokers)
	if err != nil {
		return nil, err
	}
	n := len(ring)
	rackOf := make([]int, n) // index of each ring position's rack
	racks := map[string]int{}
	replicas := make([]int, n)
	for i, b := range ring {
		k := rackKey(b)
		if _, ok := racks[k]; !ok {
			racks[k] = len(racks)
		}
		rackOf[i] = racks[k]
		replicas[i] = b.Replicas
	}
	start := 0
	if r := partitions % n; r > 0 {
		// The window of r brokers that lead the fewest now takes the
		// leftover partitions; the first such window on ties.
		best := -1
		for s := range n {
			sum := 0
			for j := range r {
				sum += ring[(s+j)%n].Leaders
			}
			if best < 0 || sum < best {
				best, start = sum, s
			}
		}
	}
	// A follower may hold up to slack replicas more than the least loaded
	// candidate: as many as the round robin leaves between brokers, so
	// that over brokers that hold nothing it is the round robin.
	slack := replicationFactor - 1
	inRack := make([]int, len(racks))  // the current partition's replicas per rack
	lists := make([][]int, partitions) // ring positions, leader first
	for p := range lists {
		lead := (start + p) % n
		list := make([]int, 1, replicationFactor)
		list[0] = lead
		clear(inRack)
		inRack[rackOf[lead]]++
		replicas[lead]++
		for len(list) < replicationFactor {
			// The racks with the fewest of the partition's replicas, and
			// the fewest replicas a broker of theirs holds.
			fewest, least := -1, 0
			for j := range n {
				if slices.Contains(list, j) {
					continue
				}
				switch r := inRack[rackOf[j]]; {
				case fewest < 0 || r < fewest:
					fewest, least = r, replicas[j]
				case r == fewest:
					least = min(least, replicas[j])
				}
			}
			// The nearest after the leader of those that hold at most
			// slack more than that.
			pick := -1
			for d := 1; d < n && pick < 0; d++ {
				j := (lead + d) % n
				if !slices.Contains(list, j) && inRack[rackOf[j]] == fewest && replicas[j] <= least+slack {
					pick = j
				}
			}
			list = append(list, pick)
			inRack[rackOf[pick]]++
			replicas[pick]++
		}
		lists[p] = list
	}
	if len(racks) < n {
		evenFollowers(lists, replicas, rackOf)
	}
	out := make([][]int32, partitions)
	for p, list := range lists {
		lead := list[0]
		slices.SortFunc(list[1:], func(a, b int) int { return (a-lead+n)%n - (b-lead+n)%n })
		out[p] = make([]int32, len(list))
		for i, j := range list {
			out[p][i] = ring[j].ID
		}
	}
	return out, nil
}

// evenFollowers moves followers of lists (ring positions, leader first)
// from the brokers that hold the most replicas to those that hold the
// fewest while two differ by two or more and a move keeps the partition's
// racks: with racks of unequal sizes the ring alone leaves some brokers
// of a larger rack with fewer replicas than the others.
func evenFollowers(lists [][]int, replicas, rackOf []int) {
	n := len(replicas)
	keeps := func(list []int, from, to int) bool {
		if rackOf[from] == rackOf[to] {
			return true
		}
		inFrom, inTo := 0, 0
		for _, j := range list {
			switch rackOf[j] {
			case rackOf[from]:
				inFrom++
			case rackOf[to]:
				inTo++
			}
		}
		return inFrom > 1 || inTo == 0
	}
	order := make([]int, n)
	for range len(lists)*len(lists[0]) + 1 {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return replicas[b] - replicas[a] })
		moved := false
	pairs:
		for _, hi := range order {
			for k := n - 1; k >= 0; k-- {
				lo := order[k]
				if replicas[hi]-replicas[lo] < 2 {
					break
				}
				for _, list := range lists {
					pos := slices.Index(list, hi)
					if pos < 1 || slices.Contains(list, lo) || !keeps(list, hi, lo) {
						continue
					}
					list[pos] = lo
					replicas[hi]--
					replicas[lo]++
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			return
		}
	}
}

// rackKey is the rack a broker counts in: its own, or one of its own when
// it names none.
func rackKey(b PlacementBroker) string {
	if b.Rack == "" {
		return fmt.Sprintf("\x00broker-%d", b.ID)
	}
	return b.Rack
}

// rackRing lays brokers out on the rack-alternating ring. It fails with
// ErrInvalid for a broker given twice.
func rackRing(brokers []PlacementBroker) ([]PlacementBroker, error) {
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b PlacementBroker) int { return int(a.ID) - int(b.ID) })
	var order []string // racks by their lowest broker id
	byRack := map[string][]PlacementBroker{}
	for i, b := range sorted {
		if i > 0 && sorted[i-1].ID == b.ID {
			return nil, fmt.Errorf("%w: broker %d given twice", ErrInvalid, b.ID)
		}
		k := rackKey(b)
		if _, ok := byRack[k]; !ok {
			order = append(order, k)
		}
		byRack[k] = append(byRack[k], b)
	}
	// Each step takes the next broker of the rack with the most left,
	// another rack than the step before's when one has any left, the
	// first in order on ties: racks of equal size alternate in turn, and
	// a larger rack's brokers are spread between the others'.
	ring := make([]PlacementBroker, 0, len(sorted))
	taken := make(map[string]int, len(order))
	prev := ""
	for len(ring) < len(sorted) {
		next := ""
		for _, k := range order {
			left := len(byRack[k]) - taken[k]
			switch {
			case left == 0:
			case next == "":
				next = k
			case (next == prev) != (k == prev):
				if next == prev {
					next = k
				}
			case left > len(byRack[next])-taken[next]:
				next = k
			}
		}
		ring = append(ring, byRack[next][taken[next]])
		taken[next]++
		prev = next
	}
	return ring, nil
}

// MaxRackLen bounds the length of a rack's name.
const MaxRackLen = 64

// ValidateRack checks a rack's name (--rack): 1 to MaxRackLen letters,
// digits and . _ - : /. Its errors match ErrInvalid.
func ValidateRack(rack string) error {
	if rack == "" || len(rack) > MaxRackLen {
		return fmt.Errorf("%w: rack name %q: want 1 to %d characters", ErrInvalid, rack, MaxRackLen)
	}
	for _, r := range rack {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._-:/", r)) {
			return fmt.Errorf("%w: rack name %q: %q is not a letter, a digit or one of . _ - : /", ErrInvalid, rack, r)
		}
	}
	return nil
}
