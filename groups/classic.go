package groups

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"gostream/transport"
)

// Kafka's classic group protocol (docs/kafka-groups.md): JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup, with client-side assignment. A
// coordinator keeps each classic group's live state here (who waits in a
// JoinGroup or a SyncGroup, when each member was last heard from, the
// group's deadlines) and writes what must outlive it as
// classic-generation records; commits are the same commit records as
// the native protocol's.

// The refusals of the classic protocol. Each writes nothing.
var (
	// ErrMemberIDRequired answers a dynamic member's first JoinGroup
	// (v4 and later) with the member id it must join again with.
	ErrMemberIDRequired = errors.New("groups: member id required")
	// ErrIllegalGeneration: a request of a generation that is not the
	// group's.
	ErrIllegalGeneration = errors.New("groups: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the member joins
	// again.
	ErrRebalanceInProgress = errors.New("groups: rebalance in progress")
	// ErrInconsistentProtocol: a member of the other protocol kind, a
	// protocol type the group does not have, or no protocol every member
	// supports.
	ErrInconsistentProtocol = errors.New("groups: inconsistent group protocol")
	// ErrGroupFull: the group has as many members as it may, or a member
	// would make its generation record too large.
	ErrGroupFull = errors.New("groups: group is full")
	// ErrInvalidSessionTimeout: a session timeout out of bounds.
	ErrInvalidSessionTimeout = errors.New("groups: invalid session timeout")
	// ErrAssignmentTooLarge: the leader's assignments do not fit.
	ErrAssignmentTooLarge = errors.New("groups: assignments too large")
)

// Bounds of the classic protocol.
const (
	MaxClassicSessionTimeout = 30 * time.Minute
	// DefaultInitialRebalanceDelay is how long a group's first join phase
	// waits for more members (Kafka's group.initial.rebalance.delay.ms).
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultMaxMemberBytes bounds a member's protocols, and its
	// assignment.
	DefaultMaxMemberBytes = 64 << 10
)

// classicState is a classic group's state, as Kafka names them.
type classicState int

const (
	classicEmpty classicState = iota
	classicPreparing
	classicCompleting
	classicStable
)

func (s classicState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}[s]
}

// classicGroup is a classic group's live state. Its last stable
// generation is in the State (Group.Classic), as written.
type classicGroup struct {
	name       string
	state      classicState
	generation int32
	// stable is the last generation whose assignments were handed out:
	// while the group prepares a rebalance from it, its members commit.
	stable       int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*classicMember
	// pending are the ids handed out by MEMBER_ID_REQUIRED, each until its
	// member joins with it or the deadline passes.
	pending   map[string]time.Time
	instances map[string]string // instance id -> member id
	// Preparing: the join phase ends by joinBy, and not before delayUntil
	// (the initial delay) unless every member waits.
	joinBy, delayUntil time.Time
	// Completing: members that have not synced by syncBy are removed.
	syncBy time.Time
	seq    uint64 // join order, for the leader's choice
}

// classicMember is a member's live state.
type classicMember struct {
	ClassicMember
	last   time.Time // heard from last
	seq    uint64
	synced bool // Completing: its SyncGroup came
	join   chan joinAnswer
	sync   chan syncAnswer
}

type joinAnswer struct {
	res  ClassicJoined
	err  error
	wait func(context.Context) error
}

type syncAnswer struct {
	res  ClassicSynced
	err  error
	wait func(context.Context) error
}

// ClassicJoin is a JoinGroup.
type ClassicJoin struct {
	Group, MemberID, InstanceID   string
	ClientID, ClientHost          string
	ProtocolType                  string
	Protocols                     []Protocol
	SessionTimeout, RebalanceTime time.Duration
	// RequireMemberID: a new dynamic member is first given its id
	// (ErrMemberIDRequired; JoinGroup v4 and later).
	RequireMemberID bool
}

// ClassicJoined is a JoinGroup's answer. Members is set for the leader
// only: every member with its metadata for Protocol (its one Protocols
// entry).
type ClassicJoined struct {
	Generation             int32
	ProtocolType, Protocol string
	Leader, MemberID       string
	Members                []ClassicMember
}

// ClassicSync is a SyncGroup. Assignments (member id -> bytes) is the
// leader's; ProtocolType and Protocol, when set, must be the group's.
type ClassicSync struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	ProtocolType, Protocol      string
	Assignments                 map[string][]byte
}

// ClassicSynced is a SyncGroup's answer.
type ClassicSynced struct {
	ProtocolType, Protocol string
	Assignment             []byte
}

// ClassicLeaving is one member a LeaveGroup names: by member id, or by
// instance id alone for a static member.
type ClassicLeaving struct {
	MemberID, InstanceID string
}

// restoreClassic makes the live state of every classic group from its
// last stable generation, each member's session starting now (Start).
// The caller holds mu.
func (c *Coordinator) restoreClassic(now time.Time) {
	c.classic = map[string]*classicGroup{}
	for _, name := range c.state.Groups() {
		g := c.state.Group(name)
		if g.Classic == nil || len(g.Classic.Members) == 0 {
			continue
		}
		cg := &classicGroup{name: name, state: classicStable, generation: max(g.Classic.Generation, g.ClassicFloor), stable: g.Classic.Generation,
			protocolType: g.Classic.ProtocolType, protocol: g.Classic.Protocol, leader: g.Classic.Leader,
			members: map[string]*classicMember{}, pending: map[string]time.Time{}, instances: map[string]string{}}
		if g.ClassicFloor > g.Classic.Generation {
			// The generation after the last stable one never got its
			// assignments: its members join again.
			cg.state = classicPreparing
		}
		for _, m := range g.Classic.Members {
			cg.seq++
			cm := &classicMember{ClassicMember: m, last: now, seq: cg.seq, synced: true}
			cg.members[m.MemberID] = cm
			if m.InstanceID != "" {
				cg.instances[m.InstanceID] = m.MemberID
			}
		}
		if cg.state == classicPreparing {
			cg.joinBy = now.Add(cg.rebalanceTimeout())
		}
		c.classic[name] = cg
	}
}

