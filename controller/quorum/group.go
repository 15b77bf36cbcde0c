package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"gostream/metadata"
	"gostream/transport"
)

// Candidate is one controller candidate: its broker id and the RPC
// address Raft reaches it at.
type Candidate struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
}

func (c Candidate) String() string { return fmt.Sprintf("%d@%s", c.ID, c.Addr) }

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func candidateOf(s raft.Server) Candidate {
	id, _ := strconv.Atoi(string(s.ID))
	return Candidate{ID: int32(id), Addr: string(s.Address)}
}

// Config configures a candidate.
type Config struct {
	// Dir holds raft.db and snapshots/.
	Dir  string
	Self Candidate
	// Candidates is every candidate, Self among them: the voters of a
	// group this candidate seeds.
	Candidates []Candidate
	// Seed has a candidate with no Raft state bootstrap the group.
	Seed bool
	// First, with Seed, is the group's first metadata, and FirstHistory
	// its audit trail: written into the bootstrapped log as its second
	// entry, behind the configuration, so that no candidate can ever lead
	// the group without them (docs/controller-raft.md). A seed without
	// First leaves the first metadata to the first leader's proposal.
	First        *metadata.Cluster
	FirstHistory []transport.HistoryEvent
	Transport    raft.Transport
	Logger       hclog.Logger
	// OnChange is called after each change applied here, in log order.
	OnChange func(*metadata.Cluster)
	// Probe, if set, asks whether candidate c answers now: a removal
	// counts as live only the voters that answer it as well as Raft's
	// heartbeats, which may not have failed yet for one just gone.
	Probe func(ctx context.Context, c Candidate) bool

	// Timing; zero takes the defaults (for loopback and LANs).
	HeartbeatTimeout  time.Duration
	ElectionTimeout   time.Duration
	SnapshotThreshold uint64
}

// Default timing. An election starts after HeartbeatTimeout without the
// leader (randomized up to twice that), so a dead active controller is
// replaced within about two of them on a quiet network.
const (
	DefaultHeartbeatTimeout = 500 * time.Millisecond
	DefaultElectionTimeout  = 500 * time.Millisecond
	// Each entry is a whole metadata document: the log is compacted
	// often, so it holds few of them.
	DefaultSnapshotThreshold = 64
	snapshotsRetained        = 2
)

// Group is this candidate's member of the Raft group.
type Group struct {
	cfg    Config
	logger hclog.Logger
	fsm    *fsm
	store  *raftboltdb.BoltStore
	raft   *raft.Raft
	notify chan bool

	obsCh    chan raft.Observation
	observer *raft.Observer
	mu       sync.Mutex
	failing  map[raft.ServerID]bool // voters the leader fails to heartbeat
	closed   bool
	seeded   bool // this Open bootstrapped the group
}

// Seeded reports whether Open bootstrapped the group (Config.Seed, and no
// Raft state was there).
func (g *Group) Seeded() bool { return g.seeded }

// storeFirst appends the first change to a log just bootstrapped: index 2,
// after the configuration, in the bootstrap's term. It is committed with
// the configuration when the first leader commits anything.
func storeFirst(store raft.LogStore, first *metadata.Cluster, history []transport.HistoryEvent) error {
	e, err := changeEntry(NoMetadata, first, history)
	if err != nil {
		return err
	}
	data, err := encodeEntry(e)
	if err != nil {
		return err
	}
	last, err := store.LastIndex()
	if err != nil {
		return err
	}
	var boot raft.Log
	if err := store.GetLog(last, &boot); err != nil {
		return err
	}
	return store.StoreLog(&raft.Log{Index: last + 1, Term: boot.Term, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()})
}

