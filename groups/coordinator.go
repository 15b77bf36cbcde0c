package groups

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// Log is a coordinator's partition of __consumer_offsets, as its leader
// writes it.
type Log interface {
	// Append writes recs as one batch at the end of the log, in the order
	// Append is called, and returns the log end after them and a wait that
	// returns once every active replica holds them durably. An error means
	// nothing was appended; a record that does not encode (Record.Encode)
	// is refused with an error matching ErrInvalidRequest.
	Append(recs []Record) (end int64, wait func(context.Context) error, err error)
	// WaitAcked waits until every record below end is acknowledged (the
	// partition's high watermark reached end).
	WaitAcked(ctx context.Context, end int64) error
	// Done is closed once this replica no longer leads the partition (the
	// coordinator is dropped): requests waiting on it end.
	Done() <-chan struct{}
	// Confirm returns nil only if this replica still leads the partition,
	// asked of every active replica now, and an error matching
	// ErrNotCoordinator when a newer leader exists. What the coordinator
	// answers from its state is confirmed so: a coordinator cut off while
	// its partition failed over would otherwise answer from a state that
	// the new one has passed (committed offsets going back).
	Confirm(ctx context.Context) error
}

// Topics is what a coordinator needs to know of the topics its groups
// consume.
type Topics interface {
	// Topic returns a topic's id and partition count, and false when there
	// is no such topic.
	Topic(name string) (id string, partitions int32, ok bool)
	// HighWatermark returns a partition's high watermark as its leader
	// last said, asking the leader again when the one known is below
	// atLeast.
	HighWatermark(ctx context.Context, topic string, partition int32, atLeast int64) (int64, error)
}

// Session timeouts a member may ask for, and the one it gets by default.
const (
	MinSessionTimeout     = time.Second
	MaxSessionTimeout     = 300 * time.Second
	DefaultSessionTimeout = 10 * time.Second
	// MaxCommitOffsets bounds the offsets of one commit request.
	MaxCommitOffsets = 10_000
	// MaxSubscription bounds the topics of one subscription.
	MaxSubscription = 1_000
	// Assignor names the assignment strategy, for describe.
	Assignor = "range"
)

// HeartbeatInterval is how often a member with the session timeout
// session heartbeats: a tenth of it, between 50 ms and 500 ms. (The
// cap keeps a rebalance short: the members that take over a partition
// hear of it at their next heartbeat.)
func HeartbeatInterval(session time.Duration) time.Duration {
	return min(max(session/10, 50*time.Millisecond), 500*time.Millisecond)
}

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	Log    Log
	Topics Topics
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// NewMemberID returns a fresh member id (random when nil).
	NewMemberID func() string
	// OnRebalance, when set, is called for every new target assignment
	// written.
	OnRebalance func()
	// SnapshotEvery is how many records the coordinator appends (or
	// finds past the last complete snapshot when it loads) before it
	// appends a snapshot; default DefaultSnapshotEvery, negative for
	// none.
	SnapshotEvery int
	// MaxBatchBytes bounds the records of one append of a snapshot, which
	// takes as many appends as it needs; default 1 MiB.
	MaxBatchBytes int
	// OnSnapshot, when set, is called after each snapshot is appended.
	OnSnapshot func(start int64, records int)
	// InitialRebalanceDelay is how long a classic group's first join
	// phase waits for more members; 0 for DefaultInitialRebalanceDelay,
	// negative for none.
	InitialRebalanceDelay time.Duration
	// MaxMemberBytes bounds a classic member's protocols, and its
	// assignment; 0 for DefaultMaxMemberBytes, at most
	// MaxClassicMemberBytes.
	MaxMemberBytes int
	// ConsumerSession is the session timeout of the members of Kafka's
	// ConsumerGroupHeartbeat, which the server sets; 0 for
	// DefaultConsumerSession.
	ConsumerSession time.Duration
	// MaxGroups bounds the groups of the coordinator (those of its
	// partition's log, and the Kafka-protocol groups that exist only in
	// memory, with ids handed out); 0 for MaxGroups.
	MaxGroups int
}

// MaxGroups is how many groups one coordinator holds at most: a request
// that would make one more is refused with ErrInvalidRequest.
const MaxGroups = 10_000

// DefaultConsumerSession is the session timeout of a member of Kafka's
// new group protocol (Kafka's group.consumer.session.timeout.ms).
const DefaultConsumerSession = 45 * time.Second

// DefaultSnapshotEvery is how many records a coordinator appends between
// two snapshots.
const DefaultSnapshotEvery = 10_000

// liveness is what a coordinator knows of a member beyond the log: when it
// last heard from it.
type liveness struct {
	last time.Time
	// reported: the member has heartbeat to this coordinator, so its
	// owned partitions are known (a new coordinator does not know them).
	reported bool
	// held: a static member left with its place held.
	held bool
}

