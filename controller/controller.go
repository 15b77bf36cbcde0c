package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/transport"
)

// Caller makes one RPC to the node at addr: what the controller needs of
// the network (a *transport.Pool).
type Caller interface {
	Call(ctx context.Context, addr string, api transport.API, req, resp transport.Message) error
}

// Config is what the node that runs the controller hands it.
type Config struct {
	// Dir holds the metadata file and the audit trail
	// (<data-dir>/controller).
	Dir string
	// RootCluster is the cluster id stamped on the node's storage root,
	// empty for a new root.
	RootCluster string
	// Self is the controller's own broker.
	Self   metadata.Broker
	Logger hclog.Logger
	// Apply hands persisted metadata to the controller node's own broker.
	Apply func(*metadata.Cluster) error
	// Push sends persisted metadata to every other registered broker and
	// returns when each has answered or the context ends.
	Push func(context.Context, *metadata.Cluster)
	// Pool reaches brokers.
	Pool Caller
	// WireError gives an error the code (a *transport.Error) clients see
	// it with, for the results of changes of several partitions.
	WireError func(error) error
}

// Controller keeps the cluster metadata on disk and carries out admin
// changes and the operator's commands; see doc.go.
type Controller struct {
	cfg     Config
	logger  hclog.Logger
	store   *metadata.Store
	history *history
	// journal makes every change and audit event durable; see journal.
	journal journal
	// group is the candidates' Raft group; nil for a single controller.
	group *quorum.Group
	// lease is the autopilot's lease while this controller is active
	// (autopilot.go).
	lease leaseKeeper

	// moves is the driver of moves (reassign.go).
	moves moveState
	// opMu runs one operator command (failover, recovery, elect-leaders,
	// replace, restore) at a time.
	opMu sync.Mutex
	// changeMu orders metadata changes: each is computed from the last one
	// persisted and is persisted (and applied on this node) before the
	// next is computed. It is held across that one fsync and nothing else:
	// readers of the metadata take mu only, pushes to the brokers run
	// after it is released. Order: changeMu before mu.
	changeMu sync.Mutex

	mu struct {
		sync.Mutex
		meta *metadata.Cluster
		// inactive is set on a candidate that is not the active
		// controller (candidate.go): it refuses every change with
		// NotController, naming the active one as it knows it then.
		inactive bool
		// refused, when set, is why the controller makes no change at
		// all: its metadata is missing, or older than a broker's (see
		// docs/operations.md). Only RestoreMetadata clears it.
		refused error
		// missing says the metadata file was gone although this root
		// belongs to a cluster; meta is then a placeholder, never saved.
		missing bool
		// seen holds the brokers that reached the controller (by
		// registration or metadata poll) with their addresses, so that a
		// restore can ask those its old metadata does not name.
		seen map[int32]string
		// gossipPeers, once gossip runs, gives the RPC addresses gossip
		// shows, by broker id: where a restore looks for copies of the
		// metadata when the controller's own lists no broker.
		gossipPeers func() map[int32]string
	}
}

// The single controller's files, in its Dir.
const (
	metadataFile = "metadata.json"
	historyFile  = "history.jsonl"
)