// rebalanceTimeout is the longest of the members' rebalance timeouts.
func (cg *classicGroup) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range cg.members {
		d = max(d, time.Duration(m.RebalanceTimeoutMs)*time.Millisecond)
	}
	return max(d, time.Second)
}

// hasMembers reports whether group has classic members now. The caller
// holds mu.
func (c *Coordinator) hasClassicMembers(group string) bool {
	cg := c.classic[group]
	return cg != nil && (len(cg.members) > 0 || len(cg.pending) > 0)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// checkJoin checks what a JoinGroup carries, before the group is looked at.
func (c *Coordinator) checkJoin(req *ClassicJoin) error {
	if err := validGroup(req.Group); err != nil {
		return err
	}
	if err := errorsOf(checkID("member id", req.MemberID, true), checkID("instance id", req.InstanceID, true),
		checkID("client id", req.ClientID, true), checkID("protocol type", req.ProtocolType, false)); err != nil {
		return err
	}
	if req.SessionTimeout < MinSessionTimeout || req.SessionTimeout > MaxClassicSessionTimeout {
		return fmt.Errorf("%w: session timeout %v outside [%v, %v]", ErrInvalidSessionTimeout, req.SessionTimeout, MinSessionTimeout, MaxClassicSessionTimeout)
	}
	if req.RebalanceTime <= 0 {
		req.RebalanceTime = req.SessionTimeout
	}
	req.RebalanceTime = min(req.RebalanceTime, MaxClassicSessionTimeout)
	if len(req.Protocols) == 0 || len(req.Protocols) > MaxProtocols {
		return fmt.Errorf("%w: %d protocols offered (1 to %d)", ErrInconsistentProtocol, len(req.Protocols), MaxProtocols)
	}
	size := 0
	for _, p := range req.Protocols {
		if err := errorsOf(checkID("protocol", p.Name, false)); err != nil {
			return err
		}
		size += len(p.Name) + len(p.Metadata)
	}
	if size > c.cfg.MaxMemberBytes {
		return fmt.Errorf("%w: protocols of %d bytes, at most %d (--group-max-member-bytes)", ErrGroupFull, size, c.cfg.MaxMemberBytes)
	}
	if len(req.ClientHost) > maxIDBytes {
		req.ClientHost = req.ClientHost[:maxIDBytes]
	}
	return nil
}

// classicRecordOverhead is about the bytes of a classic generation's
// record beyond its members and its group's name and protocol type: its
// own fields (the protocol's name and the leader's id at most maxIDBytes
// each), and the framing of the record and of its batch.
const classicRecordOverhead = 32 + 2*maxIDBytes + 128

// classicMemberBytes is about the bytes m takes in its group's generation
// record, its assignment left out (see classicSize).
func classicMemberBytes(m *ClassicMember) int {
	n := 40 + len(m.MemberID) + len(m.InstanceID) + len(m.ClientID) + len(m.ClientHost)
	for _, p := range m.Protocols {
		n += 8 + len(p.Name) + len(p.Metadata)
	}
	return n
}

// fitsClassic checks that member id, as req makes it (in place of member
// replaces, when set), leaves the group's generation record room for the
// assignments: the members with their ids and protocols take at most half
// a batch, and the assignments the other half (completeSync). A join that
// would pass it is ErrGroupFull. The caller holds mu.
func (c *Coordinator) fitsClassic(cg *classicGroup, id, replaces string, req *ClassicJoin) error {
	m := ClassicMember{MemberID: id, InstanceID: req.InstanceID, ClientID: req.ClientID, ClientHost: req.ClientHost, Protocols: req.Protocols}
	total := classicRecordOverhead + len(cg.name) + len(req.ProtocolType) + classicMemberBytes(&m)
	for other, om := range cg.members {
		if other != id && other != replaces {
			total += classicMemberBytes(&om.ClassicMember)
		}
	}
	if limit := c.cfg.MaxBatchBytes / 2; total > limit {
		return fmt.Errorf("%w: the members of group %q with their protocols would take %d bytes of its generation record, at most %d (half a batch)",
			ErrGroupFull, cg.name, total, limit)
	}
	return nil
}

// supports reports whether every member of cg supports one of protos.
func (cg *classicGroup) supports(protos []Protocol) bool {
	for _, p := range protos {
		all := true
		for _, m := range cg.members {
			if !slices.ContainsFunc(m.Protocols, func(q Protocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// JoinClassic serves a JoinGroup: it returns once the member's join phase
// completed (or at once, for a member that gets its id first or rejoins
// a generation unchanged), its generation acknowledged.
func (c *Coordinator) JoinClassic(ctx context.Context, req ClassicJoin) (ClassicJoined, error) {
	if err := c.checkJoin(&req); err != nil {
		return ClassicJoined{MemberID: req.MemberID}, err
	}
	c.mu.Lock()
	now := c.cfg.Now()
	if g := c.state.Group(req.Group); g != nil && len(g.Members) > 0 {
		c.mu.Unlock()
		return ClassicJoined{}, fmt.Errorf("%w: group %q has members of gostream's own group protocol; a Kafka member cannot join it", ErrInconsistentProtocol, req.Group)
	}
	cg := c.classic[req.Group]
	if cg == nil {
		if req.MemberID != "" {
			c.mu.Unlock()
			return ClassicJoined{}, fmt.Errorf("%w: %q: group %q has no members", ErrUnknownMember, req.MemberID, req.Group)
		}
		if err := c.checkNewGroup(req.Group); err != nil {
			c.mu.Unlock()
			return ClassicJoined{}, err
		}
		cg = &classicGroup{name: req.Group, members: map[string]*classicMember{}, pending: map[string]time.Time{}, instances: map[string]string{}}
		if g := c.state.Group(req.Group); g != nil {
			cg.generation = g.ClassicFloor
			if g.Classic != nil {
				cg.protocolType = g.Classic.ProtocolType
			}
		}
		c.classic[req.Group] = cg
	}
	if cg.state != classicEmpty && (req.ProtocolType != cg.protocolType || !cg.supports(req.Protocols)) {
		c.mu.Unlock()
		return ClassicJoined{MemberID: req.MemberID}, fmt.Errorf("%w: group %q has protocol type %q and protocols its members all support; this member offers type %q and %s",
			ErrInconsistentProtocol, req.Group, cg.protocolType, req.ProtocolType, protocolNames(req.Protocols))
	}
	var ch chan joinAnswer
	_, pending := cg.pending[req.MemberID]
	switch {
	case req.MemberID == "" && req.InstanceID != "" && cg.instances[req.InstanceID] != "":
		res, ready, err := c.replaceStatic(cg, &req, now)
		if err != nil || ready != nil {
			c.mu.Unlock()
			if err != nil {
				return ClassicJoined{MemberID: req.MemberID}, err
			}
			return res, ready(ctx)
		}
		ch = cg.members[res.MemberID].join
	case req.MemberID == "":
		if len(cg.members)+len(cg.pending) >= MaxMembers {
			c.mu.Unlock()
			return ClassicJoined{}, fmt.Errorf("%w: group %q has %d members, at most %d", ErrGroupFull, req.Group, len(cg.members)+len(cg.pending), MaxMembers)
		}
		prefix := req.ClientID
		if req.InstanceID != "" {
			prefix = req.InstanceID
		}
		id := prefix + "-" + newUUID()
		if len(id) > maxIDBytes {
			id = newUUID()
		}
		if req.InstanceID == "" && req.RequireMemberID {
			cg.pending[id] = now.Add(req.SessionTimeout)
			c.mu.Unlock()
			return ClassicJoined{MemberID: id}, fmt.Errorf("%w: join again with member id %q", ErrMemberIDRequired, id)
		}
		if err := c.fitsClassic(cg, id, "", &req); err != nil {
			c.mu.Unlock()
			return ClassicJoined{}, err
		}
		ch = c.addClassic(cg, id, &req, now)
	case pending:
		if req.InstanceID != "" {
			c.mu.Unlock()
			return ClassicJoined{MemberID: req.MemberID}, fmt.Errorf("%w: a member id handed out to a dynamic member, with instance id %q", ErrUnknownMember, req.InstanceID)
		}
		delete(cg.pending, req.MemberID)
		if err := c.fitsClassic(cg, req.MemberID, "", &req); err != nil {
			// The id is dropped: the join phase does not wait for it.
			c.maybeCompleteJoin(cg, now)
			c.mu.Unlock()
			return ClassicJoined{MemberID: req.MemberID}, err
		}
		ch = c.addClassic(cg, req.MemberID, &req, now)
	default:
		m, err := cg.member(req.MemberID, req.InstanceID)
		if err == nil && cg.state == classicEmpty {
			err = fmt.Errorf("%w: %q: group %q is empty", ErrUnknownMember, req.MemberID, req.Group)
		}
		if err != nil {
			c.mu.Unlock()
			return ClassicJoined{MemberID: req.MemberID}, err
		}
		m.last = now
		same := slices.EqualFunc(m.Protocols, req.Protocols, func(a, b Protocol) bool { return a.Name == b.Name && string(a.Metadata) == string(b.Metadata) })
		switch {
		case cg.state == classicCompleting && same, cg.state == classicStable && same && m.MemberID != cg.leader:
			// Nothing changed: the member gets its generation again.
			res := cg.joined(m.MemberID)
			end := c.end
			c.mu.Unlock()
			return res, c.cfg.Log.WaitAcked(ctx, end)
		}
		if err := c.fitsClassic(cg, m.MemberID, "", &req); err != nil {
			c.mu.Unlock()
			return ClassicJoined{MemberID: req.MemberID}, err
		}
		updateClassicMember(m, &req)
		ch = parkJoin(m)
		if cg.state != classicPreparing {
			c.prepareRebalance(cg, now)
		}
	}
	c.maybeCompleteJoin(cg, now)
	c.mu.Unlock()
	return c.awaitJoin(ctx, cg, ch)
}

func protocolNames(ps []Protocol) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return fmt.Sprintf("%q", names)
}

func updateClassicMember(m *classicMember, req *ClassicJoin) {
	m.Protocols = slices.Clone(req.Protocols)
	m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	m.SessionTimeoutMs, m.RebalanceTimeoutMs = int32(req.SessionTimeout.Milliseconds()), int32(req.RebalanceTime.Milliseconds())
}

// parkJoin makes m wait in a JoinGroup; one it waited in already is told
// to join again.
func parkJoin(m *classicMember) chan joinAnswer {
	if m.join != nil {
		m.join <- joinAnswer{err: fmt.Errorf("%w: a newer JoinGroup of member %q came", ErrRebalanceInProgress, m.MemberID)}
	}
	m.join = make(chan joinAnswer, 1)
	return m.join
}

// addClassic adds a member that joins, waiting, and starts a rebalance
// (the group's first member begins it from Empty, with the initial
// delay). The caller holds mu.
func (c *Coordinator) addClassic(cg *classicGroup, id string, req *ClassicJoin, now time.Time) chan joinAnswer {
	cg.seq++
	m := &classicMember{ClassicMember: ClassicMember{MemberID: id, InstanceID: req.InstanceID}, last: now, seq: cg.seq}
	updateClassicMember(m, req)
	cg.members[id] = m
	if req.InstanceID != "" {
		cg.instances[req.InstanceID] = id
	}
	if cg.state == classicEmpty {
		cg.protocolType = req.ProtocolType
	}
	ch := parkJoin(m)
	switch cg.state {
	case classicPreparing:
		if !cg.delayUntil.IsZero() {
			cg.delayUntil = minTime(now.Add(c.cfg.InitialRebalanceDelay), cg.joinBy)
		}
		cg.joinBy = maxTime(cg.joinBy, now.Add(req.RebalanceTime))
	default:
		c.prepareRebalance(cg, now)
	}
	return ch
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// member returns the member id names, checking that instance (when set)
// is its: ErrUnknownMember, or ErrFencedInstanceID for an instance id
// that another member id now holds.
func (cg *classicGroup) member(id, instance string) (*classicMember, error) {
	if instance != "" {
		holder, ok := cg.instances[instance]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: instance id %q is not in group %q", ErrUnknownMember, instance, cg.name)
		case holder != id:
			return nil, fmt.Errorf("%w: instance id %q of group %q is held by another member now", ErrFencedInstanceID, instance, cg.name)
		}
	}
	m := cg.members[id]
	if m == nil {
		return nil, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, id, cg.name)
	}
	return m, nil
}

// joined is member's answer for the current generation. The caller holds
// mu.
func (cg *classicGroup) joined(member string) ClassicJoined {
	res := ClassicJoined{Generation: cg.generation, ProtocolType: cg.protocolType, Protocol: cg.protocol, Leader: cg.leader, MemberID: member}
	if member == cg.leader {
		for _, id := range cg.memberOrder() {
			m := cg.members[id]
			res.Members = append(res.Members, ClassicMember{MemberID: id, InstanceID: m.InstanceID, Protocols: []Protocol{m.protocol(cg.protocol)}})
		}
	}
	return res
}

// memberOrder is the members' ids in join order.
func (cg *classicGroup) memberOrder() []string {
	ids := slices.Collect(maps.Keys(cg.members))
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(cg.members[a].seq, cg.members[b].seq) })
	return ids
}

func (m *classicMember) protocol(name string) Protocol {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p
		}
	}
	return Protocol{Name: name}
}

