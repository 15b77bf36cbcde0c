package plan

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"gostream/metadata"
	"gostream/transport"
)

// Rebalance plans the moves that even out rack spread, replicas,
// preferred leaders and bytes per broker (see the package documentation). A
// topic of in.Topics that does not exist is an error matching
// metadata.ErrUnknownTopic.
func Rebalance(in Input) (transport.MovePlan, error) {
	var topics map[string]bool
	if len(in.Topics) > 0 {
		topics = map[string]bool{}
		for _, t := range in.Topics {
			if in.Cluster.Topic(t) == nil {
				return transport.MovePlan{}, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, t)
			}
			topics[t] = true
		}
	}
	s := newState(in, topics)
	before := s.clone()
	// A step changes which partitions each broker holds and leads, which
	// may let an earlier one move what it could not: the steps run again
	// until none moves anything, so that planning the cluster a plan
	// leaves plans nothing. They end: each move gains on the racks, or
	// keeps them and lowers the spread of the counts, or keeps both and
	// lowers the spread of the bytes, or keeps all three and lowers the
	// spread of the leaders.
	for range maxRounds {
		racks := s.fixRacks()
		counts := s.evenReplicas()
		bytes := s.evenBytes()
		if leaders := s.evenLeaders(); !racks && !counts && !bytes && !leaders {
			break
		}
	}
	return s.result(before), nil
}

// maxRounds bounds the rounds of Rebalance's steps; they settle in a few.
const maxRounds = 50

