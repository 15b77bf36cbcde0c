package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gostream/metadata"
	"gostream/transport"
)

// Sentinel errors of package plan.
var (
	// ErrUnknownBroker: decommission of a broker that is not registered.
	ErrUnknownBroker = errors.New("plan: unknown broker")
	// ErrNotEnoughBrokers: the brokers left cannot hold a partition's
	// replicas.
	ErrNotEnoughBrokers = errors.New("plan: not enough brokers")
)

// MinByteSpread is the difference in bytes between two brokers below
// which rebalance does not move replicas to even out bytes.
const MinByteSpread int64 = 64 << 20

// Key names a partition.
type Key struct {
	Topic     string
	Partition int32
}

func (k Key) String() string { return fmt.Sprintf("%s/%d", k.Topic, k.Partition) }

// Input is what a planner plans over.
type Input struct {
	// Cluster is the metadata: the brokers with their racks, the topics
	// with each partition's replica list, preferred leader first.
	Cluster *metadata.Cluster
	// Sizes are the bytes of each partition's log; a partition missing
	// counts as empty.
	Sizes map[Key]int64
	// Targets are the brokers replicas may be moved to (those that
	// answer); every registered broker when nil.
	Targets []int32
	// Topics limits a rebalance to these topics; every topic when empty.
	Topics []string
}

// part is one partition as a plan changes it. Its lists are of broker
// indexes (into state.ids), first the preferred leader.
type part struct {
	key  Key
	n    int // its index in state.parts
	size int64
	from []int // the list now
	cur  []int // the list planned so far
	// fixed: not to be planned (being moved, or outside the topics asked
	// for); cur is then the list it will have (a move's target).
	fixed   bool
	reasons []string
}

func (p *part) changed() bool { return !slices.Equal(p.from, p.cur) }

func (p *part) because(reason string) {
	if !slices.Contains(p.reasons, reason) {
		p.reasons = append(p.reasons, reason)
	}
}

// Reasons of a planned move.
const (
	reasonRacks    = "rack spread"
	reasonReplicas = "replicas per broker"
	reasonBytes    = "bytes per broker"
	reasonLeaders  = "preferred leaders per broker"
	reasonDecom    = "decommission of broker %d"
)

// state is a cluster as a plan changes it: the partitions counted, and per
// broker (by index into ids) what it holds.
type state struct {
	ids    []int32 // registered brokers, ascending
	at     map[int32]int
	rack   []int    // each broker's rack, an index into racks
	racks  []string // rack names; "" for a broker's own
	target []bool   // replicas may move to the broker

	parts []*part
	// What each broker holds of cur, over every part: the parts (indexes
	// into parts, ascending), replicas, preferred leaders and bytes.
	held     [][]int
	replicas []int
	leaders  []int
	bytes    []int64

	notes []string
	// The byte goal of evenReplicas (byteGoal).
	perReplica, byteTolerance int64
}

// newState lays out in's cluster: every registered broker, and the
// partitions of topics (every topic when nil), with those being moved
// fixed at their targets.
func newState(in Input, topics map[string]bool) *state {
	c := in.Cluster
	s := &state{at: map[int32]int{}}
	rackAt := map[string]int{}
	for _, b := range c.Brokers {
		i := len(s.ids)
		s.ids = append(s.ids, b.ID)
		s.at[b.ID] = i
		key := b.Rack
		if key == "" {
			key = fmt.Sprintf("\x00broker-%d", b.ID)
		}
		r, ok := rackAt[key]
		if !ok {
			r = len(s.racks)
			rackAt[key] = r
			s.racks = append(s.racks, b.Rack)
		}
		s.rack = append(s.rack, r)
	}
	s.target = make([]bool, len(s.ids))
	if in.Targets == nil {
		for i := range s.target {
			s.target[i] = true
		}
	}
	for _, id := range in.Targets {
		if i, ok := s.at[id]; ok {
			s.target[i] = true
		}
	}
	var moving []string
	for _, t := range c.Topics {
		if topics != nil && !topics[t.Name] {
			continue
		}
		for i, p := range t.Partitions {
			k := Key{t.Name, int32(i)}
			pt := &part{key: k, size: in.Sizes[k]}
			list := p.Replicas
			if p.Move != nil {
				pt.fixed = true
				list = p.Move.Target
				moving = append(moving, k.String())
			}
			for _, id := range list {
				j, ok := s.at[id]
				if !ok {
					// Not in valid metadata; counted nowhere, moved never.
					pt.fixed = true
					continue
				}
				pt.from = append(pt.from, j)
			}
			pt.cur = slices.Clone(pt.from)
			pt.n = len(s.parts)
			s.parts = append(s.parts, pt)
		}
	}
	if len(moving) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("%d %s being moved and left out of the plan (counted where %s moving to): %s",
			len(moving), plural(len(moving), "partition is", "partitions are"), plural(len(moving), "it is", "they are"), listSome(moving)))
	}
	s.count()
	return s
}

