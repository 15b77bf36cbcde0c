package groups

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The refusals of a commit. Each writes nothing.
var (
	// ErrOffsetRegression: the offset is below the one committed, and the
	// commit is not an explicit reset.
	ErrOffsetRegression = errors.New("groups: offset regression")
	// ErrInvalidOffset: the offset is negative or above the partition's
	// log end.
	ErrInvalidOffset = errors.New("groups: invalid offset")
	// ErrUnknownMember: the member is not in the group.
	ErrUnknownMember = errors.New("groups: unknown member")
	// ErrFencedMember: the member's epoch is not its current one: it was
	// removed or has moved on, and a commit from its past is refused.
	ErrFencedMember = errors.New("groups: fenced member")
	// ErrNotOwner: the member does not own the partition it commits.
	ErrNotOwner = errors.New("groups: partition not owned by the member")
	// ErrGroupNotEmpty: a reset (or a delete) of a group that has members.
	ErrGroupNotEmpty = errors.New("groups: group has members")
	// ErrFencedInstanceID: a join with a static instance id that a live
	// member of the group uses.
	ErrFencedInstanceID = errors.New("groups: instance id in use by a live member")
	// ErrUnknownGroup: a group that holds nothing.
	ErrUnknownGroup = errors.New("groups: unknown group")
	// ErrInvalidRequest: a request that breaks a bound or names what
	// cannot be (an internal topic in a subscription, a session timeout
	// out of range).
	ErrInvalidRequest = errors.New("groups: invalid request")
	// ErrUnknownTopic and ErrUnknownPartition: a commit for a topic or a
	// partition that does not exist.
	ErrUnknownTopic     = errors.New("groups: unknown topic")
	ErrUnknownPartition = errors.New("groups: unknown partition")
)

// Group is one group's state as its coordinator holds it, rebuilt from
// the group's records in log order.
type Group struct {
	Name string
	// Offsets are the committed offsets. A partition absent from it was
	// never committed, which is not the same as a committed 0.
	Offsets    map[TopicPartition]Commit
	Members    map[string]Member
	GroupEpoch int32
	// Target is the assignment of GroupEpoch.
	Target map[string][]TopicPartition
	// Owners says which member owns which partition now (has been given it
	// and has not released it). It is not in the log: the coordinator
	// sets it as it hands partitions out and takes them back (Own,
	// Release), and a new coordinator learns it from the members' next
	// heartbeats, each of which says what the member owns.
	Owners map[TopicPartition]string
	// Classic is the group's last stable generation of Kafka's classic
	// protocol (docs/kafka-groups.md), nil when it never had one; its
	// members are the classic members. ClassicFloor is the highest
	// generation written, stable or not: the next is above it.
	Classic      *ClassicGeneration
	ClassicFloor int32
}

func newGroup(name string) *Group {
	return &Group{Name: name, Offsets: map[TopicPartition]Commit{}, Members: map[string]Member{},
		Target: map[string][]TopicPartition{}, Owners: map[TopicPartition]string{}}
}

// State is every group of one partition of __consumer_offsets.
type State struct {
	groups map[string]*Group
}

// NewState returns an empty state.
func NewState() *State { return &State{groups: map[string]*Group{}} }

// Group returns a group's state, or nil when the state holds none.
func (s *State) Group(name string) *Group { return s.groups[name] }