// Open loads the metadata, or creates a new cluster with this broker as
// its only member when there is none. Damaged metadata stops the node
// with the file and the reason: it is never rewritten.
//
// A root that belongs to a cluster already (cfg.RootCluster, from its
// stamp) or that holds an audit trail had metadata: when the file is gone,
// nothing is created in its place (a new cluster id would orphan every
// broker). The controller then refuses every change, with a placeholder
// that is never saved, until the operator restores the metadata.
func Open(cfg Config) (*Controller, error) {
	cfg = cfg.withDefaults()
	c := &Controller{
		cfg:     cfg,
		logger:  cfg.Logger,
		store:   metadata.NewStore(filepath.Join(cfg.Dir, metadataFile)),
		history: &history{path: filepath.Join(cfg.Dir, historyFile)},
	}
	files := &fileJournal{store: c.store, hist: c.history, logger: cfg.Logger}
	c.journal = files
	c.mu.seen = map[int32]string{}
	self := cfg.Self
	meta, err := c.store.Load()
	_, histErr := os.Stat(c.history.path)
	switch {
	case errors.Is(err, metadata.ErrNotFound) && (cfg.RootCluster != "" || histErr == nil):
		c.mu.missing = true
		c.mu.refused = fmt.Errorf("%w: the controller's metadata file %s is missing, but this node's storage root belongs to cluster %q: "+
			"nothing is created in its place. Put a backup of the file back and restart this node, or adopt the newest copy the brokers hold: "+
			"gostream-ctl cluster restore-metadata --dry-run, then gostream-ctl cluster restore-metadata", ErrStaleMetadata, c.store.Path(), cfg.RootCluster)
		c.logger.Error("controller metadata is missing; refusing every change until it is restored", "metadata", c.store.Path(), "cluster", cfg.RootCluster)
		// Whether a change whose events are pending was made cannot be
		// told without the file: they stay out of the trail, kept aside.
		if err := os.Rename(c.history.pendingPath(), c.history.pendingPath()+".unresolved"); err == nil {
			c.logger.Warn("audit events of a change that may not have been made are kept out of the trail", "file", c.history.pendingPath()+".unresolved")
		}
		c.mu.meta = &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: cfg.RootCluster, ControllerID: self.ID, Brokers: []metadata.Broker{self}}
		return c, nil
	case errors.Is(err, metadata.ErrNotFound):
		id, err := newClusterID()
		if err != nil {
			return nil, err
		}
		meta = &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: id, ControllerID: self.ID}
		c.logger.Info("creating a new cluster", "cluster", meta.ClusterID, "metadata", c.store.Path())
	case err != nil:
		return nil, fmt.Errorf("controller metadata: %w", err)
	}
	if meta.ControllerID != self.ID {
		return nil, fmt.Errorf("controller metadata %s names controller %d, but this is broker %d", c.store.Path(), meta.ControllerID, self.ID)
	}
	if err := files.settle(meta.Epoch); err != nil {
		return nil, err
	}
	// Topics created before topics had ids get theirs now, once.
	changed := meta.AssignTopicIDs()
	if old, ok := meta.Broker(self.ID); !ok || old != self {
		meta.PutBroker(self)
		changed = true
	}
	if changed {
		meta.Epoch++
		if err := c.persist(context.Background(), meta.Epoch-1, meta, nil); err != nil {
			return nil, err
		}
	}
	c.mu.meta = meta
	return c, nil
}

// withDefaults fills in what cfg leaves out.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.WireError == nil {
		cfg.WireError = func(err error) error { return err }
	}
	return cfg
}

// newClusterID is a new cluster's random id.
func newClusterID() (string, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	return hex.EncodeToString(id), nil
}

// SetGossipPeers gives the controller, once gossip runs, the RPC
// addresses gossip shows, by broker id.
func (c *Controller) SetGossipPeers(fn func() map[int32]string) {
	c.mu.Lock()
	c.mu.gossipPeers = fn
	c.mu.Unlock()
}

// persist makes meta, computed from the metadata of epoch base, the
// controller's durable metadata, with evs, the change's audit events.
func (c *Controller) persist(ctx context.Context, base int64, meta *metadata.Cluster, evs []transport.HistoryEvent) error {
	if err := c.journal.commit(ctx, base, meta, evs); err != nil {
		return fmt.Errorf("persist metadata: %w", err)
	}
	return nil
}

// Metadata returns the current metadata (do not modify it).
func (c *Controller) Metadata() *metadata.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.meta
}

// errNoChange tells change that fn found nothing to change.
var errNoChange = errors.New("no change")

// pushTimeout bounds how long a change waits for brokers to take the new
// metadata; a broker that misses it catches up by polling.
const pushTimeout = 2 * time.Second