// count computes what each broker holds of the partitions' current lists.
func (s *state) count() {
	s.held = make([][]int, len(s.ids))
	s.replicas = make([]int, len(s.ids))
	s.leaders = make([]int, len(s.ids))
	s.bytes = make([]int64, len(s.ids))
	for _, p := range s.parts {
		for r, i := range p.cur {
			s.held[i] = append(s.held[i], p.n)
			s.replicas[i]++
			s.bytes[i] += p.size
			if r == 0 {
				s.leaders[i]++
			}
		}
	}
}

// replace puts broker index to in place of broker index from in p's list,
// at the same position, and counts it.
func (s *state) replace(p *part, from, to int, reason string) {
	pos := slices.Index(p.cur, from)
	p.cur[pos] = to
	if k, ok := slices.BinarySearch(s.held[from], p.n); ok {
		s.held[from] = slices.Delete(s.held[from], k, k+1)
	}
	k, _ := slices.BinarySearch(s.held[to], p.n)
	s.held[to] = slices.Insert(s.held[to], k, p.n)
	s.replicas[from]--
	s.replicas[to]++
	s.bytes[from] -= p.size
	s.bytes[to] += p.size
	if pos == 0 {
		s.leaders[from]--
		s.leaders[to]++
	}
	p.because(reason)
}

// holds reports whether p's list holds broker index i.
func (s *state) holds(p *part, i int) bool { return slices.Contains(p.cur, i) }

// inRack counts p's replicas in rack r.
func (s *state) inRack(p *part, r int) int {
	n := 0
	for _, i := range p.cur {
		if s.rack[i] == r {
			n++
		}
	}
	return n
}

// keepsRacks reports whether replacing broker index from by to in p's
// list leaves it in as many racks.
func (s *state) keepsRacks(p *part, from, to int) bool {
	if s.rack[from] == s.rack[to] {
		return true
	}
	return s.inRack(p, s.rack[from]) > 1 || s.inRack(p, s.rack[to]) == 0
}

// result is the plan of the partitions s changed, with its summary.
func (s *state) result(before *state) transport.MovePlan {
	plan := transport.MovePlan{Version: transport.MovePlanVersion, Partitions: []transport.PlannedMove{}}
	sum := &transport.PlanSummary{Notes: s.notes}
	for _, p := range s.parts {
		if !p.changed() {
			continue
		}
		added := 0
		for _, i := range p.cur {
			if !slices.Contains(p.from, i) {
				added++
			}
		}
		m := transport.PlannedMove{Topic: p.key.Topic, Partition: p.key.Partition, Replicas: s.idsOf(p.cur),
			From: s.idsOf(p.from), Bytes: int64(added) * p.size, Reason: strings.Join(p.reasons, ", ")}
		plan.Partitions = append(plan.Partitions, m)
		sum.Moves++
		sum.NewReplicas += added
		sum.BytesToCopy += m.Bytes
	}
	slices.SortFunc(plan.Partitions, func(a, b transport.PlannedMove) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for i, id := range s.ids {
		r := s.racks[s.rack[i]]
		sum.Brokers = append(sum.Brokers, transport.BrokerLoad{Broker: id, Rack: r,
			Replicas: before.replicas[i], Leaders: before.leaders[i], Bytes: before.bytes[i],
			ReplicasAfter: s.replicas[i], LeadersAfter: s.leaders[i], BytesAfter: s.bytes[i]})
		if r != "" {
			if sum.Racks == nil {
				sum.Racks = map[string]int{}
			}
			sum.Racks[r]++
		}
	}
	plan.Summary = sum
	return plan
}

// clone is a copy of s whose partitions' lists can change apart from s's.
func (s *state) clone() *state {
	n := *s
	n.parts = make([]*part, len(s.parts))
	for i, p := range s.parts {
		q := *p
		q.cur = slices.Clone(p.cur)
		q.reasons = slices.Clone(p.reasons)
		n.parts[i] = &q
	}
	n.held = make([][]int, len(s.held))
	for i, h := range s.held {
		n.held[i] = slices.Clone(h)
	}
	n.replicas = slices.Clone(s.replicas)
	n.leaders = slices.Clone(s.leaders)
	n.bytes = slices.Clone(s.bytes)
	n.notes = slices.Clone(s.notes)
	return &n
}

// maxListed bounds the partitions an error or a note names one by one.
const maxListed = 10

// listSome is names joined, the first maxListed of them and how many more.
func listSome(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