// targets are the indexes of the brokers replicas may move to.
func (s *state) targets() []int {
	var out []int
	for i, ok := range s.target {
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// fixRacks moves, in each partition with two replicas in one rack, one of
// them to a rack the partition has none in, while such a rack has a
// broker to take it. It reports whether it moved any.
func (s *state) fixRacks() bool {
	moved := false
	for _, p := range s.parts {
		if p.fixed {
			continue
		}
		for {
			from, to := -1, -1
			for pos, i := range p.cur {
				if s.inRack(p, s.rack[i]) < 2 {
					continue
				}
				// A follower rather than the first; then the broker that
				// holds the most.
				if from < 0 || pos > 0 && s.replicas[i] > s.replicas[from] || p.cur[0] == from {
					from = i
				}
			}
			if from < 0 {
				break
			}
			for _, i := range s.targets() {
				if s.inRack(p, s.rack[i]) > 0 {
					continue
				}
				if to < 0 || less(s, i, to) {
					to = i
				}
			}
			if to < 0 {
				break
			}
			s.replace(p, from, to, reasonRacks)
			moved = true
		}
	}
	return moved
}

// less orders brokers to take a replica: the fewest replicas, then the
// fewest bytes, then the lowest id.
func less(s *state, i, j int) bool {
	return cmp.Or(cmp.Compare(s.replicas[i], s.replicas[j]), cmp.Compare(s.bytes[i], s.bytes[j]), cmp.Compare(i, j)) < 0
}

// evenReplicas moves replicas from the brokers that hold the most to
// those that hold the fewest while two differ by more than one and a
// partition can move between them. It reports whether it moved any.
func (s *state) evenReplicas() bool {
	ts := s.targets()
	s.perReplica, s.byteTolerance = s.byteGoal(ts)
	movedAny := false
	for range s.totalReplicas() + 1 {
		his := slices.Clone(ts)
		slices.SortFunc(his, func(a, b int) int {
			return cmp.Or(cmp.Compare(s.replicas[b], s.replicas[a]), cmp.Compare(s.bytes[b], s.bytes[a]), cmp.Compare(a, b))
		})
		los := slices.Clone(ts)
		slices.SortFunc(los, func(a, b int) int {
			return cmp.Or(cmp.Compare(s.replicas[a], s.replicas[b]), cmp.Compare(s.bytes[a], s.bytes[b]), cmp.Compare(a, b))
		})
		moved := false
	pairs:
		for _, hi := range his {
			for _, lo := range los {
				if s.replicas[hi]-s.replicas[lo] <= 1 {
					break
				}
				if p := s.pickMove(hi, lo); p != nil {
					s.replace(p, hi, lo, reasonReplicas)
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			break
		}
		movedAny = true
	}
	return movedAny
}

func (s *state) totalReplicas() int {
	n := 0
	for _, r := range s.replicas {
		n += r
	}
	return n
}

// byteGoal is, over the brokers ts, the mean size of a replica and how far
// a broker's bytes may be from what its replicas would hold at that mean
// (half of what evenBytes tolerates between two brokers).
func (s *state) byteGoal(ts []int) (perReplica, tolerance int64) {
	var bytes, replicas int64
	for _, i := range ts {
		bytes += s.bytes[i]
		replicas += int64(s.replicas[i])
	}
	if replicas == 0 {
		return 0, MinByteSpread / 2
	}
	return bytes / replicas, max(bytes/int64(len(ts))/10, MinByteSpread) / 2
}

// pickMove is the partition whose replica on broker hi moves best to lo:
// one that lo does not hold and whose racks the move keeps; one that
// leaves the two brokers' leaders as even first (a follower's place, or
// a leader's from the broker that leads more), then one that leaves both
// brokers' bytes within byteTolerance of what their replicas would hold
// at the mean size, or as near as may be, then the fewest bytes, then one
// the plan changes already, then a follower's place. So the moves copy
// the smallest partitions while that keeps the bytes even, and larger
// ones when it would not.
func (s *state) pickMove(hi, lo int) *part {
	devHi := s.bytes[hi] - int64(s.replicas[hi]-1)*s.perReplica
	devLo := s.bytes[lo] - int64(s.replicas[lo]+1)*s.perReplica
	var best *part
	var bestKey [5]int64
	for _, n := range s.held[hi] {
		p := s.parts[n]
		if p.fixed || s.holds(p, lo) || !s.keepsRacks(p, hi, lo) {
			continue
		}
		key := [5]int64{0, 0, p.size, 1, 0}
		if !s.leadersKept(p, nil, hi, lo) {
			key[0] = 1
		}
		if off := max(abs64(devHi-p.size), abs64(devLo+p.size)); off > s.byteTolerance {
			key[1] = off
		}
		if p.changed() {
			key[3] = 0
		}
		if p.cur[0] == hi {
			key[4] = 1
		}
		if best == nil || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = p, key
		}
	}
	return best
}

// leadersKept reports whether moving p's replica from broker hi to lo,
// and q's (if any) from lo to hi, leaves the two brokers' preferred
// leaders no further apart than they are.
func (s *state) leadersKept(p, q *part, hi, lo int) bool {
	dl := 0 // the leaderships hi hands lo
	if p.cur[0] == hi {
		dl++
	}
	if q != nil && q.cur[0] == lo {
		dl--
	}
	d := s.leaders[hi] - s.leaders[lo]
	abs := func(x int) int { return max(x, -x) }
	return abs(d-2*dl) <= abs(d)
}

// evenBytes moves replicas, one or two that swap places, from the broker
// with the most bytes to the one with the fewest while they differ by
// more than a tenth of the mean and MinByteSpread, the replica counts
// stay as even, and a move brings the two closer. It reports whether it
// moved any.
func (s *state) evenBytes() bool {
	ts := s.targets()
	if len(ts) < 2 {
		return false
	}
	var total int64
	for _, i := range ts {
		total += s.bytes[i]
	}
	tolerance := max(total/int64(len(ts))/10, MinByteSpread)
	movedAny := false
	for range len(s.parts) + 1 {
		his := slices.Clone(ts)
		slices.SortFunc(his, func(a, b int) int { return cmp.Or(cmp.Compare(s.bytes[b], s.bytes[a]), cmp.Compare(a, b)) })
		moved := false
		// The pair furthest apart first; another when racks or counts
		// leave that one nothing to move.
	pairs:
		for _, hi := range his {
			for k := len(his) - 1; k >= 0; k-- {
				lo := his[k]
				spread := s.bytes[hi] - s.bytes[lo]
				if spread <= tolerance {
					break
				}
				if s.evenBytesOnce(hi, lo, spread) {
					moved = true
					break pairs
				}
			}
		}
		if !moved {
			break
		}
		movedAny = true
	}
	return movedAny
}

// evenBytesOnce makes the move or swap between hi and lo that leaves
// their bytes closest, if one brings them closer than spread.
func (s *state) evenBytesOnce(hi, lo int, spread int64) bool {
	var fromHi, fromLo []*part // the partitions each could give the other
	for _, n := range s.held[hi] {
		if p := s.parts[n]; !p.fixed && !s.holds(p, lo) && s.keepsRacks(p, hi, lo) {
			fromHi = append(fromHi, p)
		}
	}
	for _, n := range s.held[lo] {
		if p := s.parts[n]; !p.fixed && !s.holds(p, hi) && s.keepsRacks(p, lo, hi) {
			fromLo = append(fromLo, p)
		}
	}
	abs := func(x int64) int64 { return max(x, -x) }
	bestSpread, bestCost := spread, int64(0)
	var moveP, moveQ *part
	consider := func(p, q *part, d, cost int64) {
		if d <= 0 || d >= spread {
			return
		}
		ns := abs(spread - 2*d)
		if ns < bestSpread || ns == bestSpread && moveP != nil && cost < bestCost {
			bestSpread, bestCost, moveP, moveQ = ns, cost, p, q
		}
	}
	if s.replicas[hi] > s.replicas[lo] {
		for _, p := range fromHi {
			if s.leadersKept(p, nil, hi, lo) {
				consider(p, nil, p.size, s.copyCost(p, hi, lo))
			}
		}
	}
	// Swaps: p from hi for q from lo, q the size that brings them
	// closest, found by a search over fromLo by size.
	sort.SliceStable(fromLo, func(i, j int) bool { return fromLo[i].size < fromLo[j].size })
	for _, p := range fromHi {
		want := p.size - spread/2
		i := sort.Search(len(fromLo), func(i int) bool { return fromLo[i].size >= want })
		// The nearest sizes on each side whose swap keeps the leaders.
		for j := i - 1; j >= 0; j-- {
			if q := fromLo[j]; s.leadersKept(p, q, hi, lo) {
				consider(p, q, p.size-q.size, s.copyCost(p, hi, lo)+s.copyCost(q, lo, hi))
				break
			}
		}
		for j := i; j < len(fromLo); j++ {
			if q := fromLo[j]; s.leadersKept(p, q, hi, lo) {
				consider(p, q, p.size-q.size, s.copyCost(p, hi, lo)+s.copyCost(q, lo, hi))
				break
			}
		}
	}
	if moveP == nil {
		return false
	}
	s.replace(moveP, hi, lo, reasonBytes)
	if moveQ != nil {
		s.replace(moveQ, lo, hi, reasonBytes)
	}
	return true
}

// copyCost is what replacing broker index from by to in p's list adds to
// the bytes the plan copies: p's size for a new replica, less when the
// replica goes back where it was (a replica planned away returns).
func (s *state) copyCost(p *part, from, to int) int64 {
	cost := int64(0)
	if !slices.Contains(p.from, to) {
		cost += p.size
	}
	if !slices.Contains(p.from, from) {
		cost -= p.size
	}
	return cost
}

// evenLeaders reorders lists while one broker is the first of two more
// than another that a chain of partitions leads to: along the shortest
// chain from it, each partition's first place goes to the next broker of
// the chain, which the partition holds. Only brokers replicas may move to
// take part. It reports whether it reordered any.
func (s *state) evenLeaders() bool {
	moved := false
	for range len(s.parts) + 1 {
		his := s.targets()
		slices.SortFunc(his, func(a, b int) int { return cmp.Or(cmp.Compare(s.leaders[b], s.leaders[a]), cmp.Compare(a, b)) })
		shifted := false
		for _, hi := range his {
			if s.shiftLeader(hi) {
				shifted = true
				break
			}
		}
		if !shifted {
			break
		}
		moved = true
	}
	return moved
}

// link is a step of a chain: partition p, first on the broker before,
// could be led by broker to.
type link struct {
	p  *part
	to int
}

// shiftLeader finds, from broker hi, the shortest chain to the reachable
// broker that leads the fewest, at least two fewer than hi, and shifts
// leadership along it.
func (s *state) shiftLeader(hi int) bool {
	n := len(s.ids)
	edges := make([][]link, n)
	for _, p := range s.parts {
		if p.fixed {
			continue
		}
		u := p.cur[0]
		if !s.target[u] {
			continue
		}
		for _, v := range p.cur[1:] {
			if s.target[v] {
				edges[u] = append(edges[u], link{p, v})
			}
		}
	}
	// Partitions the plan changes already first: a link through them adds
	// no move.
	for u := range edges {
		slices.SortStableFunc(edges[u], func(a, b link) int {
			return cmp.Compare(boolInt(!a.p.changed()), boolInt(!b.p.changed()))
		})
	}
	prev := make([]link, n)
	seen := make([]bool, n)
	seen[hi] = true
	queue := []int{hi}
	best := -1
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range edges[u] {
			if seen[e.to] {
				continue
			}
			seen[e.to] = true
			prev[e.to] = link{e.p, u}
			queue = append(queue, e.to)
			if s.leaders[e.to] <= s.leaders[hi]-2 && (best < 0 || s.leaders[e.to] < s.leaders[best]) {
				best = e.to
			}
		}
	}
	if best < 0 {
		return false
	}
	var chain []link // from hi's end
	for v := best; v != hi; v = prev[v].to {
		chain = append(chain, link{prev[v].p, v})
	}
	slices.Reverse(chain)
	for _, l := range chain {
		s.lead(l.p, l.to)
	}
	return true
}

// lead makes broker index i, which p holds, p's first replica: the first
// takes i's place.
func (s *state) lead(p *part, i int) {
	pos := slices.Index(p.cur, i)
	old := p.cur[0]
	p.cur[0], p.cur[pos] = p.cur[pos], p.cur[0]
	s.leaders[old]--
	s.leaders[i]++
	p.because(reasonLeaders)
}

func abs64(x int64) int64 { return max(x, -x) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