// Open checks this candidate's Raft state, opens it and starts Raft. A
// damaged store or snapshot is ErrCorrupt, with the path and how to
// rebuild the candidate; nothing is rewritten.
func Open(cfg Config) (*Group, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = DefaultElectionTimeout
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "snapshots"), 0o755); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(cfg.Dir, "raft.db")
	if err := checkStore(dbPath); err != nil {
		return nil, corrupt(cfg, dbPath, err)
	}
	g := &Group{cfg: cfg, logger: cfg.Logger, fsm: &fsm{onChange: cfg.OnChange}, failing: map[raft.ServerID]bool{}}
	store, err := raftboltdb.New(raftboltdb.Options{Path: dbPath, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return nil, fmt.Errorf("open the controller's Raft store %s: %w", dbPath, err)
	}
	g.store = store
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir), snapshotsRetained, cfg.Logger.Named("snapshots"))
	if err != nil {
		store.Close()
		return nil, err
	}
	if err := checkSnapshots(filepath.Join(cfg.Dir, "snapshots"), snaps); err != nil {
		store.Close()
		return nil, corrupt(cfg, filepath.Join(cfg.Dir, "snapshots"), err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.Self.ID)
	rc.Logger = newLimitedLogger(cfg.Logger.Named("raft"))
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	rc.CommitTimeout = 5 * time.Millisecond
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.SnapshotThreshold
	rc.SnapshotInterval = 10 * time.Second
	g.notify = make(chan bool, 16)
	rc.NotifyCh = g.notify
	if cfg.Seed {
		has, err := raft.HasExistingState(store, store, snaps)
		if err != nil {
			store.Close()
			return nil, err
		}
		if !has {
			conf := raft.Configuration{}
			for _, c := range cfg.Candidates {
				conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(c.ID), Address: raft.ServerAddress(c.Addr)})
			}
			if err := raft.BootstrapCluster(rc, store, store, snaps, cfg.Transport, conf); err != nil {
				store.Close()
				return nil, fmt.Errorf("bootstrap the controller's Raft group: %w", err)
			}
			if cfg.First != nil {
				if err := storeFirst(store, cfg.First, cfg.FirstHistory); err != nil {
					store.Close()
					return nil, fmt.Errorf("bootstrap the controller's Raft group: the first metadata: %w", err)
				}
			}
			g.seeded = true
			g.logger.Info("seeded the controller group", "candidates", fmt.Sprint(cfg.Candidates))
		}
	}
	r, err := raft.NewRaft(rc, g.fsm, store, store, snaps, cfg.Transport)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("start the controller's Raft: %w", err)
	}
	g.raft = r
	g.obsCh = make(chan raft.Observation, 64)
	g.observer = raft.NewObserver(g.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(g.observer)
	go g.watch()
	return g, nil
}

// watch keeps the set of voters the leader cannot reach.
func (g *Group) watch() {
	for o := range g.obsCh {
		g.mu.Lock()
		switch d := o.Data.(type) {
		case raft.FailedHeartbeatObservation:
			g.failing[d.PeerID] = true
		case raft.ResumedHeartbeatObservation:
			delete(g.failing, d.PeerID)
		case raft.LeaderObservation:
			clear(g.failing) // a new leader counts anew
		}
		g.mu.Unlock()
	}
}

// corrupt is the refusal to start on damaged state.
func corrupt(cfg Config, path string, err error) error {
	return fmt.Errorf("%w: %s: %v. Nothing was changed. To rebuild this candidate from the others: "+
		"remove it from the group (gostream-ctl controller remove --id %d, on a cluster that keeps a quorum without it), "+
		"move %s aside, start the node again (it starts with no Raft state), and add it back "+
		"(gostream-ctl controller add --id %d --addr %s)",
		ErrCorrupt, path, err, cfg.Self.ID, cfg.Dir, cfg.Self.ID, cfg.Self.Addr)
}

// checkStore opens the bolt file read-only, if there is one, and checks
// every page of it.
func checkStore(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil { // bbolt panics on some damaged pages
				err = fmt.Errorf("%v", r)
			}
		}()
		var first error
		for e := range tx.Check() { // drained: the check reads pages until it closes the channel
			if first == nil {
				first = e
			}
		}
		return first
	})
}

// checkSnapshots reads every snapshot in dir: each must have readable
// metadata, the CRC raft keeps, and a payload of ours that decodes.
func checkSnapshots(dir string, snaps *raft.FileSnapshotStore) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		_, rc, err := snaps.Open(e.Name())
		if err != nil {
			return fmt.Errorf("snapshot %s: %v", e.Name(), err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("snapshot %s: %v", e.Name(), err)
		}
		if _, err := decodeSnapshot(data); err != nil {
			return fmt.Errorf("snapshot %s: %v", e.Name(), err)
		}
	}
	return nil
}

// Close stops Raft and closes the store.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	err := g.raft.Shutdown().Error()
	g.raft.DeregisterObserver(g.observer)
	close(g.obsCh)
	return errors.Join(err, g.store.Close())
}

// Metadata is the metadata applied here; nil before the first change.
func (g *Group) Metadata() *metadata.Cluster {
	m, _ := g.fsm.state()
	return m
}

// History is the audit trail applied here, oldest first.
func (g *Group) History() []transport.HistoryEvent {
	_, h := g.fsm.state()
	return slices.Clone(h)
}

// Leadership is notified with true when this candidate becomes the
// active controller and false when it stops being it.
func (g *Group) Leadership() <-chan bool { return g.notify }

// IsLeader reports whether this candidate is the Raft leader now.
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

