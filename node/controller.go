package node

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

	"gostream/metadata"
	"gostream/transport"
)

// controller keeps the cluster metadata on disk and carries out admin
// changes. Every change is validated, persisted, and only then applied and
// reported done. Changes are serialized by mu; the persisted file is the
// truth, and mu.meta is the last version persisted.
type controller struct {
	store  *metadata.Store
	logger hclog.Logger
	// apply hands persisted metadata to this node's broker.
	apply func(*metadata.Cluster) error
	// push sends persisted metadata to every other registered broker and
	// returns when each has answered or the context ends.
	push func(ctx context.Context, meta *metadata.Cluster)
	// pool reaches brokers for failover and recovery.
	pool *transport.Pool
	// opMu runs one operator change (failover, recovery) at a time.
	opMu sync.Mutex
	// opSilent, during a failover request, holds the brokers that did not
	// answer it once (guarded by opMu; see answers).
	opSilent map[int32]bool
	history  *history
	// gossipPeers, once gossip runs, gives the RPC addresses gossip shows,
	// by broker id: where a restore looks for copies of the metadata when
	// the controller's own lists no broker. Nil before.
	gossipPeers func() map[int32]string

	mu struct {
		sync.Mutex
		meta *metadata.Cluster
		// refused, when set, is why the controller makes no change at
		// all: its metadata is missing, or older than a broker's (see
		// docs/operations.md). Only restoreMetadata clears it.
		refused error
		// missing says the metadata file was gone although this root
		// belongs to a cluster; meta is then a placeholder, never saved.
		missing bool
		// seen holds the brokers that reached the controller (by
		// registration or metadata poll) with their addresses, so that a
		// restore can ask those its old metadata does not name.
		seen map[int32]string
	}
}

// openController loads the metadata, or creates a new cluster with this
// broker as its only member when there is none. Damaged metadata stops the
// node with the file and the reason: it is never rewritten.
//
// A root that belongs to a cluster already (rootCluster, from its stamp) or
// that holds an audit trail had metadata: when the file is gone, nothing is
// created in its place (a new cluster id would orphan every broker). The
// controller then starts refusing every change, with a placeholder that is
// never saved, until the operator restores the metadata.
func openController(dataDir, rootCluster string, self metadata.Broker, logger hclog.Logger, apply func(*metadata.Cluster) error, push func(context.Context, *metadata.Cluster), pool *transport.Pool) (*controller, error) {
	c := &controller{
		store:   metadata.NewStore(filepath.Join(dataDir, "controller", "metadata.json")),
		logger:  logger,
		apply:   apply,
		push:    push,
		pool:    pool,
		history: &history{path: filepath.Join(dataDir, "controller", "history.jsonl")},
	}
	c.mu.seen = map[int32]string{}
	meta, err := c.store.Load()
	_, histErr := os.Stat(c.history.path)
	switch {
	case errors.Is(err, metadata.ErrNotFound) && (rootCluster != "" || histErr == nil):
		c.mu.missing = true
		c.mu.refused = fmt.Errorf("%w: the controller's metadata file %s is missing, but this node's storage root belongs to cluster %q: "+
			"nothing is created in its place. Put a backup of the file back and restart this node, or adopt the newest copy the brokers hold: "+
			"gostream-ctl cluster restore-metadata --dry-run, then gostream-ctl cluster restore-metadata", transport.ErrStaleMetadata, c.store.Path(), rootCluster)
		logger.Error("controller metadata is missing; refusing every change until it is restored", "metadata", c.store.Path(), "cluster", rootCluster)
		c.mu.meta = &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: rootCluster, ControllerID: self.ID, Brokers: []metadata.Broker{self}}
		return c, nil
	case errors.Is(err, metadata.ErrNotFound):
		id := make([]byte, 8)
		if _, err := rand.Read(id); err != nil {
			return nil, err
		}
		meta = &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: hex.EncodeToString(id), ControllerID: self.ID}
		logger.Info("creating a new cluster", "cluster", meta.ClusterID, "metadata", c.store.Path())
	case err != nil:
		return nil, fmt.Errorf("controller metadata: %w", err)
	}
	if meta.ControllerID != self.ID {
		return nil, fmt.Errorf("controller metadata %s names controller %d, but this is broker %d", c.store.Path(), meta.ControllerID, self.ID)
	}
	// Topics created before topics had ids get theirs now, once.
	changed := meta.AssignTopicIDs()
	if old, ok := meta.Broker(self.ID); !ok || old != self {
		meta.PutBroker(self)
		changed = true
	}
	if changed {
		meta.Epoch++
		if err := c.persist(meta); err != nil {
			return nil, err
		}
	}
	c.mu.meta = meta
	return c, nil
}