// Coordinator serves the groups of one partition of __consumer_offsets on
// the partition's leader. Its state is what the partition's log says
// (every record is applied in log order, when it is appended, so a
// successor that rebuilds from the log holds the same), plus what is not
// logged: when each member last heartbeat, and who owns which partition
// now. Every request is answered only once the records it depends on are
// acknowledged.
//
// A Coordinator is loaded (Load, then Start) before it serves; Load is for
// one goroutine, every other method for any.
type Coordinator struct {
	cfg CoordinatorConfig

	mu    sync.Mutex
	state *State
	end   int64 // the log end after the records applied
	live  map[string]map[string]*liveness
	// since is the number of records since the last complete snapshot;
	// the next is due at every, which is SnapshotEvery or, when the
	// state is larger, twice the entries the last snapshot restated (so
	// snapshots never take more than a third of the log).
	since, every int
	// While Load reads a snapshot: the state it restates, and the offset
	// of its start (shadow nil otherwise).
	shadow      *State
	shadowStart int64
	// lastSnapshot is the start offset of the newest complete snapshot
	// loaded or written, -1 for none.
	lastSnapshot int64
	// classic is the live state of the classic (Kafka protocol) groups
	// with members, or ids handed out (classic.go).
	classic map[string]*classicGroup
}

// NewCoordinator returns a coordinator with an empty state.
func NewCoordinator(cfg CoordinatorConfig) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = randomMemberID
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = DefaultSnapshotEvery
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 1 << 20
	}
	switch {
	case cfg.InitialRebalanceDelay == 0:
		cfg.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	case cfg.InitialRebalanceDelay < 0:
		cfg.InitialRebalanceDelay = 0
	}
	if cfg.MaxMemberBytes <= 0 {
		cfg.MaxMemberBytes = DefaultMaxMemberBytes
	}
	if cfg.ConsumerSession <= 0 {
		cfg.ConsumerSession = DefaultConsumerSession
	}
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = MaxGroups
	}
	cfg.MaxMemberBytes = min(cfg.MaxMemberBytes, MaxClassicMemberBytes)
	return &Coordinator{cfg: cfg, state: NewState(), live: map[string]map[string]*liveness{}, lastSnapshot: -1, every: cfg.SnapshotEvery,
		classic: map[string]*classicGroup{}}
}

func randomMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Load applies one record of the log, at its offset, while the coordinator
// is rebuilt. A complete snapshot (its start, its group records and its
// end, back to back) replaces the state built so far with what it
// restates, so a log whose older records retention has deleted rebuilds
// exactly from its newest complete snapshot on; a snapshot cut short (a
// start with no end, or other records before its end) changes nothing.
func (c *Coordinator) Load(r Record, offset int64) {
	c.state.Apply(r)
	c.end = offset + 1
	c.since++
	switch {
	case r.Kind == KindSnapshotStart:
		c.shadow, c.shadowStart = NewState(), offset
	case c.shadow != nil && (r.Kind == KindSnapshotGroup || r.Kind == KindClassic):
		c.shadow.Apply(r)
	case c.shadow != nil && r.Kind == KindSnapshotEnd && r.End.Start == c.shadowStart:
		c.state, c.shadow = c.shadow, nil
		c.since, c.lastSnapshot = 0, c.shadowStart
		c.every = max(c.cfg.SnapshotEvery, 2*c.state.entries())
	default:
		c.shadow = nil
	}
}

// LastSnapshot returns the offset where the newest complete snapshot
// loaded or written starts, and false when there is none.
func (c *Coordinator) LastSnapshot() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSnapshot, c.lastSnapshot >= 0
}

// Start ends the rebuild: the log ends at end. Every member is given a
// whole session from now to find this coordinator.
func (c *Coordinator) Start(end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end = end
	now := c.cfg.Now()
	for _, name := range c.state.Groups() {
		for id := range c.state.Group(name).Members {
			c.liveOf(name, id).last = now
		}
	}
	c.restoreClassic(now)
}

// State returns the state, for tests and tools; the caller must not change
// it while the coordinator serves.
func (c *Coordinator) State() *State { return c.state }

func (c *Coordinator) liveOf(group, member string) *liveness {
	m := c.live[group]
	if m == nil {
		m = map[string]*liveness{}
		c.live[group] = m
	}
	l := m[member]
	if l == nil {
		l = &liveness{last: c.cfg.Now()}
		m[member] = l
	}
	return l
}