// ConfirmLeader reports whether this candidate leads the group, confirmed
// by a quorum now: a round of heartbeats that a majority of the voters
// answers in this term. A leader's Raft state alone may be stale: cut off
// from the others it stays Leader until its lease runs out (the heartbeat
// timeout), and paused (SIGSTOP) it still is when it resumes, until a
// round of heartbeats tells it of a newer term. It is false for a
// follower at once, and false when no quorum answers within timeout.
// Raft counts every follower's answer that arrives while it waits, one to
// a request sent a moment before included: what it confirms is that a
// quorum took this candidate for the leader about now (Raft's VerifyLeader,
// as consistent reads use it), not a commit.
func (g *Group) ConfirmLeader(timeout time.Duration) bool {
	if g.raft.State() != raft.Leader {
		return false
	}
	f := g.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // Raft answers it: a quorum, or the step-down
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err == nil
	case <-t.C:
		return false
	}
}

// Leader is the active controller as this candidate knows it.
func (g *Group) Leader() (Candidate, bool) {
	addr, id := g.raft.LeaderWithID()
	if id == "" {
		return Candidate{}, false
	}
	return candidateOf(raft.Server{ID: id, Address: addr}), true
}

// NotLeaderError says which candidate is active, when one is known.
type NotLeaderError struct {
	Self   int32
	Leader Candidate // zero when none is known
}

func (e *NotLeaderError) Error() string {
	if e.Leader.ID == 0 {
		return fmt.Sprintf("candidate %d is not the active controller, and no active controller is known (no quorum yet?)", e.Self)
	}
	return fmt.Sprintf("candidate %d is not the active controller; candidate %s is", e.Self, e.Leader)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

func (g *Group) notLeader() error {
	l, _ := g.Leader()
	if l.ID == g.cfg.Self.ID {
		l = Candidate{}
	}
	return &NotLeaderError{Self: g.cfg.Self.ID, Leader: l}
}

// timeout is what is left of ctx, or d.
func timeout(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return d
}

// Propose commits a change to next, computed from the metadata of epoch
// base (NoMetadata for the first), with the audit events it records. It
// returns once the change is committed and applied here; ErrConflict when
// the committed epoch is not base (nothing applied); a *NotLeaderError
// when this candidate is not active. After any other error the change may
// or may not be committed.
func (g *Group) Propose(ctx context.Context, base int64, next *metadata.Cluster, events []transport.HistoryEvent) error {
	// This candidate applies a copy of next itself, in the form Parse
	// gives what the others decode, so that every candidate holds the
	// same state.
	own := next.Clone()
	if err := own.Canonicalize(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	e, err := changeEntry(base, next, events)
	if err != nil {
		return err
	}
	return g.applyOwn(ctx, e, own)
}

// changeEntry is the entry of a change to next from epoch base; it
// carries the document compact.
func changeEntry(base int64, next *metadata.Cluster, events []transport.HistoryEvent) (*entry, error) {
	raw, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	return &entry{Kind: "change", Base: base, Meta: raw, Events: events}, nil
}

// Record commits audit events alone.
func (g *Group) Record(ctx context.Context, events []transport.HistoryEvent) error {
	if len(events) == 0 {
		return nil
	}
	return g.applyOwn(ctx, &entry{Kind: "record", Events: events}, nil)
}

// applyOwn proposes e, whose metadata, for a change, is meta.
func (g *Group) applyOwn(ctx context.Context, e *entry, meta *metadata.Cluster) error {
	if g.raft.State() != raft.Leader {
		return g.notLeader()
	}
	data, err := encodeEntry(e)
	if err != nil {
		return err
	}
	g.fsm.propose(data, e, meta)
	defer g.fsm.forget(data)
	f := g.raft.Apply(data, timeout(ctx, 10*time.Second))
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return g.notLeader()
		}
		return fmt.Errorf("commit on the controller group: %w", err)
	}
	if a, ok := f.Response().(applied); ok && a.err != nil {
		return a.err
	}
	return nil
}

// Barrier waits until every entry committed before it is applied here: a
// new active controller calls it before it reads the state.
func (g *Group) Barrier(ctx context.Context) error {
	if err := g.raft.Barrier(timeout(ctx, 10*time.Second)).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return g.notLeader()
		}
		return err
	}
	return nil
}

// Member is one candidate of the group as the status shows it.
type Member struct {
	Candidate
	Voter bool `json:"voter"`
	// Reachable is false for a voter the leader fails to heartbeat (known
	// on the leader only).
	Reachable bool `json:"reachable"`
}

// Status is this candidate's view of the group.
type Status struct {
	Self         Candidate `json:"self"`
	State        string    `json:"state"` // Leader, Follower, Candidate, Shutdown
	Term         uint64    `json:"term"`
	LastIndex    uint64    `json:"last_index"`
	CommitIndex  uint64    `json:"commit_index"`
	AppliedIndex uint64    `json:"applied_index"`
	Leader       Candidate `json:"leader"` // zero when none is known
	Members      []Member  `json:"members"`
	// Epoch is the metadata epoch applied here (-1 before any).
	Epoch int64 `json:"metadata_epoch"`
}