func (c *controller) persist(meta *metadata.Cluster) error {
	if err := ensureDir(filepath.Dir(c.store.Path())); err != nil {
		return err
	}
	if err := c.store.Save(meta); err != nil {
		return fmt.Errorf("persist metadata: %w", err)
	}
	return nil
}

// Metadata returns the current metadata (do not modify it).
func (c *controller) Metadata() *metadata.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.meta
}

// errNoChange tells change that fn found nothing to change.
var errNoChange = errors.New("no change")

// pushTimeout bounds how long a change waits for brokers to take the new
// metadata; a broker that misses it catches up by polling.
const pushTimeout = 2 * time.Second

// pushTimeoutFor is pushTimeout, and time for the brokers to open the
// replicas of large metadata (a broker answers a push once its replicas
// follow it): 5 ms a partition, up to two minutes.
func pushTimeoutFor(meta *metadata.Cluster) time.Duration {
	n := 0
	for _, t := range meta.Topics {
		n += len(t.Partitions)
	}
	return min(pushTimeout+time.Duration(n)*5*time.Millisecond, 2*time.Minute)
}

// change runs fn on a copy of the metadata, then persists the copy, applies
// it here and pushes it to the other brokers, if fn succeeded. Nothing
// changes unless fn succeeds and the copy is persisted.
func (c *controller) change(ctx context.Context, what string, fn func(*metadata.Cluster) error) error {
	return c.changeAndPush(ctx, what, true, fn)
}

// reserve is change for bookkeeping of the controller's own (a reserved
// epoch): persisted and applied, not pushed to the brokers.
func (c *controller) reserve(ctx context.Context, what string, fn func(*metadata.Cluster) error) error {
	return c.changeAndPush(ctx, what, false, fn)
}

func (c *controller) changeAndPush(ctx context.Context, what string, push bool, fn func(*metadata.Cluster) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.mu.refused != nil {
		return c.mu.refused
	}
	next := c.mu.meta.Clone()
	if err := fn(next); err != nil {
		if errors.Is(err, errNoChange) {
			return nil
		}
		return err
	}
	next.Epoch++
	if err := c.persist(next); err != nil {
		return err
	}
	c.mu.meta = next
	c.logger.Info("metadata changed", "change", what, "metadata_epoch", next.Epoch)
	if err := c.apply(next); err != nil {
		return fmt.Errorf("%s: persisted but not yet applied: %w", what, err)
	}
	if push {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeoutFor(next))
		defer cancel()
		c.push(pctx, next)
	}
	return nil
}