// checkNewGroup refuses a group the coordinator does not hold when it
// holds as many as it may. The caller holds mu.
func (c *Coordinator) checkNewGroup(group string) error {
	if c.state.Group(group) != nil || c.classic[group] != nil {
		return nil
	}
	n := len(c.state.groups)
	if n+len(c.classic) < c.cfg.MaxGroups {
		return nil
	}
	for name := range c.classic {
		if c.state.Group(name) == nil {
			n++
		}
	}
	if n < c.cfg.MaxGroups {
		return nil
	}
	return fmt.Errorf("%w: group %q would be one more than the %d groups its coordinator (its partition of %s) holds, the most it takes; delete groups no longer used",
		ErrInvalidRequest, group, n, transport.OffsetsTopic)
}

// write appends recs and applies them. The caller holds mu; the wait it
// returns is waited for without it.
func (c *Coordinator) write(recs []Record) (func(context.Context) error, error) {
	if len(recs) == 0 {
		end := c.end
		return func(ctx context.Context) error { return c.cfg.Log.WaitAcked(ctx, end) }, nil
	}
	end, wait, err := c.cfg.Log.Append(recs)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		c.state.Apply(r)
		if r.Kind == KindMemberGone {
			delete(c.live[r.Group], r.Gone.MemberID)
		}
		if r.Kind == KindGroupDeleted {
			delete(c.live, r.Group)
			delete(c.classic, r.Group)
		}
		if r.Kind == KindAssignment && c.cfg.OnRebalance != nil {
			c.cfg.OnRebalance()
		}
	}
	c.end = end
	c.since += len(recs)
	if c.cfg.SnapshotEvery > 0 && c.since >= c.every {
		c.writeSnapshot()
	}
	return wait, nil
}

// writeSnapshot appends a snapshot of the state: its start, the group
// records, its end, in appends of at most MaxBatchBytes, back to back (mu
// is held, so nothing else is appended between them). Nobody waits for
// it: a snapshot that is not acknowledged is one a new leader does not
// hold, or holds cut short, and a rebuild then reads the records before
// it. A failed append leaves the snapshot incomplete, which a rebuild
// ignores, and the next write tries again. The caller holds mu.
func (c *Coordinator) writeSnapshot() {
	recs := append([]sizedRecord{{Record{Kind: KindSnapshotStart}, markerSize}}, c.state.snapshot(c.cfg.MaxBatchBytes/4)...)
	// Half a batch of estimated bytes an append leaves room for the
	// batch's and the records' framing, which the estimates do not count.
	chunk := c.cfg.MaxBatchBytes / 2
	start := int64(-1)
	for i := 0; i < len(recs); {
		var batch []Record
		size := 0
		for i < len(recs) && (len(batch) == 0 || size+recs[i].size <= chunk) {
			batch, size = append(batch, recs[i].Record), size+recs[i].size
			i++
		}
		end, _, err := c.cfg.Log.Append(batch)
		if err != nil {
			return
		}
		if start < 0 {
			start = end - int64(len(batch))
		}
		c.end = end
	}
	groups := len(c.state.Groups())
	end, _, err := c.cfg.Log.Append([]Record{{Kind: KindSnapshotEnd, End: &SnapshotEnd{Start: start, Groups: int32(groups), Records: int32(len(recs) - 1)}}})
	if err != nil {
		return
	}
	c.end = end
	c.since, c.lastSnapshot = 0, start
	c.every = max(c.cfg.SnapshotEvery, 2*c.state.entries())
	if c.cfg.OnSnapshot != nil {
		c.cfg.OnSnapshot(start, len(recs)+1)
	}
}

// markerSize is about the bytes a snapshot marker takes in a batch.
const markerSize = 32

// ErrInvalidGroupName marks a group name the topic-name rules refuse.
var ErrInvalidGroupName = errors.New("groups: invalid group name")

func validGroup(name string) error {
	if err := metadata.ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidGroupName, err)
	}
	return nil
}

