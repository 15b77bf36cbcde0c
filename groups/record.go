package groups

import (
	"errors"
	"fmt"

	"gostream/metadata"
	"gostream/transport"
)

// ErrMalformed marks a record of __consumer_offsets that cannot be
// decoded.
var ErrMalformed = errors.New("groups: malformed record")

// Kind says what a record of a group's log holds.
type Kind uint8

// The kinds of records.
const (
	KindCommit       Kind = 1 // a committed offset
	KindMember       Kind = 2 // a member joined or changed
	KindMemberGone   Kind = 3 // a member left, expired or was fenced
	KindAssignment   Kind = 4 // a new target assignment, at a new group epoch
	KindReset        Kind = 5 // an operator's explicit reset of offsets
	KindGroupDeleted Kind = 6 // the group was deleted
	// A snapshot: a start marker, every group's state in one or more
	// snapshot-group records, and an end marker naming the start's offset,
	// appended back to back (docs/groups.md, "Snapshots").
	KindSnapshotStart Kind = 7
	KindSnapshotGroup Kind = 8
	KindSnapshotEnd   Kind = 9
	// KindClassic is a Kafka-protocol (classic) group's generation
	// (docs/kafka-groups.md): written when a join phase completes, when
	// the leader's assignments are set, when a static member is replaced
	// and when the group empties. A snapshot restates it too.
	KindClassic Kind = 10
	// KindOffsetsDeleted is committed offsets deleted (Kafka's
	// OffsetDelete, gostream-ctl group delete-offsets): the partitions
	// whose offsets are gone, and who asked.
	KindOffsetsDeleted Kind = 11
)