// PushTimeout is how long a push of meta may wait for a broker: two
// seconds, and time for the brokers to open the replicas of large
// metadata (a broker answers a push once its replicas follow it): 5 ms a
// partition, up to two minutes.
func PushTimeout(meta *metadata.Cluster) time.Duration {
	n := 0
	for _, t := range meta.Topics {
		n += len(t.Partitions)
	}
	return min(pushTimeout+time.Duration(n)*5*time.Millisecond, 2*time.Minute)
}

// change runs fn on a copy of the metadata, then persists the copy, and
// applies it here while it pushes it to the other brokers, if fn
// succeeded. Nothing changes unless fn succeeds and the copy is persisted.
// It returns once this node has applied it and the brokers have answered
// the push or its timeout passed.
func (c *Controller) change(ctx context.Context, what string, fn func(*metadata.Cluster) error) error {
	return c.changeAudited(ctx, what, "", noAudit(fn))
}

// changeAudited is change for an operator's change: fn also returns the
// results to record in the audit trail, which are committed with it
// (commitAudited).
func (c *Controller) changeAudited(ctx context.Context, what, requester string, fn auditedChange) error {
	next, err := c.commitAudited(ctx, what, requester, fn)
	if err != nil || next == nil {
		return err
	}
	return c.publish(ctx, what, next)
}

// publish applies persisted metadata here while it pushes it to the
// other brokers, and returns once both are done (the push: answered, or
// its timeout passed).
func (c *Controller) publish(ctx context.Context, what string, next *metadata.Cluster) error {
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PushTimeout(next))
		defer cancel()
		c.cfg.Push(pctx, next)
	}()
	err := c.applyHere(what, next)
	<-pushed
	return err
}

// reserve is change for bookkeeping of the controller's own (a reserved
// epoch): persisted and applied, not pushed to the brokers.
func (c *Controller) reserve(ctx context.Context, what string, fn func(*metadata.Cluster) error) error {
	next, err := c.commit(ctx, what, fn)
	if err != nil || next == nil {
		return err
	}
	return c.applyHere(what, next)
}

// applyHere hands persisted metadata to this node's broker. Changes may
// be applied out of order: the broker ignores metadata older than what it
// holds.
func (c *Controller) applyHere(what string, next *metadata.Cluster) error {
	if err := c.cfg.Apply(next); err != nil {
		return fmt.Errorf("%s: persisted but not yet applied: %w", what, err)
	}
	return nil
}

// commit persists one change and returns the new metadata, or nil when fn
// found nothing to change.
func (c *Controller) commit(ctx context.Context, what string, fn func(*metadata.Cluster) error) (*metadata.Cluster, error) {
	return c.commitAudited(ctx, what, "", noAudit(fn))
}

// auditedChange makes a change to the metadata it is given and returns
// what the audit trail is to record of it: the results of the change
// that fn made, each recorded as an event asked for by the requester.
type auditedChange func(*metadata.Cluster) ([]transport.ChangeResult, error)

func noAudit(fn func(*metadata.Cluster) error) auditedChange {
	return func(m *metadata.Cluster) ([]transport.ChangeResult, error) { return nil, fn(m) }
}

// commitAudited is commit for a change whose results go to the audit
// trail: they are committed with the change, in the same Raft entry, or
// for a single controller through the trail's pending file, so that the
// trail holds every change made, whoever finishes the command, and no
// change that was not.
func (c *Controller) commitAudited(ctx context.Context, what, requester string, fn auditedChange) (*metadata.Cluster, error) {
	c.changeMu.Lock()
	defer c.changeMu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.Refusal(); err != nil {
		return nil, err
	}
	next := c.Metadata().Clone()
	base := next.Epoch
	results, err := fn(next)
	if err != nil {
		if errors.Is(err, errNoChange) {
			return nil, nil
		}
		return nil, err
	}
	next.Epoch++
	if err := c.persist(ctx, base, next, events(requester, results)); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.mu.meta = next
	c.mu.Unlock()
	c.logger.Info("metadata changed", "change", what, "metadata_epoch", next.Epoch)
	return next, nil
}