// Commit checks every offset of req and, when all pass, writes them in one
// batch; otherwise it writes nothing. It returns once they are
// acknowledged.
func (c *Coordinator) Commit(ctx context.Context, req *transport.OffsetCommitRequest) error {
	if err := validGroup(req.Group); err != nil {
		return err
	}
	if len(req.Offsets) == 0 || len(req.Offsets) > MaxCommitOffsets {
		return fmt.Errorf("%w: a commit of %d offsets (1 to %d)", ErrInvalidRequest, len(req.Offsets), MaxCommitOffsets)
	}
	if req.Reset && req.MemberEpoch != transport.NoMemberEpoch {
		return fmt.Errorf("%w: a reset comes from outside the group (member epoch %d)", ErrInvalidRequest, req.MemberEpoch)
	}
	type checked struct {
		c  Commit
		hw int64
	}
	todo := make([]checked, 0, len(req.Offsets))
	seen := map[TopicPartition]bool{}
	for _, o := range req.Offsets {
		tp := TopicPartition{o.Topic, o.Partition}
		if seen[tp] {
			return fmt.Errorf("%w: %s/%d twice in one commit", ErrInvalidRequest, o.Topic, o.Partition)
		}
		seen[tp] = true
		id, n, ok := c.cfg.Topics.Topic(o.Topic)
		switch {
		case !ok || strings.HasPrefix(o.Topic, "__"):
			return fmt.Errorf("%w: %q", ErrUnknownTopic, o.Topic)
		case o.Partition < 0 || o.Partition >= n:
			return fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", ErrUnknownPartition, o.Topic, n-1, o.Partition)
		case o.Offset < 0:
			return fmt.Errorf("%w: offset %d of %s/%d is negative", ErrInvalidOffset, o.Offset, o.Topic, o.Partition)
		case len(o.Metadata) > MaxMetadataBytes:
			return fmt.Errorf("%w: metadata of %d bytes for %s/%d, at most %d", ErrInvalidRequest, len(o.Metadata), o.Topic, o.Partition, MaxMetadataBytes)
		}
		hw, err := c.cfg.Topics.HighWatermark(ctx, o.Topic, o.Partition, o.Offset)
		if err != nil {
			return fmt.Errorf("high watermark of %s/%d: %w", o.Topic, o.Partition, err)
		}
		todo = append(todo, checked{Commit{Topic: o.Topic, TopicID: id, Partition: o.Partition, Offset: o.Offset,
			Metadata: o.Metadata, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}, hw})
	}
	c.mu.Lock()
	if c.hasClassicMembers(req.Group) {
		c.mu.Unlock()
		if req.Reset {
			return fmt.Errorf("%w: group %q has Kafka-protocol members; offsets are reset only while it has none", ErrGroupNotEmpty, req.Group)
		}
		return fmt.Errorf("%w: group %q has Kafka-protocol members; commits come from them", ErrUnknownMember, req.Group)
	}
	if err := c.checkNewGroup(req.Group); err != nil {
		c.mu.Unlock()
		return err
	}
	now := c.cfg.Now().UnixMilli()
	g := c.state.Group(req.Group)
	for i := range todo {
		t := &todo[i]
		t.c.TimeMs = now
		if g != nil && !req.Reset && req.MemberEpoch != transport.NoMemberEpoch {
			c.claimByCommit(g, req.MemberID, req.MemberEpoch, TopicPartition{t.c.Topic, t.c.Partition})
		}
		if err := c.state.CheckCommit(req.Group, t.c, t.hw, req.Reset); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	var recs []Record
	if req.Reset {
		rs := &Reset{Requester: req.Requester}
		for _, t := range todo {
			rs.Offsets = append(rs.Offsets, t.c)
		}
		recs = append(recs, Record{Group: req.Group, Kind: KindReset, Reset: rs})
	} else {
		for _, t := range todo {
			cm := t.c
			recs = append(recs, Record{Group: req.Group, Kind: KindCommit, Commit: &cm})
		}
	}
	wait, err := c.write(recs)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return wait(ctx)
}

// claimByCommit takes a commit of a partition nobody owns as the member's
// claim to it, when it is the member's by the target, or when a new
// coordinator has not yet heard every member say what it owns (the member
// owned it under the last one). The caller holds mu.
func (c *Coordinator) claimByCommit(g *Group, member string, epoch int32, tp TopicPartition) {
	m, ok := g.Members[member]
	if !ok || m.MemberEpoch != epoch {
		return
	}
	if _, owned := g.Owners[tp]; owned {
		return
	}
	if slices.Contains(g.Target[member], tp) || !c.settled(g) {
		g.Owners[tp] = member
	}
}

// settled reports whether every member of g has heartbeat to this
// coordinator (or holds its place while away): until then some member may
// own a partition this coordinator does not know of, and no partition is
// handed to a new owner. The caller holds mu.
func (c *Coordinator) settled(g *Group) bool {
	for id := range g.Members {
		l := c.live[g.Name][id]
		if l == nil || !l.reported && !l.held {
			return false
		}
	}
	return true
}

// Committed returns the group's committed offsets of the topics named (of
// every topic with none named), as acknowledged. An offset of an earlier
// incarnation of its topic (deleted and created again) is not returned.
func (c *Coordinator) Committed(ctx context.Context, req *transport.OffsetFetchRequest) (*transport.OffsetFetchResponse, error) {
	if err := validGroup(req.Group); err != nil {
		return nil, err
	}
	c.mu.Lock()
	resp := &transport.OffsetFetchResponse{}
	if g := c.state.Group(req.Group); g != nil {
		for tp, o := range g.Offsets {
			if len(req.Topics) > 0 && !slices.Contains(req.Topics, tp.Topic) {
				continue
			}
			if id, _, ok := c.cfg.Topics.Topic(tp.Topic); !ok || id != o.TopicID {
				continue
			}
			resp.Offsets = append(resp.Offsets, transport.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition,
				Offset: o.Offset, Metadata: o.Metadata, MemberID: o.MemberID, MemberEpoch: o.MemberEpoch, TimeMs: o.TimeMs})
		}
	}
	end := c.end
	c.mu.Unlock()
	slices.SortFunc(resp.Offsets, func(a, b transport.CommittedOffset) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	if err := c.confirmRead(ctx, end); err != nil {
		return nil, err
	}
	return resp, nil
}

// confirmRead is what a read answers only after: the state it read (up
// to end) acknowledged, and this coordinator confirmed to lead still,
// last (Log.Confirm). State not acknowledged yet makes it confirm first
// too: a coordinator cut off from its followers while its partition was
// failed over, holding an append that can no longer be acknowledged,
// would otherwise wait out its reader's deadline instead of answering
// NotCoordinator, which sends the reader to the new coordinator.
func (c *Coordinator) confirmRead(ctx context.Context, end int64) error {
	now, cancel := context.WithCancel(ctx)
	cancel()
	if c.cfg.Log.WaitAcked(now, end) != nil {
		if err := c.cfg.Log.Confirm(ctx); err != nil {
			return err
		}
		if err := c.cfg.Log.WaitAcked(ctx, end); err != nil {
			return err
		}
	}
	return c.cfg.Log.Confirm(ctx)
}

// sessionOf checks a requested session timeout (0: the default).
func sessionOf(ms int32) (time.Duration, error) {
	if ms == 0 {
		return DefaultSessionTimeout, nil
	}
	d := time.Duration(ms) * time.Millisecond
	if d < MinSessionTimeout || d > MaxSessionTimeout {
		return 0, fmt.Errorf("%w: session timeout %d ms outside [%d, %d]", ErrInvalidRequest, ms, MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	return d, nil
}

func checkSubscription(topics []string) ([]string, error) {
	if len(topics) == 0 || len(topics) > MaxSubscription {
		return nil, fmt.Errorf("%w: a subscription of %d topics (1 to %d)", ErrInvalidRequest, len(topics), MaxSubscription)
	}
	out := slices.Clone(topics)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, t := range out {
		if err := metadata.ValidateTopicName(t); err != nil {
			return nil, fmt.Errorf("%w: subscription: %v", ErrInvalidRequest, err)
		}
		if strings.HasPrefix(t, "__") {
			return nil, fmt.Errorf("%w: subscription to internal topic %q", ErrInvalidRequest, t)
		}
	}
	return out, nil
}

// Heartbeat serves a member's join, heartbeat or leave (see
// transport.GroupHeartbeatRequest) and gives it the partitions it may own
// now.
func (c *Coordinator) Heartbeat(ctx context.Context, req *transport.GroupHeartbeatRequest) (*transport.GroupHeartbeatResponse, error) {
	return c.heartbeat(ctx, req, beatReading{})
}

// beatReading is how a heartbeat is read: the native protocol's say everything
// every time; Kafka's ConsumerGroupHeartbeat (KIP-848, kafka.go) leaves
// out what did not change and names its own member id.
type beatReading struct {
	// keepTopics: the member's subscription is the one it has.
	keepTopics bool
	// keepOwned: the member owns what the coordinator holds it owns.
	keepOwned bool
	// ownID: a join names the member's id (a new member takes it; a
	// member of that id is taken back in its place, at a new epoch).
	ownID bool
	// leaveByID: a leave names the member by its id alone, not its epoch.
	leaveByID bool
}

func (c *Coordinator) heartbeat(ctx context.Context, req *transport.GroupHeartbeatRequest, how beatReading) (*transport.GroupHeartbeatResponse, error) {
	if err := validGroup(req.Group); err != nil {
		return nil, err
	}
	if err := errorsOf(checkID("instance id", req.InstanceID, true), checkID("member id", req.MemberID, true)); err != nil {
		return nil, err
	}
	host := req.Host
	if len(host) > maxIDBytes {
		host = host[:maxIDBytes]
	}
	session, err := sessionOf(req.SessionTimeoutMs)
	if err != nil {
		return nil, err
	}
	var topics []string
	if req.Leave == transport.Stay && !(how.keepTopics && req.MemberEpoch != transport.JoinEpoch) {
		if topics, err = checkSubscription(req.Topics); err != nil {
			return nil, err
		}
	}
	owned := map[TopicPartition]bool{}
	for _, tp := range req.Owned {
		for _, p := range tp.Partitions {
			owned[TopicPartition{tp.Topic, p}] = true
		}
	}

	c.mu.Lock()
	now := c.cfg.Now()
	g := c.state.Group(req.Group)
	members := map[string]Member{}
	if g != nil {
		members = maps.Clone(g.Members)
	}
	var recs []Record
	id, changed := req.MemberID, false
	me := Member{}
	switch {
	case req.MemberEpoch == transport.JoinEpoch && c.hasClassicMembers(req.Group):
		cg := c.classic[req.Group]
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: group %q has members of Kafka's group protocol (protocol type %q); a member of gostream's own cannot join it until they have left",
			ErrInconsistentProtocol, req.Group, cg.protocolType)
	case req.MemberEpoch == transport.JoinEpoch && how.ownID && req.MemberID != "" && members[req.MemberID].MemberID != "":
		// A member joining again under its own id (it lost its place:
		// a fenced epoch, a lost answer): taken back in its place at a
		// new epoch, which fences whatever it sent before; it owns
		// nothing now, and gets its partitions back as they are free.
		m := members[req.MemberID]
		me = m
		me.MemberEpoch = max(m.MemberEpoch, g.GroupEpoch) + 1
		me.Host, me.Topics, me.SessionTimeoutMs = host, topics, int32(session.Milliseconds())
		changed = !slices.Equal(m.Topics, topics)
		members[id] = me
		recs = append(recs, Record{Group: req.Group, Kind: KindMember, Member: &me})
	case req.MemberEpoch == transport.JoinEpoch:
		id = ""
		if req.InstanceID != "" {
			for mid, m := range members {
				if m.InstanceID != req.InstanceID {
					continue
				}
				if l := c.live[req.Group][mid]; l != nil && l.reported && !l.held && now.Sub(l.last) < 2*HeartbeatInterval(time.Duration(m.SessionTimeoutMs)*time.Millisecond) {
					c.mu.Unlock()
					return nil, fmt.Errorf("%w: instance %q of group %q is member %s, which heartbeat %v ago", ErrFencedInstanceID,
						req.InstanceID, req.Group, mid, now.Sub(l.last).Round(time.Millisecond))
				}
				// Its place, back: same member id, same partitions, a new
				// member epoch that fences its predecessor's requests.
				id, me = mid, m
				me.MemberEpoch++
				changed = !slices.Equal(m.Topics, topics) || m.SessionTimeoutMs != int32(session.Milliseconds())
			}
		}
		if id == "" {
			if err := c.checkNewGroup(req.Group); err != nil {
				c.mu.Unlock()
				return nil, err
			}
			if len(members) >= MaxMembers {
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: group %q has %d members, the most it takes", ErrInvalidRequest, req.Group, len(members))
			}
			id = c.cfg.NewMemberID()
			if how.ownID && req.MemberID != "" {
				id = req.MemberID
			}
			epoch := int32(1)
			if g != nil {
				epoch = g.GroupEpoch + 1
			}
			me = Member{MemberID: id, InstanceID: req.InstanceID, MemberEpoch: epoch}
			changed = true
		}
		me.Host, me.Topics, me.SessionTimeoutMs = host, topics, int32(session.Milliseconds())
		members[id] = me
		recs = append(recs, Record{Group: req.Group, Kind: KindMember, Member: &me})
	default:
		m, ok := members[id]
		switch {
		case !ok:
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: %q is not a member of group %q (it left, or its session expired): join again", ErrUnknownMember, id, req.Group)
		case m.MemberEpoch != req.MemberEpoch && !(how.leaveByID && req.Leave != transport.Stay):
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: member %s of group %q is at epoch %d, the request at %d: join again", ErrFencedMember, id, req.Group, m.MemberEpoch, req.MemberEpoch)
		}
		me = m
		if how.keepTopics && req.Leave == transport.Stay {
			topics = m.Topics
		}
		switch {
		case req.Leave == transport.LeaveHeld && m.InstanceID != "":
			l := c.liveOf(req.Group, id)
			l.held, l.last = true, now
			c.mu.Unlock()
			return &transport.GroupHeartbeatResponse{MemberID: id, MemberEpoch: m.MemberEpoch, GroupEpoch: g.GroupEpoch}, nil
		case req.Leave != transport.Stay:
			delete(members, id)
			recs = append(recs, Record{Group: req.Group, Kind: KindMemberGone, Gone: &MemberGone{MemberID: id, Reason: "left"}})
			changed = true
		case !slices.Equal(m.Topics, topics) || m.SessionTimeoutMs != int32(session.Milliseconds()) || m.Host != host:
			me.Topics, me.SessionTimeoutMs, me.Host = topics, int32(session.Milliseconds()), host
			members[id] = me
			recs = append(recs, Record{Group: req.Group, Kind: KindMember, Member: &me})
			changed = changed || !slices.Equal(m.Topics, topics)
		}
	}
	if a := c.reassign(req.Group, g, members, changed); a != nil {
		recs = append(recs, *a)
	}
	wait, err := c.write(recs)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	g = c.state.Group(req.Group)
	resp := &transport.GroupHeartbeatResponse{MemberID: id, MemberEpoch: me.MemberEpoch, HeartbeatIntervalMs: int32(HeartbeatInterval(session).Milliseconds())}
	if g != nil {
		resp.GroupEpoch = g.GroupEpoch
	}
	if req.Leave == transport.Stay {
		l := c.liveOf(req.Group, id)
		l.last, l.reported, l.held = now, true, false
		if how.keepOwned {
			for tp, o := range g.Owners {
				if o == id {
					owned[tp] = true
				}
			}
		}
		resp.Assigned = partitionsToWire(c.handOut(g, id, owned))
	}
	c.mu.Unlock()
	if err := wait(ctx); err != nil {
		return nil, err
	}
	return resp, nil
}

// handOut takes the member's word for what it owns (it released what it
// leaves out; it keeps what it owned), and returns what it may own now:
// its target less what another member still owns, and, while the
// coordinator has not heard from every member, nothing it does not own
// already. The caller holds mu.
func (c *Coordinator) handOut(g *Group, member string, owned map[TopicPartition]bool) []TopicPartition {
	for tp, o := range g.Owners {
		if o == member && !owned[tp] {
			delete(g.Owners, tp)
		}
	}
	for tp := range owned {
		if _, taken := g.Owners[tp]; !taken {
			g.Owners[tp] = member
		}
	}
	assigned, _ := Reconcile(g.Target, g.Owners, member)
	if !c.settled(g) {
		assigned = slices.DeleteFunc(assigned, func(tp TopicPartition) bool { return g.Owners[tp] != member })
	}
	for _, tp := range assigned {
		g.Owners[tp] = member
	}
	return assigned
}

// reassign returns the assignment record of a new group epoch when the
// range assignment of members differs from the group's target (or the
// membership changed); nil when nothing changes. The caller holds mu.
func (c *Coordinator) reassign(group string, g *Group, members map[string]Member, changed bool) *Record {
	subs := make(map[string][]string, len(members))
	counts := map[string]int32{}
	for id, m := range members {
		subs[id] = m.Topics
		for _, t := range m.Topics {
			if _, n, ok := c.cfg.Topics.Topic(t); ok {
				counts[t] = n
			}
		}
	}
	target := RangeAssign(subs, counts)
	var epoch int32
	if g != nil {
		epoch = g.GroupEpoch
		if !changed && sameTarget(g.Target, target) {
			return nil
		}
	}
	a := &Assignment{GroupEpoch: epoch + 1}
	ids := slices.Sorted(maps.Keys(target))
	for _, id := range ids {
		a.Members = append(a.Members, MemberAssignment{MemberID: id, Partitions: target[id]})
	}
	return &Record{Group: group, Kind: KindAssignment, Assignment: a}
}

func sameTarget(a, b map[string][]TopicPartition) bool {
	if len(a) != len(b) {
		return false
	}
	for id, tps := range a {
		other, ok := b[id]
		if !ok || !slices.Equal(tps, other) {
			return false
		}
	}
	return true
}

func partitionsToWire(tps []TopicPartition) []transport.TopicPartitions {
	var out []transport.TopicPartitions
	for _, tp := range tps {
		if n := len(out); n > 0 && out[n-1].Topic == tp.Topic {
			out[n-1].Partitions = append(out[n-1].Partitions, tp.Partition)
			continue
		}
		out = append(out, transport.TopicPartitions{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
	}
	return out
}

// Expire removes every member whose session timed out, and rebalances
// their groups. It returns once the removals are acknowledged.
func (c *Coordinator) Expire(ctx context.Context) error {
	c.mu.Lock()
	now := c.cfg.Now()
	c.expireClassic(now)
	var recs []Record
	for _, name := range c.state.Groups() {
		g := c.state.Group(name)
		members := maps.Clone(g.Members)
		gone := false
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			m := g.Members[id]
			l := c.liveOf(name, id)
			if now.Sub(l.last) <= time.Duration(m.SessionTimeoutMs)*time.Millisecond {
				continue
			}
			delete(members, id)
			gone = true
			recs = append(recs, Record{Group: name, Kind: KindMemberGone, Gone: &MemberGone{MemberID: id, Reason: "session expired"}})
		}
		if gone {
			if a := c.reassign(name, g, members, true); a != nil {
				recs = append(recs, *a)
			}
		}
	}
	if len(recs) == 0 {
		c.mu.Unlock()
		return nil
	}
	wait, err := c.write(recs)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return wait(ctx)
}

// groupState names a group's state: empty (no members), stable (every
// member owns exactly its target) or rebalancing. The caller holds mu.
// GroupStats is what the metrics say of one group.
type GroupStats struct {
	Name    string
	State   string
	Members int
	// Offsets are the committed offsets of the topics' current
	// incarnations.
	Offsets map[TopicPartition]int64
}

// Stats returns every group's stats, sorted by name, without waiting for
// anything: what the coordinator holds now.
func (c *Coordinator) Stats() []GroupStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []GroupStats
	for _, name := range c.state.Groups() {
		g := c.state.Group(name)
		st := GroupStats{Name: name, State: groupState(g), Members: len(g.Members), Offsets: map[TopicPartition]int64{}}
		for tp, o := range g.Offsets {
			if id, _, ok := c.cfg.Topics.Topic(tp.Topic); ok && id == o.TopicID {
				st.Offsets[tp] = o.Offset
			}
		}
		out = append(out, st)
	}
	return out
}

func groupState(g *Group) string {
	if len(g.Members) == 0 {
		return "empty"
	}
	n := 0
	for id, tps := range g.Target {
		for _, tp := range tps {
			if g.Owners[tp] != id {
				return "rebalancing"
			}
			n++
		}
	}
	if n != len(g.Owners) {
		return "rebalancing"
	}
	return "stable"
}

// List returns a summary of every group, sorted by name.
func (c *Coordinator) List(ctx context.Context) (*transport.ListGroupsResponse, error) {
	c.mu.Lock()
	resp := &transport.ListGroupsResponse{}
	names := c.state.Groups()
	for name := range c.classic {
		if c.state.Group(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if cg := c.classic[name]; cg != nil {
			resp.Groups = append(resp.Groups, transport.GroupSummary{Name: name, State: cg.stateName(), Members: int32(len(cg.members)), GroupEpoch: cg.generation})
			continue
		}
		g := c.state.Group(name)
		resp.Groups = append(resp.Groups, transport.GroupSummary{Name: name, State: groupState(g), Members: int32(len(g.Members)), GroupEpoch: g.GroupEpoch})
	}
	end := c.end
	c.mu.Unlock()
	return resp, c.confirmRead(ctx, end)
}

// Describe describes a group.
func (c *Coordinator) Describe(ctx context.Context, group string) (*transport.DescribeGroupResponse, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	c.mu.Lock()
	g := c.state.Group(group)
	if cg := c.classic[group]; cg != nil {
		resp := c.describeClassic(cg)
		c.mu.Unlock()
		offs, err := c.Committed(ctx, &transport.OffsetFetchRequest{Group: group})
		if err != nil {
			return nil, err
		}
		resp.Offsets = offs.Offsets
		return resp, nil
	}
	if g == nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %q has no members and no committed offsets", ErrUnknownGroup, group)
	}
	now := c.cfg.Now()
	resp := &transport.DescribeGroupResponse{Group: group, State: groupState(g), GroupEpoch: g.GroupEpoch, Assignor: Assignor}
	if len(g.Members) == 0 && g.Classic != nil {
		// A Kafka group whose members all left: its live state is gone
		// (expireClassic drops it), and its last generation in the log
		// says what it is, as Kafka's DescribeGroups says (kafkaGroup).
		resp.GroupEpoch, resp.Assignor = max(g.Classic.Generation, g.ClassicFloor), g.Classic.Protocol
		resp.ProtocolType = cmp.Or(g.Classic.ProtocolType, noProtocolType)
	}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		var owned []TopicPartition
		for tp, o := range g.Owners {
			if o == id {
				owned = append(owned, tp)
			}
		}
		sortPartitions(owned)
		since := int64(-1)
		if l := c.live[group][id]; l != nil && (l.reported || l.held) {
			since = now.Sub(l.last).Milliseconds()
		}
		resp.Members = append(resp.Members, transport.MemberDescription{MemberID: id, InstanceID: m.InstanceID, Host: m.Host,
			MemberEpoch: m.MemberEpoch, Topics: m.Topics, SessionTimeoutMs: m.SessionTimeoutMs,
			Owned: partitionsToWire(owned), Target: partitionsToWire(g.Target[id]), SinceHeartbeatMs: since})
	}
	c.mu.Unlock()
	// Committed waits for the log end it sees, no earlier than the one
	// the members were read at.
	offs, err := c.Committed(ctx, &transport.OffsetFetchRequest{Group: group})
	if err != nil {
		return nil, err
	}
	resp.Offsets = offs.Offsets
	return resp, nil
}

// Delete deletes a group that has no members: its committed offsets are
// gone.
func (c *Coordinator) Delete(ctx context.Context, group string) error {
	if err := validGroup(group); err != nil {
		return err
	}
	c.mu.Lock()
	g := c.state.Group(group)
	switch {
	case g == nil:
		c.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	case len(g.Members) > 0:
		c.mu.Unlock()
		return fmt.Errorf("%w: group %q has %d members; it is deleted only once they have left", ErrGroupNotEmpty, group, len(g.Members))
	case c.hasClassicMembers(group):
		c.mu.Unlock()
		return fmt.Errorf("%w: group %q has %d Kafka-protocol members; it is deleted only once they have left", ErrGroupNotEmpty, group, len(c.classic[group].members))
	}
	wait, err := c.write([]Record{{Group: group, Kind: KindGroupDeleted}})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return wait(ctx)
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	return nil
}
