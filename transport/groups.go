package transport

// Group APIs: committed offsets and consumer groups (docs/groups.md). Every
// one but FindCoordinator and ListGroups is answered by the group's
// coordinator, the leader of the group's partition of __consumer_offsets;
// another broker answers NotCoordinator.
const (
	// APIFindCoordinator names a group's coordinator (any broker answers,
	// from its metadata; the first use of groups creates the offsets
	// topic).
	APIFindCoordinator API = 9
	// APIOffsetCommit commits offsets for a group, all of them or none.
	APIOffsetCommit API = 10
	// APIOffsetFetch returns a group's committed offsets.
	APIOffsetFetch API = 11
	// APIGroupHeartbeat joins, heartbeats and leaves a group, and carries
	// the member's assignment back.
	APIGroupHeartbeat API = 12
	// APIListGroups lists the groups of one partition of the offsets
	// topic (asked of its leader).
	APIListGroups API = 13
	// APIDescribeGroup describes one group.
	APIDescribeGroup API = 14
	// APIDeleteGroup deletes a group that has no members.
	APIDeleteGroup API = 15
)

func init() {
	apiNames[APIFindCoordinator] = "FindCoordinator"
	apiNames[APIOffsetCommit] = "OffsetCommit"
	apiNames[APIOffsetFetch] = "OffsetFetch"
	apiNames[APIGroupHeartbeat] = "GroupHeartbeat"
	apiNames[APIListGroups] = "ListGroups"
	apiNames[APIDescribeGroup] = "DescribeGroup"
	apiNames[APIDeleteGroup] = "DeleteGroup"
}

// OffsetsTopic is the internal topic that holds every group's records.
const OffsetsTopic = "__consumer_offsets"

// JoinEpoch is the member epoch of a GroupHeartbeatRequest that joins the
// group (or, with the instance id of a static member that is gone, takes
// its place back). A member's epochs are 1 and up.
const JoinEpoch int32 = 0

// NoMemberEpoch is the member epoch of a commit from outside any
// membership (a consumer of explicit partitions).
const NoMemberEpoch int32 = -1

// Leave says whether a GroupHeartbeatRequest leaves the group.
type Leave int8

// The ways to leave.
const (
	// Stay is a heartbeat.
	Stay Leave = 0
	// LeaveGroup leaves: the member's partitions go to the others.
	LeaveGroup Leave = 1
	// LeaveHeld leaves a static member's place held for its session
	// timeout, so that it comes back to it with no rebalance.
	LeaveHeld Leave = 2
)

// FindCoordinatorRequest asks who coordinates a group.
type FindCoordinatorRequest struct {
	Group string
}

// Encode implements Message.
func (r *FindCoordinatorRequest) Encode(e *Encoder) { e.String(r.Group) }

// Decode implements Message.
func (r *FindCoordinatorRequest) Decode(d *Decoder) { r.Group = d.String() }

// FindCoordinatorResponse names the group's partition of the offsets topic
// and its leader.
type FindCoordinatorResponse struct {
	Partition   int32
	Leader      int32 // -1: none now
	LeaderEpoch int32
	Addr        string // the leader's RPC address
}

// Encode implements Message.
func (r *FindCoordinatorResponse) Encode(e *Encoder) {
	e.Int32(r.Partition)
	e.Int32(r.Leader)
	e.Int32(r.LeaderEpoch)
	e.String(r.Addr)
}

// Decode implements Message.
func (r *FindCoordinatorResponse) Decode(d *Decoder) {
	r.Partition = d.Int32()
	r.Leader = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.Addr = d.String()
}

// CommitOffset is one offset to commit.
type CommitOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
}

// OffsetCommitRequest commits offsets for a group: every one of them is
// checked, and then all are written in one batch, or none. A member
// commits with its member id and epoch; a consumer of explicit partitions
// with NoMemberEpoch. Reset is an operator's explicit reset, which may move
// offsets back and is refused while the group has members.
type OffsetCommitRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	Reset       bool
	Requester   string // who asked for a reset, for the record
	Offsets     []CommitOffset
}