// Groups returns the names of the groups held, sorted.
func (s *State) Groups() []string {
	names := make([]string, 0, len(s.groups))
	for n := range s.groups {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Apply changes the state by one record of the log, as written: records
// are applied in log order, on rebuild as when they are written, so a
// coordinator and its successor hold the same state. A record is applied
// only once acknowledged; what it says was checked before it was written
// (CheckCommit), so Apply checks nothing.
func (s *State) Apply(r Record) {
	if r.Kind.marker() {
		return // the coordinator's load reads them (see Coordinator.Load)
	}
	g := s.groups[r.Group]
	if g == nil {
		if r.Kind == KindGroupDeleted || r.Kind == KindOffsetsDeleted {
			return
		}
		g = newGroup(r.Group)
		s.groups[r.Group] = g
	}
	switch r.Kind {
	case KindCommit:
		c := *r.Commit
		g.Offsets[TopicPartition{c.Topic, c.Partition}] = c
	case KindReset:
		for _, c := range r.Reset.Offsets {
			g.Offsets[TopicPartition{c.Topic, c.Partition}] = c
		}
	case KindOffsetsDeleted:
		for _, tp := range r.Deleted.Partitions {
			delete(g.Offsets, tp)
		}
	case KindMember:
		g.Members[r.Member.MemberID] = *r.Member
	case KindMemberGone:
		delete(g.Members, r.Gone.MemberID)
		delete(g.Target, r.Gone.MemberID)
		for tp, o := range g.Owners {
			if o == r.Gone.MemberID {
				delete(g.Owners, tp)
			}
		}
	case KindAssignment:
		g.GroupEpoch = r.Assignment.GroupEpoch
		g.Target = map[string][]TopicPartition{}
		for _, m := range r.Assignment.Members {
			g.Target[m.MemberID] = slices.Clone(m.Partitions)
		}
	case KindGroupDeleted:
		delete(s.groups, r.Group)
	case KindClassic:
		g.ClassicFloor = max(g.ClassicFloor, r.Classic.Generation)
		if r.Classic.Stable {
			g.Classic = r.Classic
		}
	case KindSnapshotGroup:
		// What the group holds, restated: applied to the state it was
		// taken from, it changes nothing.
		sg := r.Snapshot
		if sg.First {
			g.GroupEpoch = sg.GroupEpoch
			g.Target = map[string][]TopicPartition{}
			for _, m := range sg.Target {
				g.Target[m.MemberID] = slices.Clone(m.Partitions)
			}
		}
		for _, m := range sg.Members {
			g.Members[m.MemberID] = m
		}
		for _, c := range sg.Offsets {
			g.Offsets[TopicPartition{c.Topic, c.Partition}] = c
		}
	}
}

// entries is the number of committed offsets and members the state
// holds: the size of its snapshot.
func (s *State) entries() int {
	n := 0
	for _, g := range s.groups {
		n += len(g.Offsets) + len(g.Members)
		if g.Classic != nil {
			n += len(g.Classic.Members)
		}
	}
	return n
}

// snapshot returns the records that restate every group of the state, in
// name order, each at most about chunkBytes long (a single member or
// commit larger than that has a record of its own), with their sizes.
func (s *State) snapshot(chunkBytes int) []sizedRecord {
	var out []sizedRecord
	for _, name := range s.Groups() {
		g := s.groups[name]
		cur := &SnapshotGroup{First: true, GroupEpoch: g.GroupEpoch}
		size := 0
		for _, id := range slices.Sorted(maps.Keys(g.Target)) {
			cur.Target = append(cur.Target, MemberAssignment{MemberID: id, Partitions: slices.Clone(g.Target[id])})
			size += len(id) + 8*len(g.Target[id]) + 16
		}
		flush := func(next int) {
			if size+next > chunkBytes && (len(cur.Members) > 0 || len(cur.Offsets) > 0) {
				out = append(out, sizedRecord{Record{Group: name, Kind: KindSnapshotGroup, Snapshot: cur}, len(name) + size})
				cur, size = &SnapshotGroup{}, 0
			}
			size += next
		}
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			m := g.Members[id]
			n := 32 + len(m.MemberID) + len(m.InstanceID) + len(m.Host)
			for _, t := range m.Topics {
				n += 2 + len(t)
			}
			flush(n)
			cur.Members = append(cur.Members, m)
		}
		tps := slices.SortedFunc(maps.Keys(g.Offsets), func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		for _, tp := range tps {
			c := g.Offsets[tp]
			flush(48 + len(c.Topic) + len(c.TopicID) + len(c.Metadata) + len(c.MemberID))
			cur.Offsets = append(cur.Offsets, c)
		}
		out = append(out, sizedRecord{Record{Group: name, Kind: KindSnapshotGroup, Snapshot: cur}, len(name) + size})
		if g.Classic != nil {
			out = append(out, sizedRecord{Record{Group: name, Kind: KindClassic, Classic: g.Classic}, len(name) + classicSize(g.Classic)})
		}
		if g.Classic == nil && g.ClassicFloor > 0 || g.Classic != nil && g.ClassicFloor > g.Classic.Generation {
			out = append(out, sizedRecord{Record{Group: name, Kind: KindClassic, Classic: &ClassicGeneration{Generation: g.ClassicFloor}}, len(name) + 32})
		}
	}
	return out
}

// classicSize is about the bytes of a classic generation's record.
func classicSize(g *ClassicGeneration) int {
	n := 32 + len(g.ProtocolType) + len(g.Protocol) + len(g.Leader)
	for i := range g.Members {
		n += classicMemberBytes(&g.Members[i]) + len(g.Members[i].Assignment)
	}
	return n
}

// sizedRecord is a record with about the bytes it takes in a batch, as
// counted while it was built: a snapshot is split into appends by these
// counts, without encoding each record once more to measure it.
type sizedRecord struct {
	Record
	size int
}

// CheckCommit says whether c may be committed to group: nil, or why not.
// logEnd is the partition's log end as its leader last said (-1 when
// the partition does not exist). A member epoch of -1 is a group used as a
// progress identity only, with no members; such a group refuses commits
// from members, and a group with members refuses them from outside. With
// reset, an offset below the committed one is allowed (an operator's
// explicit reset, refused while the group has members).
func (s *State) CheckCommit(group string, c Commit, logEnd int64, reset bool) error {
	tp := TopicPartition{c.Topic, c.Partition}
	if logEnd < 0 {
		return fmt.Errorf("%w: %s/%d does not exist", ErrInvalidOffset, c.Topic, c.Partition)
	}
	if c.Offset < 0 || c.Offset > logEnd {
		return fmt.Errorf("%w: offset %d of %s/%d, whose log ends at %d", ErrInvalidOffset, c.Offset, c.Topic, c.Partition, logEnd)
	}
	g := s.groups[group]
	switch {
	case reset:
		if g != nil && len(g.Members) > 0 {
			return fmt.Errorf("%w: group %q has %d members; offsets are reset only while it has none", ErrGroupNotEmpty, group, len(g.Members))
		}
	case c.MemberEpoch == -1:
		if g != nil && len(g.Members) > 0 {
			return fmt.Errorf("%w: group %q has members; a commit from outside it is refused", ErrUnknownMember, group)
		}
	default:
		var m Member
		ok := false
		if g != nil {
			m, ok = g.Members[c.MemberID]
		}
		switch {
		case !ok:
			return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, c.MemberID, group)
		case m.MemberEpoch != c.MemberEpoch:
			return fmt.Errorf("%w: member %q of group %q is at epoch %d, the commit at %d", ErrFencedMember, c.MemberID, group, m.MemberEpoch, c.MemberEpoch)
		case g.Owners[tp] != c.MemberID:
			return fmt.Errorf("%w: member %q of group %q does not own %s/%d", ErrNotOwner, c.MemberID, group, c.Topic, c.Partition)
		}
	}
	if g != nil && !reset {
		// An offset of an earlier incarnation of the topic (deleted and
		// created again) says nothing about this one.
		if old, ok := g.Offsets[tp]; ok && old.TopicID == c.TopicID && c.Offset < old.Offset {
			return fmt.Errorf("%w: group %q committed %d for %s/%d; %d is below it (an explicit reset can move it back)", ErrOffsetRegression, group, old.Offset, c.Topic, c.Partition, c.Offset)
		}
	}
	return nil
}

// Committed returns the committed offset of a partition, and whether
// there is one: "never committed" is not a committed 0.
func (s *State) Committed(group string, topic string, partition int32) (Commit, bool) {
	g := s.groups[group]
	if g == nil {
		return Commit{}, false
	}
	c, ok := g.Offsets[TopicPartition{topic, partition}]
	return c, ok
}

// Own records that member owns tps now. The caller checked, with
// Reconcile, that no other member owns them.
func (s *State) Own(group, member string, tps ...TopicPartition) {
	g := s.groups[group]
	if g == nil {
		return
	}
	for _, tp := range tps {
		g.Owners[tp] = member
	}
}

// Release records that member no longer owns tps.
func (s *State) Release(group, member string, tps ...TopicPartition) {
	g := s.groups[group]
	if g == nil {
		return
	}
	for _, tp := range tps {
		if g.Owners[tp] == member {
			delete(g.Owners, tp)
		}
	}
}
