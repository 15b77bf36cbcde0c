package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gostream/transport"
)

// Decommission plans moving every replica off broker (see the package
// documentation). It fails with ErrUnknownBroker when broker is not
// registered, and with ErrNotEnoughBrokers, naming the partitions, when
// a partition's replica count cannot be kept with the brokers left (those
// of in.Targets but broker).
func Decommission(in Input, broker int32) (transport.MovePlan, error) {
	if _, ok := in.Cluster.Broker(broker); !ok {
		return transport.MovePlan{}, fmt.Errorf("%w: broker %d is not registered (registered: %s)", ErrUnknownBroker, broker, joinIDs(in.Cluster.BrokerIDs()))
	}
	s := newState(in, nil)
	before := s.clone()
	gone := s.at[broker]
	s.target[gone] = false
	left := s.targets()

	// The largest partitions first, so that the bytes even out best.
	var todo []*part
	var stuck []string
	for _, p := range s.parts {
		if !s.holds(p, gone) {
			continue
		}
		if p.fixed {
			stuck = append(stuck, p.key.String())
			continue
		}
		todo = append(todo, p)
	}
	slices.SortStableFunc(todo, func(a, b *part) int { return cmp.Compare(b.size, a.size) })
	var short []string
	for _, p := range todo {
		// The partition's replicas in a rack, broker's own left out.
		others := func(i int) int {
			n := s.inRack(p, s.rack[i])
			if s.rack[i] == s.rack[gone] {
				n--
			}
			return n
		}
		to := -1
		for _, i := range left {
			if s.holds(p, i) {
				continue
			}
			if to < 0 || cmp.Or(cmp.Compare(others(i), others(to)), boolCompare(less(s, i, to))) < 0 {
				to = i
			}
		}
		if to < 0 {
			short = append(short, fmt.Sprintf("%s (%d %s)", p.key, len(p.cur), plural(len(p.cur), "replica", "replicas")))
			continue
		}
		if p.cur[0] == gone && len(p.cur) > 1 {
			// Leadership goes to one of the replicas that hold the log:
			// the one that leads the fewest lists.
			next := -1
			for _, i := range p.cur[1:] {
				if next < 0 || s.leaders[i] < s.leaders[next] {
					next = i
				}
			}
			s.lead(p, next)
			p.reasons = nil
		}
		s.replace(p, gone, to, fmt.Sprintf(reasonDecom, broker))
	}
	if len(short) > 0 {
		return transport.MovePlan{}, fmt.Errorf("%w: broker %d cannot be decommissioned: %d %s would keep fewer replicas than %s now, with the %d %s left that replicas may move to (%s): %s. "+
			"Add a broker first, or lower their replication factor by reassignment; nothing was planned",
			ErrNotEnoughBrokers, broker, len(short), plural(len(short), "partition", "partitions"), plural(len(short), "it has", "they have"),
			len(left), plural(len(left), "broker", "brokers"), joinIDs(s.idsOf(left)), listSome(short))
	}
	if len(stuck) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("broker %d is in the target of %d %s being moved, left out of the plan: decommission again once %s finished: %s",
			broker, len(stuck), plural(len(stuck), "partition", "partitions"), plural(len(stuck), "its move has", "their moves have"), listSome(stuck)))
	}
	if len(todo) == 0 && len(stuck) == 0 {
		s.notes = append(s.notes, fmt.Sprintf("broker %d holds no replicas: nothing to move", broker))
	}
	return s.result(before), nil
}

func boolCompare(less bool) int {
	if less {
		return -1
	}
	return 1
}

func (s *state) idsOf(idx []int) []int32 {
	out := make([]int32, len(idx))
	for i, j := range idx {
		out[i] = s.ids[j]
	}
	return out
}

func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