// Encode implements Message.
func (r *OffsetCommitRequest) Encode(e *Encoder) {
	e.String(r.Group)
	e.String(r.MemberID)
	e.Int32(r.MemberEpoch)
	e.Bool(r.Reset)
	e.String(r.Requester)
	e.Count(len(r.Offsets))
	for _, o := range r.Offsets {
		e.String(o.Topic)
		e.Int32(o.Partition)
		e.Int64(o.Offset)
		e.String(o.Metadata)
	}
}

// Decode implements Message.
func (r *OffsetCommitRequest) Decode(d *Decoder) {
	r.Group = d.String()
	r.MemberID = d.String()
	r.MemberEpoch = d.Int32()
	r.Reset = d.Bool()
	r.Requester = d.String()
	n := d.Count(2 + 4 + 8 + 2)
	if n > 0 {
		r.Offsets = make([]CommitOffset, n)
	}
	for i := range r.Offsets {
		o := &r.Offsets[i]
		o.Topic = d.String()
		o.Partition = d.Int32()
		o.Offset = d.Int64()
		o.Metadata = d.String()
	}
}

// OffsetFetchRequest asks for a group's committed offsets: those of the
// topics named, or every one with none named.
type OffsetFetchRequest struct {
	Group  string
	Topics []string
}

// Encode implements Message.
func (r *OffsetFetchRequest) Encode(e *Encoder) {
	e.String(r.Group)
	e.Strings(r.Topics)
}

// Decode implements Message.
func (r *OffsetFetchRequest) Decode(d *Decoder) {
	r.Group = d.String()
	r.Topics = d.Strings()
}

// CommittedOffset is one committed offset as the coordinator holds it.
type CommittedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	Metadata    string
	MemberID    string
	MemberEpoch int32
	TimeMs      int64 // when the coordinator accepted it
}

func encodeCommitted(e *Encoder, o *CommittedOffset) {
	e.String(o.Topic)
	e.Int32(o.Partition)
	e.Int64(o.Offset)
	e.String(o.Metadata)
	e.String(o.MemberID)
	e.Int32(o.MemberEpoch)
	e.Int64(o.TimeMs)
}

func decodeCommitted(d *Decoder) []CommittedOffset {
	n := d.Count(2 + 4 + 8 + 2 + 2 + 4 + 8)
	if n == 0 {
		return nil
	}
	out := make([]CommittedOffset, n)
	for i := range out {
		o := &out[i]
		o.Topic = d.String()
		o.Partition = d.Int32()
		o.Offset = d.Int64()
		o.Metadata = d.String()
		o.MemberID = d.String()
		o.MemberEpoch = d.Int32()
		o.TimeMs = d.Int64()
	}
	return out
}

// OffsetFetchResponse holds the committed offsets asked for. A partition
// that is not in it was never committed, which is not a committed 0.
type OffsetFetchResponse struct {
	Offsets []CommittedOffset
}

// Encode implements Message.
func (r *OffsetFetchResponse) Encode(e *Encoder) {
	e.Count(len(r.Offsets))
	for i := range r.Offsets {
		encodeCommitted(e, &r.Offsets[i])
	}
}

// Decode implements Message.
func (r *OffsetFetchResponse) Decode(d *Decoder) { r.Offsets = decodeCommitted(d) }

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

func encodeTopicPartitions(e *Encoder, tps []TopicPartitions) {
	e.Count(len(tps))
	for _, tp := range tps {
		e.String(tp.Topic)
		e.Int32s(tp.Partitions)
	}
}

func decodeTopicPartitions(d *Decoder) []TopicPartitions {
	n := d.Count(2 + 4)
	if n == 0 {
		return nil
	}
	out := make([]TopicPartitions, n)
	for i := range out {
		out[i].Topic = d.String()
		out[i].Partitions = d.Int32s()
	}
	return out
}