func (k Kind) String() string {
	switch k {
	case KindCommit:
		return "commit"
	case KindMember:
		return "member"
	case KindMemberGone:
		return "member-gone"
	case KindAssignment:
		return "assignment"
	case KindReset:
		return "reset"
	case KindGroupDeleted:
		return "group-deleted"
	case KindSnapshotStart:
		return "snapshot-start"
	case KindSnapshotGroup:
		return "snapshot-group"
	case KindSnapshotEnd:
		return "snapshot-end"
	case KindClassic:
		return "classic-generation"
	case KindOffsetsDeleted:
		return "offsets-deleted"
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// recordVersion is the first byte of every record's value.
const recordVersion = 1

// Bounds of what one record may hold.
const (
	MaxMetadataBytes = 4 << 10 // a commit's metadata string
	MaxMembers       = 1000    // members of one group
	maxIDBytes       = 255     // member ids, instance ids, hosts, reasons
)

// Bounds of a classic group's generation record.
const (
	// MaxClassicMemberBytes bounds, per member, its protocols' names and
	// metadata together, and its assignment (the coordinator's own bound,
	// CoordinatorConfig.MaxMemberBytes, may be lower).
	MaxClassicMemberBytes = 1 << 20
	// MaxProtocols bounds the protocols a member offers.
	MaxProtocols = 32
)

// Commit is one committed offset. MemberEpoch is -1 for a group used as a
// progress identity only (explicit partitions, no membership).
type Commit struct {
	Topic       string
	TopicID     string
	Partition   int32
	Offset      int64
	Metadata    string
	MemberID    string
	MemberEpoch int32
	TimeMs      int64 // when the coordinator accepted it, Unix milliseconds
}

// Member is a member as it joined or last changed.
type Member struct {
	MemberID         string
	InstanceID       string // static membership; empty when dynamic
	Host             string
	Topics           []string // the subscription
	SessionTimeoutMs int32
	MemberEpoch      int32
}

// MemberGone records a member removed from its group, and why.
type MemberGone struct {
	MemberID string
	Reason   string // left, session expired, fenced
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// MemberAssignment is one member's part of a target assignment.
type MemberAssignment struct {
	MemberID   string
	Partitions []TopicPartition
}

// Assignment is a group's target assignment at a group epoch.
type Assignment struct {
	GroupEpoch int32
	Members    []MemberAssignment
}

// Reset is an operator's explicit reset: the offsets it set, which may be
// below those committed.
type Reset struct {
	Requester string
	Offsets   []Commit
}

// SnapshotGroup is one group's state, or part of it, in a snapshot. The
// first record of a group (First) carries its group epoch and target
// assignment; it and the records after it carry its members and committed
// offsets, as many as fit.
type SnapshotGroup struct {
	First      bool
	GroupEpoch int32
	Target     []MemberAssignment
	Members    []Member
	Offsets    []Commit
}

// Protocol is one protocol a classic member offers: its name and the
// member's metadata for it, bytes the coordinator does not read.
type Protocol struct {
	Name     string
	Metadata []byte
}

// ClassicMember is a member of a classic group's generation.
type ClassicMember struct {
	MemberID           string
	InstanceID         string // static membership; empty when dynamic
	ClientID           string
	ClientHost         string
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	Protocols          []Protocol
	// Assignment is what the leader assigned it (bytes the coordinator
	// does not read); nil until the generation is stable.
	Assignment []byte
}

// ClassicGeneration is a classic group's state at a generation. Stable
// says its assignments are set (or, with no members, that the group is
// empty); a generation that is not stable had its join phase completed
// and waited for the leader's assignments.
type ClassicGeneration struct {
	Generation   int32
	Stable       bool
	ProtocolType string
	Protocol     string
	Leader       string
	Members      []ClassicMember
}

// OffsetsDeleted is committed offsets deleted: Partitions (at least one,
// each once) have none from then on. Requester names who asked, for the
// record.
type OffsetsDeleted struct {
	Requester  string
	Partitions []TopicPartition
}

// SnapshotEnd ends a snapshot: Start is the offset of its start marker.
// A snapshot is complete, and may stand for the log before it, only when
// its end follows its start with nothing but its own records between.
type SnapshotEnd struct {
	Start   int64
	Groups  int32
	Records int32
}

// Record is one record of a group's log. Exactly the field of its Kind is
// set (none for KindGroupDeleted and KindSnapshotStart). The snapshot
// markers belong to no group: their Group is empty.
type Record struct {
	Group      string
	Kind       Kind
	Commit     *Commit
	Member     *Member
	Gone       *MemberGone
	Assignment *Assignment
	Reset      *Reset
	Snapshot   *SnapshotGroup
	End        *SnapshotEnd
	Classic    *ClassicGeneration
	Deleted    *OffsetsDeleted
}

// marker reports whether k is a snapshot marker, a record of no group.
func (k Kind) marker() bool { return k == KindSnapshotStart || k == KindSnapshotEnd }

// Encode returns the record's key (the group's name, which routes it to
// its partition) and value.
func (r Record) Encode() (key, value []byte, err error) {
	if err := checkKey(r.Kind, r.Group); err != nil {
		return nil, nil, err
	}
	var e transport.Encoder
	e.Int8(recordVersion)
	e.Int8(int8(r.Kind))
	switch r.Kind {
	case KindCommit:
		if r.Commit == nil {
			return nil, nil, fmt.Errorf("%w: a commit record without its commit", ErrMalformed)
		}
		encodeCommit(&e, r.Commit)
	case KindMember:
		if r.Member == nil {
			return nil, nil, fmt.Errorf("%w: a member record without its member", ErrMalformed)
		}
		encodeMember(&e, r.Member)
	case KindMemberGone:
		if r.Gone == nil {
			return nil, nil, fmt.Errorf("%w: a member-gone record without its member", ErrMalformed)
		}
		e.String(r.Gone.MemberID)
		e.String(r.Gone.Reason)
	case KindAssignment:
		if r.Assignment == nil {
			return nil, nil, fmt.Errorf("%w: an assignment record without its assignment", ErrMalformed)
		}
		e.Int32(r.Assignment.GroupEpoch)
		encodeTarget(&e, r.Assignment.Members)
	case KindReset:
		if r.Reset == nil {
			return nil, nil, fmt.Errorf("%w: a reset record without its offsets", ErrMalformed)
		}
		e.String(r.Reset.Requester)
		encodeCommits(&e, r.Reset.Offsets)
	case KindGroupDeleted, KindSnapshotStart:
	case KindSnapshotGroup:
		sg := r.Snapshot
		if sg == nil {
			return nil, nil, fmt.Errorf("%w: a snapshot-group record without its group", ErrMalformed)
		}
		e.Bool(sg.First)
		e.Int32(sg.GroupEpoch)
		encodeTarget(&e, sg.Target)
		e.Count(len(sg.Members))
		for i := range sg.Members {
			encodeMember(&e, &sg.Members[i])
		}
		encodeCommits(&e, sg.Offsets)
	case KindClassic:
		if r.Classic == nil {
			return nil, nil, fmt.Errorf("%w: a classic-generation record without its generation", ErrMalformed)
		}
		encodeClassic(&e, r.Classic)
	case KindOffsetsDeleted:
		if r.Deleted == nil {
			return nil, nil, fmt.Errorf("%w: an offsets-deleted record without its partitions", ErrMalformed)
		}
		e.String(r.Deleted.Requester)
		encodePartitions(&e, r.Deleted.Partitions)
	case KindSnapshotEnd:
		if r.End == nil {
			return nil, nil, fmt.Errorf("%w: a snapshot-end record without its start", ErrMalformed)
		}
		e.Int64(r.End.Start)
		e.Int32(r.End.Groups)
		e.Int32(r.End.Records)
	default:
		return nil, nil, fmt.Errorf("%w: unknown kind %d", ErrMalformed, r.Kind)
	}
	value = e.Bytes()
	// What Encode writes, Decode must take back: a record that breaks a
	// bound is refused here, before it is written.
	if _, err := Decode([]byte(r.Group), value); err != nil {
		return nil, nil, err
	}
	return []byte(r.Group), value, nil
}

func encodeClassic(e *transport.Encoder, g *ClassicGeneration) {
	e.Int32(g.Generation)
	e.Bool(g.Stable)
	e.String(g.ProtocolType)
	e.String(g.Protocol)
	e.String(g.Leader)
	e.Count(len(g.Members))
	for i := range g.Members {
		m := &g.Members[i]
		e.String(m.MemberID)
		e.String(m.InstanceID)
		e.String(m.ClientID)
		e.String(m.ClientHost)
		e.Int32(m.SessionTimeoutMs)
		e.Int32(m.RebalanceTimeoutMs)
		e.Count(len(m.Protocols))
		for _, p := range m.Protocols {
			e.String(p.Name)
			e.Bytes32(p.Metadata)
		}
		e.Bool(m.Assignment != nil)
		e.Bytes32(m.Assignment)
	}
}

// decodeClassic reads what encodeClassic writes, and what is wrong with
// it.
func decodeClassic(d *transport.Decoder) (*ClassicGeneration, error) {
	g := &ClassicGeneration{Generation: d.Int32(), Stable: d.Bool(), ProtocolType: d.String(), Protocol: d.String(), Leader: d.String()}
	problem := errors.Join(checkID("protocol type", g.ProtocolType, true), checkID("protocol", g.Protocol, true), checkID("leader", g.Leader, true))
	if g.Generation < 0 {
		problem = errors.Join(problem, fmt.Errorf("generation %d", g.Generation))
	}
	n := d.Count(2 + 2 + 2 + 2 + 4 + 4 + 4 + 1 + 4)
	if n > MaxMembers {
		return g, errors.Join(problem, fmt.Errorf("%d members, at most %d", n, MaxMembers))
	}
	leaderFound := g.Leader == ""
	for i := 0; i < n; i++ {
		m := ClassicMember{MemberID: d.String(), InstanceID: d.String(), ClientID: d.String(), ClientHost: d.String(),
			SessionTimeoutMs: d.Int32(), RebalanceTimeoutMs: d.Int32()}
		problem = errors.Join(problem, checkID("member id", m.MemberID, false), checkID("instance id", m.InstanceID, true),
			checkID("client id", m.ClientID, true), checkID("client host", m.ClientHost, true))
		if m.SessionTimeoutMs <= 0 || m.RebalanceTimeoutMs <= 0 {
			problem = errors.Join(problem, fmt.Errorf("member %q: session timeout %d ms, rebalance timeout %d ms", m.MemberID, m.SessionTimeoutMs, m.RebalanceTimeoutMs))
		}
		np := d.Count(2 + 4)
		if np > MaxProtocols {
			return g, errors.Join(problem, fmt.Errorf("member %q offers %d protocols, at most %d", m.MemberID, np, MaxProtocols))
		}
		size := 0
		for j := 0; j < np; j++ {
			p := Protocol{Name: d.String(), Metadata: d.Bytes32()}
			problem = errors.Join(problem, checkID("protocol", p.Name, false))
			size += len(p.Name) + len(p.Metadata)
			m.Protocols = append(m.Protocols, p)
		}
		if d.Bool() {
			m.Assignment = d.Bytes32()
			if m.Assignment == nil {
				m.Assignment = []byte{}
			}
		} else if b := d.Bytes32(); len(b) > 0 {
			problem = errors.Join(problem, fmt.Errorf("member %q: an assignment marked absent has %d bytes", m.MemberID, len(b)))
		}
		if size > MaxClassicMemberBytes || len(m.Assignment) > MaxClassicMemberBytes {
			problem = errors.Join(problem, fmt.Errorf("member %q: protocols of %d bytes, an assignment of %d, at most %d each", m.MemberID, size, len(m.Assignment), MaxClassicMemberBytes))
		}
		leaderFound = leaderFound || m.MemberID == g.Leader
		g.Members = append(g.Members, m)
	}
	if !leaderFound {
		problem = errors.Join(problem, fmt.Errorf("leader %q is not a member", g.Leader))
	}
	return g, problem
}

func encodeCommit(e *transport.Encoder, c *Commit) {
	e.String(c.Topic)
	e.String(c.TopicID)
	e.Int32(c.Partition)
	e.Int64(c.Offset)
	e.String(c.Metadata)
	e.String(c.MemberID)
	e.Int32(c.MemberEpoch)
	e.Int64(c.TimeMs)
}

func encodeCommits(e *transport.Encoder, cs []Commit) {
	e.Count(len(cs))
	for i := range cs {
		encodeCommit(e, &cs[i])
	}
}

func encodeMember(e *transport.Encoder, m *Member) {
	e.String(m.MemberID)
	e.String(m.InstanceID)
	e.String(m.Host)
	e.Strings(m.Topics)
	e.Int32(m.SessionTimeoutMs)
	e.Int32(m.MemberEpoch)
}

func encodeTarget(e *transport.Encoder, members []MemberAssignment) {
	e.Count(len(members))
	for _, m := range members {
		e.String(m.MemberID)
		encodePartitions(e, m.Partitions)
	}
}

func encodePartitions(e *transport.Encoder, tps []TopicPartition) {
	e.Count(len(tps))
	for _, tp := range tps {
		e.String(tp.Topic)
		e.Int32(tp.Partition)
	}
}

// Decode reads a record from its key and value. Anything Encode would not
// have written is refused with an error matching ErrMalformed.
func Decode(key, value []byte) (Record, error) {
	r := Record{Group: string(key)}
	if len(value) < 2 {
		return Record{}, fmt.Errorf("%w: a value of %d bytes", ErrMalformed, len(value))
	}
	d := transport.NewDecoder(value)
	if v := d.Int8(); v != recordVersion {
		return Record{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, v, recordVersion)
	}
	r.Kind = Kind(d.Int8())
	if err := checkKey(r.Kind, r.Group); err != nil {
		return Record{}, err
	}
	var problem error
	switch r.Kind {
	case KindCommit:
		r.Commit = decodeCommit(d)
		problem = checkCommit(r.Commit)
	case KindMember:
		r.Member = decodeMember(d)
		problem = checkMember(r.Member)
	case KindMemberGone:
		r.Gone = &MemberGone{MemberID: d.String(), Reason: d.String()}
		problem = errors.Join(checkID("member id", r.Gone.MemberID, false), checkID("reason", r.Gone.Reason, true))
	case KindAssignment:
		a := &Assignment{GroupEpoch: d.Int32()}
		a.Members, problem = decodeTarget(d)
		if a.GroupEpoch < 0 {
			problem = errors.Join(problem, fmt.Errorf("group epoch %d", a.GroupEpoch))
		}
		r.Assignment = a
	case KindReset:
		rs := &Reset{Requester: d.String()}
		rs.Offsets, problem = decodeCommits(d)
		problem = errors.Join(problem, checkID("requester", rs.Requester, true))
		r.Reset = rs
	case KindGroupDeleted, KindSnapshotStart:
	case KindSnapshotGroup:
		sg := &SnapshotGroup{First: d.Bool(), GroupEpoch: d.Int32()}
		sg.Target, problem = decodeTarget(d)
		n := d.Count(2 + 2 + 2 + 4 + 4 + 4)
		if n > MaxMembers {
			problem = errors.Join(problem, fmt.Errorf("%d members, at most %d", n, MaxMembers))
			n = 0
		}
		for i := 0; i < n; i++ {
			m := decodeMember(d)
			problem = errors.Join(problem, checkMember(m))
			sg.Members = append(sg.Members, *m)
		}
		var cproblem error
		sg.Offsets, cproblem = decodeCommits(d)
		problem = errors.Join(problem, cproblem)
		if sg.GroupEpoch < 0 || !sg.First && (sg.GroupEpoch != 0 || len(sg.Target) > 0) {
			problem = errors.Join(problem, fmt.Errorf("group epoch %d and a target of %d members in a record that is not its group's first", sg.GroupEpoch, len(sg.Target)))
		}
		r.Snapshot = sg
	case KindClassic:
		r.Classic, problem = decodeClassic(d)
	case KindOffsetsDeleted:
		r.Deleted, problem = decodeOffsetsDeleted(d)
	case KindSnapshotEnd:
		r.End = &SnapshotEnd{Start: d.Int64(), Groups: d.Int32(), Records: d.Int32()}
		if r.End.Start < 0 || r.End.Groups < 0 || r.End.Records < 0 {
			problem = fmt.Errorf("start %d, %d groups, %d records", r.End.Start, r.End.Groups, r.End.Records)
		}
	default:
		return Record{}, fmt.Errorf("%w: unknown kind %d", ErrMalformed, r.Kind)
	}
	if err := d.Finish(); err != nil {
		return Record{}, fmt.Errorf("%w: %s record of group %q: %v", ErrMalformed, r.Kind, r.Group, err)
	}
	if problem != nil {
		return Record{}, fmt.Errorf("%w: %s record of group %q: %v", ErrMalformed, r.Kind, r.Group, problem)
	}
	return r, nil
}

// decodeOffsetsDeleted reads what an offsets-deleted record holds, and
// what is wrong with it: no partition, one twice, more than a commit may
// name.
func decodeOffsetsDeleted(d *transport.Decoder) (*OffsetsDeleted, error) {
	od := &OffsetsDeleted{Requester: d.String(), Partitions: decodePartitions(d)}
	problem := checkID("requester", od.Requester, true)
	if n := len(od.Partitions); n == 0 || n > MaxCommitOffsets {
		problem = errors.Join(problem, fmt.Errorf("%d partitions (1 to %d)", n, MaxCommitOffsets))
	}
	seen := make(map[TopicPartition]bool, len(od.Partitions))
	for _, tp := range od.Partitions {
		if seen[tp] {
			problem = errors.Join(problem, fmt.Errorf("%s/%d twice", tp.Topic, tp.Partition))
		}
		seen[tp] = true
		problem = errors.Join(problem, checkTopic(tp.Topic), checkPartition(tp.Partition))
	}
	return od, problem
}

func decodeCommit(d *transport.Decoder) *Commit {
	return &Commit{Topic: d.String(), TopicID: d.String(), Partition: d.Int32(), Offset: d.Int64(),
		Metadata: d.String(), MemberID: d.String(), MemberEpoch: d.Int32(), TimeMs: d.Int64()}
}

// decodeCommits reads what encodeCommits writes, and what is wrong with
// the commits.
func decodeCommits(d *transport.Decoder) ([]Commit, error) {
	n := d.Count(2 + 2 + 4 + 8 + 2 + 2 + 4 + 8)
	var out []Commit
	var problem error
	for i := 0; i < n; i++ {
		c := decodeCommit(d)
		problem = errors.Join(problem, checkCommit(c))
		out = append(out, *c)
	}
	return out, problem
}

func decodeMember(d *transport.Decoder) *Member {
	return &Member{MemberID: d.String(), InstanceID: d.String(), Host: d.String(), Topics: d.Strings(),
		SessionTimeoutMs: d.Int32(), MemberEpoch: d.Int32()}
}

func checkMember(m *Member) error {
	problem := errors.Join(checkID("member id", m.MemberID, false), checkID("instance id", m.InstanceID, true), checkID("host", m.Host, true))
	for _, t := range m.Topics {
		problem = errors.Join(problem, checkTopic(t))
	}
	if m.SessionTimeoutMs <= 0 || m.MemberEpoch < 0 {
		problem = errors.Join(problem, fmt.Errorf("session timeout %d ms, member epoch %d", m.SessionTimeoutMs, m.MemberEpoch))
	}
	return problem
}

func decodeTarget(d *transport.Decoder) ([]MemberAssignment, error) {
	n := d.Count(2 + 4)
	if n > MaxMembers {
		return nil, fmt.Errorf("%d members, at most %d", n, MaxMembers)
	}
	var out []MemberAssignment
	var problem error
	for i := 0; i < n; i++ {
		m := MemberAssignment{MemberID: d.String(), Partitions: decodePartitions(d)}
		problem = errors.Join(problem, checkID("member id", m.MemberID, false))
		for _, tp := range m.Partitions {
			problem = errors.Join(problem, checkTopic(tp.Topic), checkPartition(tp.Partition))
		}
		out = append(out, m)
	}
	return out, problem
}

func decodePartitions(d *transport.Decoder) []TopicPartition {
	n := d.Count(2 + 4)
	if n == 0 {
		return nil
	}
	out := make([]TopicPartition, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, TopicPartition{Topic: d.String(), Partition: d.Int32()})
	}
	return out
}

func checkCommit(c *Commit) error {
	var errs []error
	errs = append(errs, checkTopic(c.Topic), checkPartition(c.Partition), checkID("member id", c.MemberID, true))
	if c.Offset < 0 {
		errs = append(errs, fmt.Errorf("offset %d", c.Offset))
	}
	if len(c.Metadata) > MaxMetadataBytes {
		errs = append(errs, fmt.Errorf("metadata of %d bytes, at most %d", len(c.Metadata), MaxMetadataBytes))
	}
	if c.MemberEpoch < -1 {
		errs = append(errs, fmt.Errorf("member epoch %d", c.MemberEpoch))
	}
	return errors.Join(errs...)
}

// checkKey checks a record's key: a snapshot marker has none, every
// other record its group's name.
func checkKey(k Kind, group string) error {
	if k.marker() {
		if group != "" {
			return fmt.Errorf("%w: a %s record keyed %q: markers belong to no group", ErrMalformed, k, group)
		}
		return nil
	}
	return checkGroup(group)
}

// checkGroup applies the topic-name rules to a group's name.
func checkGroup(name string) error {
	if err := metadata.ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: group name: %v", ErrMalformed, err)
	}
	return nil
}

func checkTopic(name string) error {
	if err := metadata.ValidateTopicName(name); err != nil {
		return fmt.Errorf("topic: %v", err)
	}
	return nil
}

func checkPartition(p int32) error {
	if p < 0 {
		return fmt.Errorf("partition %d", p)
	}
	return nil
}

func checkID(what, s string, emptyOK bool) error {
	switch {
	case s == "" && !emptyOK:
		return fmt.Errorf("empty %s", what)
	case len(s) > maxIDBytes:
		return fmt.Errorf("%s of %d bytes, at most %d", what, len(s), maxIDBytes)
	}
	return nil
}