// prepareRebalance begins a join phase: parked SyncGroups are told to
// join again. The caller holds mu.
func (c *Coordinator) prepareRebalance(cg *classicGroup, now time.Time) {
	for _, m := range cg.members {
		if m.sync != nil {
			m.sync <- syncAnswer{err: fmt.Errorf("%w: group %q rebalances", ErrRebalanceInProgress, cg.name)}
			m.sync = nil
		}
	}
	from := cg.state
	cg.state = classicPreparing
	cg.joinBy = now.Add(cg.rebalanceTimeout())
	cg.delayUntil = time.Time{}
	if from == classicEmpty && c.cfg.InitialRebalanceDelay > 0 {
		cg.delayUntil = minTime(now.Add(c.cfg.InitialRebalanceDelay), cg.joinBy)
	}
}

// maybeCompleteJoin ends the join phase when every member waits in a
// JoinGroup (and no id handed out is outstanding) and the initial delay
// has passed, or at the phase's deadline. The caller holds mu.
func (c *Coordinator) maybeCompleteJoin(cg *classicGroup, now time.Time) {
	if cg.state != classicPreparing {
		return
	}
	all := len(cg.pending) == 0
	for _, m := range cg.members {
		all = all && m.join != nil
	}
	if now.Before(cg.joinBy) && (!all || now.Before(cg.delayUntil)) {
		return
	}
	c.completeJoin(cg, now)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are removed (static ones are kept), the generation goes up, the
// protocol and the leader are chosen, the generation is written and every
// waiting JoinGroup is answered once it is acknowledged. The caller
// holds mu.
func (c *Coordinator) completeJoin(cg *classicGroup, now time.Time) {
	joined := 0
	for id, m := range cg.members {
		switch {
		case m.join != nil:
			joined++
		case m.InstanceID == "":
			c.removeClassic(cg, id, nil)
		}
	}
	clear(cg.pending)
	if joined == 0 && len(cg.members) > 0 {
		cg.joinBy = now.Add(cg.rebalanceTimeout()) // static members only: wait another round
		return
	}
	if g := c.state.Group(cg.name); g != nil {
		cg.generation = max(cg.generation, g.ClassicFloor)
	}
	cg.generation++
	if len(cg.members) == 0 {
		cg.state, cg.protocol, cg.leader = classicEmpty, "", ""
		rec := &ClassicGeneration{Generation: cg.generation, Stable: true, ProtocolType: cg.protocolType}
		wait, err := c.write([]Record{{Group: cg.name, Kind: KindClassic, Classic: rec}})
		if err != nil {
			cg.generation-- // nothing was written
			return
		}
		// Nobody waits for it (every member is gone), but an append is
		// acknowledged only through its wait.
		shared(wait)
		return
	}
	cg.protocol = cg.vote()
	if m := cg.members[cg.leader]; m == nil || m.join == nil {
		cg.leader = ""
		for _, id := range cg.memberOrder() {
			if cg.members[id].join != nil {
				cg.leader = id
				break
			}
		}
	}
	cg.state = classicCompleting
	cg.syncBy = now.Add(cg.rebalanceTimeout())
	for _, m := range cg.members {
		m.synced, m.Assignment = false, nil
	}
	wait, err := c.write([]Record{{Group: cg.name, Kind: KindClassic, Classic: cg.generationRecord(false)}})
	if err == nil {
		wait = shared(wait)
	}
	for _, id := range cg.memberOrder() {
		m := cg.members[id]
		if m.join == nil {
			continue
		}
		a := joinAnswer{res: cg.joined(id), wait: wait, err: err}
		m.join <- a
		m.join = nil
		m.last = now
	}
	if err != nil {
		c.prepareRebalance(cg, now)
	}
}

// vote chooses the protocol: of those every member supports, the one
// most members list first among them (ties: the first member's order).
func (cg *classicGroup) vote() string {
	order := cg.memberOrder()
	var candidates []string
	for _, p := range cg.members[order[0]].Protocols {
		if cg.supports([]Protocol{p}) {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, id := range order {
		for _, p := range cg.members[id].Protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// generationRecord is the group's generation as written.
func (cg *classicGroup) generationRecord(stable bool) *ClassicGeneration {
	rec := &ClassicGeneration{Generation: cg.generation, Stable: stable, ProtocolType: cg.protocolType, Protocol: cg.protocol, Leader: cg.leader}
	for _, id := range cg.memberOrder() {
		m := cg.members[id].ClassicMember
		m.Protocols = slices.Clone(m.Protocols)
		if !stable {
			m.Assignment = nil
		} else if m.Assignment == nil {
			m.Assignment = []byte{}
		}
		rec.Members = append(rec.Members, m)
	}
	return rec
}

// shared lets every answer that depends on one append wait for it: an
// append's own wait is for one caller, so it is called once, now, and
// each answer waits for its outcome (or its own context's end).
func shared(wait func(context.Context) error) func(context.Context) error {
	done := make(chan struct{})
	var err error
	go func() {
		err = wait(context.Background()) // bounded by the log's own wait
		close(done)
	}()
	return func(ctx context.Context) error {
		select {
		case <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// removeClassic removes a member; a request it waits in gets err (nil:
// UNKNOWN_MEMBER_ID). The caller holds mu.
func (c *Coordinator) removeClassic(cg *classicGroup, id string, err error) {
	m := cg.members[id]
	if m == nil {
		return
	}
	if err == nil {
		err = fmt.Errorf("%w: member %q was removed from group %q", ErrUnknownMember, id, cg.name)
	}
	if m.join != nil {
		m.join <- joinAnswer{err: err}
	}
	if m.sync != nil {
		m.sync <- syncAnswer{err: err}
	}
	delete(cg.members, id)
	if m.InstanceID != "" && cg.instances[m.InstanceID] == id {
		delete(cg.instances, m.InstanceID)
	}
	if cg.leader == id {
		cg.leader = ""
		if order := cg.memberOrder(); len(order) > 0 {
			cg.leader = order[0]
		}
	}
}

// replaceStatic gives a static member that joins again, without its
// member id, a new one in place of its old one, whose requests are fenced
// from now on. In Stable, when the group's protocol would not change,
// the member gets the current generation at once (ready is set: the
// generation with its new id is being written); otherwise it waits in a
// rebalance. The caller holds mu.
func (c *Coordinator) replaceStatic(cg *classicGroup, req *ClassicJoin, now time.Time) (ClassicJoined, func(context.Context) error, error) {
	oldID := cg.instances[req.InstanceID]
	old := cg.members[oldID]
	newID := req.InstanceID + "-" + newUUID()
	if len(newID) > maxIDBytes {
		newID = newUUID()
	}
	if err := c.fitsClassic(cg, newID, oldID, req); err != nil {
		return ClassicJoined{}, nil, err
	}
	fenced := fmt.Errorf("%w: instance id %q joined again as another member", ErrFencedInstanceID, req.InstanceID)
	if old.join != nil {
		old.join <- joinAnswer{err: fenced}
		old.join = nil
	}
	if old.sync != nil {
		old.sync <- syncAnswer{err: fenced}
		old.sync = nil
	}
	delete(cg.members, oldID)
	m := old
	m.MemberID = newID
	updateClassicMember(m, req)
	m.last = now
	cg.members[newID] = m
	cg.instances[req.InstanceID] = newID
	leaderBefore := cg.leader
	if cg.leader == oldID {
		cg.leader = newID
	}
	if cg.state == classicStable && cg.vote() == cg.protocol {
		wait, err := c.write([]Record{{Group: cg.name, Kind: KindClassic, Classic: cg.generationRecord(true)}})
		if err != nil {
			return ClassicJoined{}, nil, err
		}
		res := ClassicJoined{Generation: cg.generation, ProtocolType: cg.protocolType, Protocol: cg.protocol, Leader: leaderBefore, MemberID: newID}
		return res, wait, nil
	}
	parkJoin(m)
	if cg.state != classicPreparing {
		c.prepareRebalance(cg, now)
	}
	return ClassicJoined{MemberID: newID}, nil, nil
}

// awaitJoin waits for a parked JoinGroup's answer, and for its
// generation to be acknowledged.
func (c *Coordinator) awaitJoin(ctx context.Context, cg *classicGroup, ch chan joinAnswer) (ClassicJoined, error) {
	select {
	case a := <-ch:
		if a.err != nil {
			return a.res, a.err
		}
		return a.res, a.wait(ctx)
	case <-ctx.Done():
		c.unparkJoin(cg, ch)
		return ClassicJoined{}, ctx.Err()
	case <-c.cfg.Log.Done():
		return ClassicJoined{}, fmt.Errorf("%w: its leadership of the group's partition ended", ErrNotCoordinator)
	}
}

// unparkJoin forgets a JoinGroup whose client is gone.
func (c *Coordinator) unparkJoin(cg *classicGroup, ch chan joinAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range cg.members {
		if m.join == ch {
			m.join = nil
		}
	}
}

// SyncClassic serves a SyncGroup: the leader's sets the generation's
// assignments; every member's returns its assignment once they are
// acknowledged.
func (c *Coordinator) SyncClassic(ctx context.Context, req ClassicSync) (ClassicSynced, error) {
	if err := validGroup(req.Group); err != nil {
		return ClassicSynced{}, err
	}
	c.mu.Lock()
	now := c.cfg.Now()
	cg := c.classic[req.Group]
	if cg == nil || cg.state == classicEmpty {
		c.mu.Unlock()
		return ClassicSynced{}, fmt.Errorf("%w: %q: group %q has no members", ErrUnknownMember, req.MemberID, req.Group)
	}
	m, err := cg.member(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
	case req.Generation != cg.generation:
		err = fmt.Errorf("%w: generation %d; group %q is at %d", ErrIllegalGeneration, req.Generation, req.Group, cg.generation)
	case req.ProtocolType != "" && req.ProtocolType != cg.protocolType, req.Protocol != "" && req.Protocol != cg.protocol:
		err = fmt.Errorf("%w: protocol %q/%q; group %q has %q/%q", ErrInconsistentProtocol, req.ProtocolType, req.Protocol, req.Group, cg.protocolType, cg.protocol)
	case cg.state == classicPreparing:
		err = fmt.Errorf("%w: group %q rebalances", ErrRebalanceInProgress, req.Group)
	}
	if err != nil {
		c.mu.Unlock()
		return ClassicSynced{}, err
	}
	m.last = now
	if cg.state == classicStable {
		res := ClassicSynced{ProtocolType: cg.protocolType, Protocol: cg.protocol, Assignment: m.Assignment}
		end := c.end
		c.mu.Unlock()
		return res, c.cfg.Log.WaitAcked(ctx, end)
	}
	// Completing.
	m.synced = true
	if m.sync != nil {
		m.sync <- syncAnswer{err: fmt.Errorf("%w: a newer SyncGroup of member %q came", ErrRebalanceInProgress, m.MemberID)}
	}
	ch := make(chan syncAnswer, 1)
	m.sync = ch
	if m.MemberID == cg.leader {
		if err := c.completeSync(cg, req.Assignments, now); err != nil {
			m.sync = nil
			c.prepareRebalance(cg, now)
			c.mu.Unlock()
			return ClassicSynced{}, err
		}
	}
	c.mu.Unlock()
	select {
	case a := <-ch:
		if a.err != nil {
			return ClassicSynced{}, a.err
		}
		return a.res, a.wait(ctx)
	case <-ctx.Done():
		c.mu.Lock()
		if m.sync == ch {
			m.sync = nil
		}
		c.mu.Unlock()
		return ClassicSynced{}, ctx.Err()
	case <-c.cfg.Log.Done():
		return ClassicSynced{}, fmt.Errorf("%w: its leadership of the group's partition ended", ErrNotCoordinator)
	}
}

// completeSync sets the leader's assignments (those of members not in the
// group dropped, members left out given none), writes the stable
// generation and answers every waiting SyncGroup. The caller holds mu.
func (c *Coordinator) completeSync(cg *classicGroup, assignments map[string][]byte, now time.Time) error {
	total := 0
	for id, a := range assignments {
		if cg.members[id] == nil {
			continue
		}
		if len(a) > c.cfg.MaxMemberBytes {
			return fmt.Errorf("%w: the assignment of member %q is %d bytes, at most %d (--group-max-member-bytes)", ErrAssignmentTooLarge, id, len(a), c.cfg.MaxMemberBytes)
		}
		total += len(a)
	}
	if total > c.cfg.MaxBatchBytes/2 {
		return fmt.Errorf("%w: %d bytes of assignments; a generation is written in one batch of at most %d bytes", ErrAssignmentTooLarge, total, c.cfg.MaxBatchBytes)
	}
	for id, m := range cg.members {
		m.Assignment = slices.Clone(assignments[id])
		if m.Assignment == nil {
			m.Assignment = []byte{}
		}
	}
	wait, err := c.write([]Record{{Group: cg.name, Kind: KindClassic, Classic: cg.generationRecord(true)}})
	if err != nil {
		return err
	}
	wait = shared(wait)
	cg.state, cg.stable = classicStable, cg.generation
	for _, m := range cg.members {
		if m.sync != nil {
			m.sync <- syncAnswer{res: ClassicSynced{ProtocolType: cg.protocolType, Protocol: cg.protocol, Assignment: m.Assignment}, wait: wait}
			m.sync = nil
			m.last = now
		}
	}
	return nil
}

// HeartbeatClassic serves a Heartbeat: ErrRebalanceInProgress while the
// group prepares a rebalance (the member joins again).
func (c *Coordinator) HeartbeatClassic(ctx context.Context, group, member, instance string, generation int32) error {
	if err := validGroup(group); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cg := c.classic[group]
	if cg == nil || cg.state == classicEmpty {
		return fmt.Errorf("%w: %q: group %q has no members", ErrUnknownMember, member, group)
	}
	m, err := cg.member(member, instance)
	if err != nil {
		return err
	}
	if generation != cg.generation {
		return fmt.Errorf("%w: generation %d; group %q is at %d", ErrIllegalGeneration, generation, group, cg.generation)
	}
	m.last = c.cfg.Now()
	if cg.state == classicPreparing {
		return fmt.Errorf("%w: group %q rebalances", ErrRebalanceInProgress, group)
	}
	return nil
}

// LeaveClassic removes the members named, and rebalances the group. It
// returns each member's error (nil: it left).
func (c *Coordinator) LeaveClassic(ctx context.Context, group string, leaving []ClassicLeaving) ([]error, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cg := c.classic[group]
	if cg == nil {
		return nil, fmt.Errorf("%w: group %q has no members", ErrUnknownMember, group)
	}
	now := c.cfg.Now()
	errs := make([]error, len(leaving))
	left := false
	for i, l := range leaving {
		id := l.MemberID
		if id == "" && l.InstanceID != "" {
			id = cg.instances[l.InstanceID]
		}
		if _, ok := cg.pending[id]; ok && id != "" {
			delete(cg.pending, id)
			left = true
			continue
		}
		if _, err := cg.member(id, l.InstanceID); err != nil {
			errs[i] = err
			continue
		}
		c.removeClassic(cg, id, nil)
		left = true
	}
	if left {
		switch cg.state {
		case classicStable, classicCompleting:
			c.prepareRebalance(cg, now)
		}
		c.maybeCompleteJoin(cg, now)
	}
	return errs, nil
}

// expireClassic removes the members not heard from within their session
// (those waiting in a JoinGroup or a SyncGroup are alive), drops the ids
// handed out and not used in time, ends join phases that are due, and
// removes the members that did not sync in time. The caller holds mu.
func (c *Coordinator) expireClassic(now time.Time) {
	for _, name := range slices.Sorted(maps.Keys(c.classic)) {
		cg := c.classic[name]
		for id, until := range cg.pending {
			if now.After(until) {
				delete(cg.pending, id)
			}
		}
		gone := false
		for _, id := range cg.memberOrder() {
			m := cg.members[id]
			if m.join != nil || m.sync != nil || now.Sub(m.last) <= time.Duration(m.SessionTimeoutMs)*time.Millisecond {
				continue
			}
			c.removeClassic(cg, id, fmt.Errorf("%w: member %q of group %q: session expired", ErrUnknownMember, id, name))
			gone = true
		}
		if cg.state == classicCompleting && now.After(cg.syncBy) {
			for _, id := range cg.memberOrder() {
				if !cg.members[id].synced {
					c.removeClassic(cg, id, nil)
					gone = true
				}
			}
		}
		if gone && (cg.state == classicStable || cg.state == classicCompleting) {
			c.prepareRebalance(cg, now)
		}
		c.maybeCompleteJoin(cg, now)
		if cg.state == classicEmpty && len(cg.members) == 0 && len(cg.pending) == 0 {
			delete(c.classic, name)
		}
	}
}

// ErrMetadataTooLarge: a commit's metadata is over MaxMetadataBytes.
var ErrMetadataTooLarge = errors.New("groups: offset metadata too large")

// ClassicCommit is a Kafka OffsetCommit. A Generation below 0, with no
// member named, commits from outside the group, which only a group
// without members takes.
type ClassicCommit struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	Offsets                     []ClassicOffset
}

// ClassicOffset is one offset of a ClassicCommit.
type ClassicOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
}

// CommitClassic serves a Kafka OffsetCommit: an error for the whole
// request (the member, its generation: nothing is written), or one per
// offset (nil: committed). The offsets that pass are written in one
// batch; it returns once they are acknowledged.
func (c *Coordinator) CommitClassic(ctx context.Context, req ClassicCommit) ([]error, error) {
	wait, err := c.BeginCommitClassic(ctx, req)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// BeginCommitClassic is CommitClassic in two steps: it checks the commit
// and appends its offsets (so that a commit begun after it is checked
// against them, as it would be after CommitClassic returned), and returns
// the wait for their acknowledgment, which gives CommitClassic's answer.
// A Kafka connection's commits are begun in the order they are read and
// waited for while the next ones are read, as its produces are.
func (c *Coordinator) BeginCommitClassic(ctx context.Context, req ClassicCommit) (func(context.Context) ([]error, error), error) {
	if err := validGroup(req.Group); err != nil {
		return nil, err
	}
	if len(req.Offsets) > MaxCommitOffsets {
		return nil, fmt.Errorf("%w: a commit of %d offsets, at most %d", ErrInvalidRequest, len(req.Offsets), MaxCommitOffsets)
	}
	// Who commits is checked before the high watermarks are looked up
	// (a lookup may cross the network): a stranger is refused at once.
	// It is checked again with the offsets, below.
	if err := c.checkCommitter(req); err != nil {
		return nil, err
	}
	errs := make([]error, len(req.Offsets))
	commits := make([]Commit, len(req.Offsets))
	hws := make([]int64, len(req.Offsets))
	seen := map[TopicPartition]bool{}
	for i, o := range req.Offsets {
		tp := TopicPartition{o.Topic, o.Partition}
		id, n, ok := c.cfg.Topics.Topic(o.Topic)
		switch {
		case seen[tp]:
			errs[i] = fmt.Errorf("%w: %s/%d twice in one commit", ErrInvalidRequest, o.Topic, o.Partition)
		case !ok || len(o.Topic) >= 2 && o.Topic[:2] == "__":
			errs[i] = fmt.Errorf("%w: %q", ErrUnknownTopic, o.Topic)
		case o.Partition < 0 || o.Partition >= n:
			errs[i] = fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", ErrUnknownPartition, o.Topic, n-1, o.Partition)
		case o.Offset < 0:
			errs[i] = fmt.Errorf("%w: offset %d of %s/%d is negative", ErrInvalidOffset, o.Offset, o.Topic, o.Partition)
		case len(o.Metadata) > MaxMetadataBytes:
			errs[i] = fmt.Errorf("%w: %d bytes for %s/%d, at most %d", ErrMetadataTooLarge, len(o.Metadata), o.Topic, o.Partition, MaxMetadataBytes)
		}
		seen[tp] = true
		if errs[i] != nil {
			continue
		}
		hw, err := c.cfg.Topics.HighWatermark(ctx, o.Topic, o.Partition, o.Offset)
		if err != nil {
			errs[i] = fmt.Errorf("high watermark of %s/%d: %w", o.Topic, o.Partition, err)
			continue
		}
		epoch := req.Generation
		if epoch < 0 {
			epoch = -1
		}
		commits[i] = Commit{Topic: o.Topic, TopicID: id, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata,
			MemberID: req.MemberID, MemberEpoch: epoch}
		hws[i] = hw
	}
	c.mu.Lock()
	now := c.cfg.Now()
	// A group of gostream's own membership (its members may be Kafka
	// clients of ConsumerGroupHeartbeat): the generation is the member's
	// epoch, and the commit's checks are the native ones (the member, its
	// epoch, that it owns the partition).
	g := c.state.Group(req.Group)
	native := g != nil && len(g.Members) > 0
	if !native {
		if err := c.checkClassicCommit(&req, now); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	var recs []Record
	for i := range commits {
		if errs[i] != nil {
			continue
		}
		cm := commits[i]
		cm.TimeMs = now.UnixMilli()
		// The member was checked above; the commit's own checks (the
		// high watermark, no regression) are the native ones.
		checked := cm
		if !native {
			checked.MemberEpoch = -1
		}
		if err := c.state.CheckCommit(req.Group, checked, hws[i], false); err != nil {
			errs[i] = err
			continue
		}
		recs = append(recs, Record{Group: req.Group, Kind: KindCommit, Commit: &cm})
	}
	if len(recs) == 0 {
		c.mu.Unlock()
		return func(context.Context) ([]error, error) { return errs, nil }, nil
	}
	wait, err := c.write(recs)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]error, error) {
		if err := wait(ctx); err != nil {
			return nil, err
		}
		return errs, nil
	}, nil
}

// checkCommitter refuses a commit whose committer is refused whatever it
// commits: a member of neither the group's native membership nor its
// classic one, or one at another epoch or generation.
func (c *Coordinator) checkCommitter(req ClassicCommit) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkNewGroup(req.Group); err != nil {
		return err
	}
	g := c.state.Group(req.Group)
	if g == nil || len(g.Members) == 0 {
		return c.checkClassicCommit(&req, c.cfg.Now())
	}
	m, ok := g.Members[req.MemberID]
	switch {
	case req.Generation < 0:
		return fmt.Errorf("%w: group %q has members; a commit from outside it is refused", ErrUnknownMember, req.Group)
	case !ok:
		return fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, req.MemberID, req.Group)
	case m.MemberEpoch != req.Generation:
		return fmt.Errorf("%w: member %q of group %q is at epoch %d, the commit at %d", ErrFencedMember, req.MemberID, req.Group, m.MemberEpoch, req.Generation)
	}
	return nil
}

// checkClassicCommit checks who commits to a group without members of
// gostream's own membership: a member of the group's current generation,
// or (generation below 0, no member) someone outside a group without
// members. The caller holds mu.
func (c *Coordinator) checkClassicCommit(req *ClassicCommit, now time.Time) error {
	cg := c.classic[req.Group]
	outside := req.Generation < 0 && req.MemberID == "" && req.InstanceID == ""
	if cg == nil || len(cg.members) == 0 {
		switch {
		case req.Generation < 0:
			return nil
		case c.state.Group(req.Group) == nil && cg == nil:
			return fmt.Errorf("%w: generation %d of group %q, which has none", ErrIllegalGeneration, req.Generation, req.Group)
		default:
			return fmt.Errorf("%w: %q: group %q has no members", ErrUnknownMember, req.MemberID, req.Group)
		}
	}
	if outside {
		return fmt.Errorf("%w: group %q has members; a commit from outside it is refused", ErrUnknownMember, req.Group)
	}
	m, err := cg.member(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
		return err
	case req.Generation != cg.generation:
		return fmt.Errorf("%w: generation %d; group %q is at %d", ErrIllegalGeneration, req.Generation, req.Group, cg.generation)
	case cg.state == classicCompleting, cg.generation != cg.stable:
		// Its assignments are not handed out yet (a generation that was
		// completing when the coordinator before this one stopped is
		// never stable).
		return fmt.Errorf("%w: group %q is completing a rebalance", ErrRebalanceInProgress, req.Group)
	}
	m.last = now
	return nil
}

// stateName is a classic group's state as gostream-ctl shows it.
func (cg *classicGroup) stateName() string {
	return [...]string{"empty", "preparing-rebalance", "completing-rebalance", "stable"}[cg.state]
}

// noProtocolType is a classic group's protocol type in its description
// when its members gave none: a description with an empty one is a
// native group's.
const noProtocolType = "(none)"

// describeClassic describes a classic group: its members with their
// client ids and hosts, and, for protocol type "consumer", the topics
// each subscribes to and the partitions the leader gave it (decoded for
// display; other protocols' bytes are not read). The caller holds mu.
func (c *Coordinator) describeClassic(cg *classicGroup) *transport.DescribeGroupResponse {
	resp := &transport.DescribeGroupResponse{Group: cg.name, State: cg.stateName(), GroupEpoch: cg.generation, Assignor: cg.protocol,
		ProtocolType: cmp.Or(cg.protocolType, noProtocolType)}
	now := c.cfg.Now()
	for _, id := range cg.memberOrder() {
		m := cg.members[id]
		d := transport.MemberDescription{MemberID: id, InstanceID: m.InstanceID, Host: m.ClientHost, ClientID: m.ClientID,
			MemberEpoch: cg.generation, SessionTimeoutMs: m.SessionTimeoutMs, SinceHeartbeatMs: now.Sub(m.last).Milliseconds()}
		if cg.protocolType == "consumer" {
			if topics, err := ConsumerSubscription(m.protocol(cg.protocol).Metadata); err == nil {
				d.Topics = topics
			}
			if tps, err := ConsumerAssignment(m.Assignment); err == nil {
				sortPartitions(tps)
				d.Owned = partitionsToWire(tps)
				d.Target = d.Owned
			}
		}
		resp.Members = append(resp.Members, d)
	}
	return resp
}

// KafkaGroup is a group as Kafka's ListGroups and DescribeGroups show it:
// a classic group in Kafka's states, with its members; any other (a
// native group, or one that only holds offsets) Stable or Empty, with no
// protocol type.
type KafkaGroup struct {
	Name, State, ProtocolType, Protocol string
	Members                             []KafkaGroupMember
}

// KafkaGroupMember is a classic member as DescribeGroups shows it: its
// metadata for the group's protocol (while Stable) and its assignment.
type KafkaGroupMember struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// kafkaGroup is name's KafkaGroup; the caller holds mu.
func (c *Coordinator) kafkaGroup(name string, members bool) (KafkaGroup, bool) {
	if cg := c.classic[name]; cg != nil {
		kg := KafkaGroup{Name: name, State: cg.state.String(), ProtocolType: cg.protocolType}
		if cg.state == classicStable {
			kg.Protocol = cg.protocol
		}
		if members {
			for _, id := range cg.memberOrder() {
				m := cg.members[id]
				km := KafkaGroupMember{MemberID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
					Assignment: slices.Clone(m.Assignment)}
				if cg.state == classicStable {
					km.Metadata = slices.Clone(m.protocol(cg.protocol).Metadata)
				}
				kg.Members = append(kg.Members, km)
			}
		}
		return kg, true
	}
	g := c.state.Group(name)
	if g == nil {
		return KafkaGroup{}, false
	}
	kg := KafkaGroup{Name: name, State: classicEmpty.String()}
	if len(g.Members) > 0 {
		kg.State = classicStable.String()
	}
	if g.Classic != nil {
		kg.ProtocolType = g.Classic.ProtocolType
	}
	return kg, true
}

// KafkaGroups lists the coordinator's groups, as acknowledged, without
// their members.
func (c *Coordinator) KafkaGroups(ctx context.Context) ([]KafkaGroup, error) {
	c.mu.Lock()
	names := c.state.Groups()
	for name := range c.classic {
		if c.state.Group(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []KafkaGroup
	for _, name := range names {
		if kg, ok := c.kafkaGroup(name, false); ok {
			out = append(out, kg)
		}
	}
	end := c.end
	c.mu.Unlock()
	return out, c.confirmRead(ctx, end)
}

// KafkaDescribe describes a group as DescribeGroups does: ErrUnknownGroup
// when there is none.
func (c *Coordinator) KafkaDescribe(ctx context.Context, group string) (KafkaGroup, error) {
	if err := validGroup(group); err != nil {
		return KafkaGroup{}, err
	}
	c.mu.Lock()
	kg, ok := c.kafkaGroup(group, true)
	end := c.end
	c.mu.Unlock()
	if !ok {
		return KafkaGroup{Name: group}, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	return kg, c.confirmRead(ctx, end)
}