// GroupHeartbeatRequest is a member's one request for its membership: it
// joins (MemberEpoch JoinEpoch, no MemberID), heartbeats (its id and
// current epoch, and the partitions it owns now) and leaves (its id and
// epoch, and Leave). Topics is the subscription, sent every time; a change
// of it rebalances the group.
type GroupHeartbeatRequest struct {
	Group            string
	MemberID         string
	InstanceID       string // static membership; empty when dynamic
	MemberEpoch      int32
	Topics           []string
	SessionTimeoutMs int32
	Owned            []TopicPartitions
	Host             string // the client's name for itself, for describe
	Leave            Leave
}

// Encode implements Message.
func (r *GroupHeartbeatRequest) Encode(e *Encoder) {
	e.String(r.Group)
	e.String(r.MemberID)
	e.String(r.InstanceID)
	e.Int32(r.MemberEpoch)
	e.Strings(r.Topics)
	e.Int32(r.SessionTimeoutMs)
	encodeTopicPartitions(e, r.Owned)
	e.String(r.Host)
	e.Int8(int8(r.Leave))
}

// Decode implements Message.
func (r *GroupHeartbeatRequest) Decode(d *Decoder) {
	r.Group = d.String()
	r.MemberID = d.String()
	r.InstanceID = d.String()
	r.MemberEpoch = d.Int32()
	r.Topics = d.Strings()
	r.SessionTimeoutMs = d.Int32()
	r.Owned = decodeTopicPartitions(d)
	r.Host = d.String()
	r.Leave = Leave(d.Int8())
}

// GroupHeartbeatResponse gives a member its id and epoch, and the
// partitions it may own now: its part of the group's target assignment,
// less any partition another member has not released yet. A partition the
// member owns and that is not in Assigned it must give up (commit what it
// has processed, stop fetching it) and leave out of its next heartbeat's
// Owned. It heartbeats again within HeartbeatIntervalMs.
type GroupHeartbeatResponse struct {
	MemberID            string
	MemberEpoch         int32
	GroupEpoch          int32
	HeartbeatIntervalMs int32
	Assigned            []TopicPartitions
}

// Encode implements Message.
func (r *GroupHeartbeatResponse) Encode(e *Encoder) {
	e.String(r.MemberID)
	e.Int32(r.MemberEpoch)
	e.Int32(r.GroupEpoch)
	e.Int32(r.HeartbeatIntervalMs)
	encodeTopicPartitions(e, r.Assigned)
}

// Decode implements Message.
func (r *GroupHeartbeatResponse) Decode(d *Decoder) {
	r.MemberID = d.String()
	r.MemberEpoch = d.Int32()
	r.GroupEpoch = d.Int32()
	r.HeartbeatIntervalMs = d.Int32()
	r.Assigned = decodeTopicPartitions(d)
}

// ListGroupsRequest asks the leader of one partition of the offsets topic
// for its groups.
type ListGroupsRequest struct {
	Partition int32
}

// Encode implements Message.
func (r *ListGroupsRequest) Encode(e *Encoder) { e.Int32(r.Partition) }

// Decode implements Message.
func (r *ListGroupsRequest) Decode(d *Decoder) { r.Partition = d.Int32() }

// GroupSummary is one group in a list.
type GroupSummary struct {
	Name       string
	State      string // stable, rebalancing, empty
	Members    int32
	GroupEpoch int32
}

// ListGroupsResponse lists groups.
type ListGroupsResponse struct {
	Groups []GroupSummary
}

// Encode implements Message.
func (r *ListGroupsResponse) Encode(e *Encoder) {
	e.Count(len(r.Groups))
	for _, g := range r.Groups {
		e.String(g.Name)
		e.String(g.State)
		e.Int32(g.Members)
		e.Int32(g.GroupEpoch)
	}
}