// Status reports this candidate's Raft state.
func (g *Group) Status() Status {
	st := g.raft.Stats()
	num := func(k string) uint64 {
		v, _ := strconv.ParseUint(st[k], 10, 64)
		return v
	}
	s := Status{Self: g.cfg.Self, State: g.raft.State().String(), Term: num("term"), LastIndex: num("last_log_index"),
		CommitIndex: num("commit_index"), AppliedIndex: num("applied_index"), Epoch: NoMetadata}
	s.Leader, _ = g.Leader()
	if m := g.Metadata(); m != nil {
		s.Epoch = m.Epoch
	}
	if f := g.raft.GetConfiguration(); f.Error() == nil {
		g.mu.Lock()
		for _, srv := range f.Configuration().Servers {
			m := Member{Candidate: candidateOf(srv), Voter: srv.Suffrage == raft.Voter, Reachable: !g.failing[srv.ID]}
			s.Members = append(s.Members, m)
		}
		g.mu.Unlock()
	}
	return s
}

// Transfer hands the active controller to candidate to.
func (g *Group) Transfer(ctx context.Context, to int32) error {
	if g.raft.State() != raft.Leader {
		return g.notLeader()
	}
	srv, ok := g.member(to)
	if !ok {
		return fmt.Errorf("%w: candidate %d is not a member of the controller group", ErrInvalid, to)
	}
	if to == g.cfg.Self.ID {
		return nil
	}
	if err := g.raft.LeadershipTransferToServer(srv.ID, srv.Address).Error(); err != nil {
		return fmt.Errorf("transfer the active controller to %d: %w", to, err)
	}
	return nil
}

func (g *Group) member(id int32) (raft.Server, bool) {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Server{}, false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == serverID(id) {
			return srv, true
		}
	}
	return raft.Server{}, false
}

// ErrInvalid: a membership request that cannot be carried out.
var ErrInvalid = errors.New("invalid controller group change")

// Add makes c a voter of the group. It returns once the change is
// committed; c catches up in the background.
func (g *Group) Add(ctx context.Context, c Candidate) error {
	if g.raft.State() != raft.Leader {
		return g.notLeader()
	}
	if srv, ok := g.member(c.ID); ok && string(srv.Address) != c.Addr {
		return fmt.Errorf("%w: candidate %d is a member already, at %s", ErrInvalid, c.ID, srv.Address)
	}
	if err := g.raft.AddVoter(serverID(c.ID), raft.ServerAddress(c.Addr), 0, timeout(ctx, 10*time.Second)).Error(); err != nil {
		return fmt.Errorf("add candidate %s: %w", c, err)
	}
	return nil
}

// Remove takes candidate id out of the group, unless the voters left,
// counting only those the leader reaches, would be fewer than a quorum of
// the group without it.
func (g *Group) Remove(ctx context.Context, id int32) error {
	if g.raft.State() != raft.Leader {
		return g.notLeader()
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	voters, found := 0, false
	var others []raft.Server
	g.mu.Lock()
	for _, srv := range f.Configuration().Servers {
		if srv.ID == serverID(id) {
			found = true
			continue
		}
		if srv.Suffrage != raft.Voter {
			continue
		}
		voters++
		if !g.failing[srv.ID] {
			others = append(others, srv)
		}
	}
	g.mu.Unlock()
	live := 0
	for _, srv := range others {
		if srv.ID == serverID(g.cfg.Self.ID) || g.cfg.Probe == nil || g.cfg.Probe(ctx, candidateOf(srv)) {
			live++
		}
	}
	if !found {
		return fmt.Errorf("%w: candidate %d is not a member of the controller group", ErrInvalid, id)
	}
	if voters == 0 {
		return fmt.Errorf("%w: candidate %d is the last one", ErrInvalid, id)
	}
	if live < voters/2+1 {
		return fmt.Errorf("%w: without candidate %d, %d of the %d candidates left are reachable, fewer than the %d a quorum needs",
			ErrInvalid, id, live, voters, voters/2+1)
	}
	if err := g.raft.RemoveServer(serverID(id), 0, timeout(ctx, 10*time.Second)).Error(); err != nil {
		return fmt.Errorf("remove candidate %d: %w", id, err)
	}
	return nil
}

// HasState reports whether cfg.Dir holds Raft state: the candidate was
// bootstrapped or joined a group. A candidate with no state may seed one.
// A damaged store is ErrCorrupt, as for Open.
func HasState(cfg Config) (bool, error) {
	dir := cfg.Dir
	dbPath := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err := checkStore(dbPath); err != nil {
		return false, corrupt(cfg, dbPath, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: dbPath, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return false, fmt.Errorf("open the controller's Raft store %s: %w", dbPath, err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, hclog.NewNullLogger())
	if err != nil {
		return false, err
	}
	return raft.HasExistingState(store, store, snaps)
}