// register records a broker's addresses (persisted only when they changed)
// and returns the metadata. A broker id belongs to one storage root: the
// first registration binds the id to the root that made it (and the
// binding is persisted), and the id is refused from any other root with
// DuplicateBroker, naming both, until the operator replaces the broker
// (replaceBroker). A registration from the bound root at another address
// is a broker that moved, unless the registered address still answers as
// that broker with that root: then it is a copy of the root running beside
// it, refused too. A broker whose root names another cluster is refused
// with StampMismatch.
func (c *controller) register(ctx context.Context, req *transport.RegisterBrokerRequest) (*metadata.Cluster, error) {
	if req.ID <= 0 || req.Addr == "" {
		return nil, fmt.Errorf("%w: broker id %d, address %q", transport.ErrInvalidRequest, req.ID, req.Addr)
	}
	cur := c.Metadata()
	c.noteBroker(req.ID, req.Addr)
	if req.ClusterID != "" && cur.ClusterID != "" && req.ClusterID != cur.ClusterID {
		return nil, fmt.Errorf("%w: broker %d's storage belongs to cluster %q, this is cluster %q", transport.ErrStampMismatch, req.ID, req.ClusterID, cur.ClusterID)
	}
	c.claimedEpoch(ctx, req.ID, req.MetadataEpoch)
	if err := c.refusal(); err != nil {
		return nil, err
	}
	if old, ok := cur.Broker(req.ID); ok && old.RootID != "" {
		switch {
		case req.RootID != old.RootID:
			state := "which does not answer"
			if c.answersAs(ctx, old) {
				state = "which answers"
			}
			return nil, fmt.Errorf("%w: broker %d is registered with storage root %s at %s, %s; this node (%s) has storage root %s. "+
				"A broker id belongs to one storage root: give this node its own --id, or, if broker %d's disk is lost for good, "+
				"stop it and run gostream-ctl broker replace %d", transport.ErrDuplicateBroker,
				req.ID, old.RootID, old.Addr, state, req.Addr, rootIDOrNone(req.RootID), req.ID, req.ID)
		case req.Addr != old.Addr && c.answersAs(ctx, old):
			return nil, fmt.Errorf("%w: broker %d with storage root %s answers at %s, and this node (%s) claims the same root: "+
				"is its data directory a copy? A storage root may run in one process only", transport.ErrDuplicateBroker,
				req.ID, old.RootID, old.Addr, req.Addr)
		}
	}
	b := metadata.Broker{ID: req.ID, Addr: req.Addr, HTTP: req.HTTP, Gossip: req.Gossip, RootID: req.RootID}
	err := c.change(ctx, fmt.Sprintf("register broker %d", req.ID), func(m *metadata.Cluster) error {
		if old, ok := m.Broker(b.ID); ok && old == b {
			return errNoChange
		}
		if old, ok := m.Broker(b.ID); ok && old.RootID == "" && b.RootID != "" {
			c.logger.Info("broker bound to its storage root", "peer", b.ID, "root_id", b.RootID, "addr", b.Addr)
		}
		m.PutBroker(b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Metadata(), nil
}

func rootIDOrNone(id string) string {
	if id == "" {
		return "(none: a node of an older version)"
	}
	return id
}

// identityTimeout bounds asking a broker who it is.
const identityTimeout = 1500 * time.Millisecond

// answersAs reports whether b's registered address answers as broker b.ID
// with b's storage root: the broker b names is alive there.
func (c *controller) answersAs(ctx context.Context, b metadata.Broker) bool {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	var resp transport.DescribeClusterResponse
	if err := c.pool.Call(ctx, b.Addr, transport.APIDescribeCluster, &transport.Empty{}, &resp); err != nil {
		return false
	}
	return resp.NodeID == b.ID && (b.RootID == "" || resp.RootID == b.RootID)
}

func (c *controller) createTopic(ctx context.Context, req *transport.CreateTopicRequest) (*metadata.Topic, error) {
	if req.Partitions < 1 || req.Partitions > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d outside [1, %d]", transport.ErrInvalidPartitions, req.Partitions, metadata.MaxPartitions)
	}
	if req.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d below 1", transport.ErrInvalidReplication, req.ReplicationFactor)
	}
	config, err := topicConfigFromWire(req.Config)
	if err != nil {
		return nil, err
	}
	var created metadata.Topic
	err = c.change(ctx, "create topic "+req.Name, func(m *metadata.Cluster) error {
		t, err := m.AddTopic(req.Name, int(req.Partitions), int(req.ReplicationFactor))
		if err != nil {
			return err
		}
		t.Config = config
		created = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &created, nil
}

func (c *controller) deleteTopic(ctx context.Context, name string) error {
	return c.change(ctx, "delete topic "+name, func(m *metadata.Cluster) error {
		return m.RemoveTopic(name)
	})
}

func (c *controller) sealTopic(ctx context.Context, name string) error {
	return c.change(ctx, "seal topic "+name, func(m *metadata.Cluster) error {
		t := m.Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		t.Sealed = true
		return nil
	})
}