// Decode implements Message.
func (r *ListGroupsResponse) Decode(d *Decoder) {
	n := d.Count(2 + 2 + 4 + 4)
	if n > 0 {
		r.Groups = make([]GroupSummary, n)
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		g.Name = d.String()
		g.State = d.String()
		g.Members = d.Int32()
		g.GroupEpoch = d.Int32()
	}
}

// GroupRequest names a group (DescribeGroup, DeleteGroup).
type GroupRequest struct {
	Group string
}

// Encode implements Message.
func (r *GroupRequest) Encode(e *Encoder) { e.String(r.Group) }

// Decode implements Message.
func (r *GroupRequest) Decode(d *Decoder) { r.Group = d.String() }

// MemberDescription is one member of a group as its coordinator sees it.
type MemberDescription struct {
	MemberID         string
	InstanceID       string
	Host             string
	MemberEpoch      int32
	Topics           []string
	SessionTimeoutMs int32
	// Owned is what the member owns now; Target, what the group's target
	// assignment gives it (they differ while partitions move).
	Owned  []TopicPartitions
	Target []TopicPartitions
	// SinceHeartbeatMs is how long ago the member last heartbeat, -1
	// when it has not since this coordinator took over.
	SinceHeartbeatMs int64
	// ClientID is a Kafka-protocol member's client id (empty for a
	// native member).
	ClientID string
}

// DescribeGroupResponse describes a group.
type DescribeGroupResponse struct {
	Group       string
	State       string
	GroupEpoch  int32
	Assignor    string
	Coordinator int32
	Members     []MemberDescription
	Offsets     []CommittedOffset
	// ProtocolType is a Kafka-protocol group's ("consumer", "connect"...),
	// empty for a native group. Its members then carry their client ids.
	// Both are encoded after the offsets only for a Kafka-protocol group,
	// so a native group's description is what it was.
	ProtocolType string
}

// Encode implements Message.
func (r *DescribeGroupResponse) Encode(e *Encoder) {
	e.String(r.Group)
	e.String(r.State)
	e.Int32(r.GroupEpoch)
	e.String(r.Assignor)
	e.Int32(r.Coordinator)
	e.Count(len(r.Members))
	for _, m := range r.Members {
		e.String(m.MemberID)
		e.String(m.InstanceID)
		e.String(m.Host)
		e.Int32(m.MemberEpoch)
		e.Strings(m.Topics)
		e.Int32(m.SessionTimeoutMs)
		encodeTopicPartitions(e, m.Owned)
		encodeTopicPartitions(e, m.Target)
		e.Int64(m.SinceHeartbeatMs)
	}
	e.Count(len(r.Offsets))
	for i := range r.Offsets {
		encodeCommitted(e, &r.Offsets[i])
	}
	if r.ProtocolType != "" {
		e.String(r.ProtocolType)
		for _, m := range r.Members {
			e.String(m.ClientID)
		}
	}
}

// Decode implements Message.
func (r *DescribeGroupResponse) Decode(d *Decoder) {
	r.Group = d.String()
	r.State = d.String()
	r.GroupEpoch = d.Int32()
	r.Assignor = d.String()
	r.Coordinator = d.Int32()
	n := d.Count(2 + 2 + 2 + 4 + 4 + 4 + 4 + 4 + 8)
	if n > 0 {
		r.Members = make([]MemberDescription, n)
	}
	for i := range r.Members {
		m := &r.Members[i]
		m.MemberID = d.String()
		m.InstanceID = d.String()
		m.Host = d.String()
		m.MemberEpoch = d.Int32()
		m.Topics = d.Strings()
		m.SessionTimeoutMs = d.Int32()
		m.Owned = decodeTopicPartitions(d)
		m.Target = decodeTopicPartitions(d)
		m.SinceHeartbeatMs = d.Int64()
	}
	r.Offsets = decodeCommitted(d)
	if d.Remaining() > 0 {
		r.ProtocolType = d.String()
		if r.ProtocolType == "" {
			d.fail("an empty protocol type after the offsets")
		}
		for i := range r.Members {
			r.Members[i].ClientID = d.String()
		}
	}
}
