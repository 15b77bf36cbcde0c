package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/groups"
	"gostream/metadata"
	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// Replicas hosts this node's partition replicas and the cached cluster
// metadata they are served by: it opens, leads, follows and closes them
// as the metadata says, checkpoints their high watermarks, runs their
// retention and brings back logs that failed.
type Replicas struct {
	id      int32
	root    *storage.Root
	logOpts storage.Options
	// defaults is the node's topic configuration for the keys a topic
	// does not set (see setPolicy).
	defaults metadata.LogConfig
	logger   hclog.Logger
	// peers reaches other brokers.
	peers replication.Peers
	// cache keeps the last metadata on disk, so a node serves at once after
	// a restart even while the controller is down. Nil on the controller,
	// whose own file is the truth.
	cache *metadata.Store
	// hw checkpoints the replicas' high watermarks; nil in tests that
	// build one by hand.
	hw *hwCheckpoints
	// onHosted is told how many replicas are hosted after each change;
	// onStaleEpoch of each request a replica refuses for its old epoch.
	onHosted     func(int)
	onStaleEpoch func()
	// awaitingController is set while a restarted broker has not yet heard
	// from the controller: it leads nothing on the strength of its cached
	// metadata alone, since it cannot know whether a failover happened.
	awaitingController atomic.Bool
	// movePacer paces the copies to replicas being added by moves.
	movePacer replication.Pacer

	// meta is the metadata applied last; readers never wait for an
	// application in progress.
	meta atomic.Pointer[metadata.Cluster]
	// acceptMu orders the acceptance of new metadata, applyMu the
	// reconciliations of the replicas with it (in that order when both
	// are taken).
	acceptMu sync.Mutex
	applyMu  sync.Mutex
	// reconciled is the highest metadata epoch the replicas have been
	// reconciled with; WaitReconciled waits for it.
	reconciled struct {
		sync.Mutex
		epoch   int64
		changed chan struct{} // closed when epoch grows
	}

	mu struct {
		sync.RWMutex
		replicas map[topicPartition]*Replica
		// offline holds the replicas whose logs could not be opened
		// (corruption), with the reason; they serve nothing until the
		// operator rebuilds them with recover.
		offline map[topicPartition]error
	}
}

// ReplicasConfig is what a node gives its Replicas.
type ReplicasConfig struct {
	// Broker is this node's broker id.
	Broker int32
	Root   *storage.Root
	// LogOptions are every log's options but its policy (the topic's).
	LogOptions storage.Options
	// Defaults is the node's topic configuration for the keys a topic
	// does not set.
	Defaults metadata.LogConfig
	// Peers reaches other brokers; required once metadata applies.
	Peers replication.Peers
	// Cache, if set, keeps the metadata applied last on disk (every
	// broker but the single controller, whose own file is the truth).
	Cache *metadata.Store
	// CheckpointHW keeps the replicas' high watermarks in the root
	// (hwCheckpointFile), so that a restarted leader serves at once.
	CheckpointHW bool
	// AwaitingController starts the broker leading nothing until
	// HeardFromController (a restart on cached metadata).
	AwaitingController bool
	Logger             hclog.Logger
	// OnHosted and OnStaleEpoch, if set, feed the node's metrics.
	OnHosted     func(replicas int)
	OnStaleEpoch func()
}

type topicPartition struct {
	topic     string
	partition int32
}

// Replica is one hosted replica of a partition: its log and the
// replication of it.
type Replica struct {
	Log  *storage.Log
	Part *replication.Partition
	// floor follows where the newest complete snapshot of a
	// __consumer_offsets replica starts; only retention uses it.
	floor *groups.SnapshotFloor
}

// NewReplicas returns the host of a node's replicas; nothing is open until
// metadata is applied.
func NewReplicas(cfg ReplicasConfig) *Replicas {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	b := &Replicas{id: cfg.Broker, root: cfg.Root, logOpts: cfg.LogOptions, defaults: cfg.Defaults, logger: cfg.Logger,
		peers: cfg.Peers, cache: cfg.Cache, onHosted: cfg.OnHosted, onStaleEpoch: cfg.OnStaleEpoch}
	if cfg.CheckpointHW {
		b.hw = loadHWCheckpoints(cfg.Root.Dir(), cfg.Logger)
	}
	b.awaitingController.Store(cfg.AwaitingController)
	b.mu.replicas = make(map[topicPartition]*Replica)
	b.mu.offline = make(map[topicPartition]error)
	return b
}

// HeardFromController lets a broker that restarted on cached metadata
// lead what the metadata says: the controller has answered it.
func (b *Replicas) HeardFromController() { b.awaitingController.Store(false) }

// CachedMetadata returns the metadata the cache holds (metadata.ErrNotFound
// when there is none, or no cache).
func (b *Replicas) CachedMetadata() (*metadata.Cluster, error) {
	if b.cache == nil {
		return nil, metadata.ErrNotFound
	}
	return b.cache.Load()
}

// ApplyMetadata makes the hosted replicas match meta: it opens the logs of
// replicas assigned to this broker, applies leadership, and closes and
// removes the replicas of deleted topics. Metadata older than what is held
// is ignored.
func (b *Replicas) ApplyMetadata(meta *metadata.Cluster) error {
	start := time.Now()
	if err := b.AcceptMetadata(meta); err != nil {
		return err
	}
	accepted := time.Since(start)
	err := b.reconcile()
	b.logger.Debug("metadata applied", "metadata_epoch", meta.Epoch, "accept", accepted, "reconcile", time.Since(start)-accepted)
	return err
}

// AcceptMetadata makes meta the metadata this broker holds and answers
// with, cached on disk first, unless it is older than what it holds (then
// it is ignored). The replicas follow it only when it is applied
// (ApplyMetadata is AcceptMetadata, then the replicas reconciled with it).
func (b *Replicas) AcceptMetadata(meta *metadata.Cluster) error {
	b.acceptMu.Lock()
	defer b.acceptMu.Unlock()
	cur := b.meta.Load()
	if cur != nil && meta.Epoch < cur.Epoch {
		return nil
	}
	if cur != nil && meta.ClusterID != cur.ClusterID {
		return fmt.Errorf("%w: metadata of cluster %q, this node is in cluster %q", storage.ErrStampMismatch, meta.ClusterID, cur.ClusterID)
	}
	if err := b.root.SetClusterID(meta.ClusterID); err != nil {
		return err
	}
	if b.cache != nil && (cur == nil || meta.Epoch > cur.Epoch) {
		if err := b.cache.Save(meta); err != nil {
			return fmt.Errorf("cache metadata: %w", err)
		}
	}
	b.meta.Store(meta)
	return nil
}

// openParallel bounds the replicas opened at once: a new topic of
// thousands of partitions opens that many logs, each a few fsyncs, and
// the disk takes many at a time.
const openParallel = 16

// reconcile makes the hosted replicas match the metadata held: it opens
// the logs of replicas assigned to this broker (several at once), applies
// leadership, and closes and removes the replicas of deleted topics.
func (b *Replicas) reconcile() error {
	// applyMu orders whole reconciliations; mu is held only to touch the
	// replica map, never while a partition changes state (which may wait
	// for its follower senders, and they read the metadata).
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	meta := b.meta.Load()
	if meta == nil {
		return nil
	}
	defer b.markReconciled(meta.Epoch)
	var errs []error
	type change struct {
		r  *Replica
		st replication.State
	}
	var changes []change
	want := map[topicPartition]bool{}
	type toOpen struct {
		tp topicPartition
		id string
		st replication.State
	}
	var opens []toOpen
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			if !slices.Contains(part.Replicas, b.id) {
				continue
			}
			tp := topicPartition{t.Name, int32(p)}
			want[tp] = true
			st := replication.State{Leader: part.Leader, LeaderEpoch: part.LeaderEpoch, Active: part.Active, Replicas: part.Replicas}
			if st.Leader == b.id && b.awaitingController.Load() {
				st.Leader = -1
			}
			b.mu.RLock()
			r, ok := b.mu.replicas[tp]
			b.mu.RUnlock()
			if ok && r.Part.TopicID != t.ID {
				// The topic was deleted and created again while this
				// broker held the old one open: the old replica goes.
				b.closeReplica(tp, r)
				ok = false
			}
			switch {
			case ok:
				b.applyTopicConfig(r, &t)
				changes = append(changes, change{r, st})
			case b.OfflineErr(tp.topic, tp.partition) == nil: // an offline one stays so until recover rebuilds it
				opens = append(opens, toOpen{tp, t.ID, st})
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, openParallel)
	for _, o := range opens {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := b.openReplica(o.tp, o.id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				changes = append(changes, change{r, o.st})
			case !errors.Is(err, storage.ErrCorrupt):
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	for _, c := range changes {
		err := c.r.Part.SetState(c.st)
		switch {
		case errors.Is(err, replication.ErrStaleEpoch):
			// The replica has seen a newer epoch than this metadata gives (a
			// failover fenced it and did not finish): it leads nothing and
			// waits for metadata that catches up.
			b.logger.Warn("metadata is behind this replica's epoch; waiting for newer metadata",
				"topic", c.r.Part.Topic, "partition", c.r.Part.Index, "epoch", c.st.LeaderEpoch, "fenced", c.r.Part.FencedEpoch())
		case err != nil:
			errs = append(errs, err)
		}
	}
	var gone []topicPartition
	var goneReplicas []*Replica
	b.mu.Lock()
	for tp, r := range b.mu.replicas {
		if !want[tp] {
			gone = append(gone, tp)
			goneReplicas = append(goneReplicas, r)
			delete(b.mu.replicas, tp)
		}
	}
	hosted := len(b.mu.replicas)
	b.mu.Unlock()
	if b.onHosted != nil {
		b.onHosted(hosted)
	}
	for i, tp := range gone {
		b.closeLog(tp, goneReplicas[i])
		if meta.Topic(tp.topic) == nil {
			if err := b.root.RemoveTopic(tp.topic); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// The topic is there, this broker no longer holds one of its
		// replicas: a move took it off, or was cancelled before the
		// replica it added here became one (docs/reassignment.md). Only
		// metadata the controller persisted says so.
		b.logger.Info("deleting a replica this broker no longer holds", "topic", tp.topic, "partition", tp.partition)
		if b.hw != nil {
			// First: a crash between the two leaves a replica directory
			// nothing opens, never a checkpoint above an empty log.
			if err := b.hw.forget(tp); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := b.root.RemoveReplica(tp.topic, tp.partition); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// markReconciled records that the replicas were reconciled with the
// metadata of epoch (whatever the reconciliation's errors: they are
// reported to whoever applied it).
func (b *Replicas) markReconciled(epoch int64) {
	b.reconciled.Lock()
	defer b.reconciled.Unlock()
	if epoch > b.reconciled.epoch {
		b.reconciled.epoch = epoch
		if b.reconciled.changed != nil {
			close(b.reconciled.changed)
			b.reconciled.changed = nil
		}
	}
}

// WaitReconciled waits until the replicas have been reconciled with
// metadata of epoch or newer, or ctx ends.
func (b *Replicas) WaitReconciled(ctx context.Context, epoch int64) error {
	for {
		b.reconciled.Lock()
		if b.reconciled.epoch >= epoch {
			b.reconciled.Unlock()
			return nil
		}
		if b.reconciled.changed == nil {
			b.reconciled.changed = make(chan struct{})
		}
		ch := b.reconciled.changed
		b.reconciled.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *Replicas) openReplica(tp topicPartition, topicID string) (*Replica, error) {
	return b.openReplicaAt(tp, topicID, 0, true)
}

// topicIDFile, in a replica's directory, names the incarnation of the
// topic the replica belongs to (metadata.Topic.ID).
const topicIDFile = "topic-id"

// openReplicaAt opens a replica's log; a new, empty log starts at offset
// initial. A directory left by an earlier incarnation of the topic (its
// topic-id file names another id: the topic was deleted and created again
// while this broker was away) is removed first: its records belong to a
// topic that no longer exists. A log found corrupt is recorded as offline,
// and the node goes on serving its other replicas.
//
// With checkpointed, the replica starts with the high watermark of the
// last checkpoint (see hwCheckpoints); a replica rebuilt from empty does
// not.
func (b *Replicas) openReplicaAt(tp topicPartition, topicID string, initial int64, checkpointed bool) (*Replica, error) {
	dir, err := b.root.ReplicaDir(tp.topic, tp.partition)
	if err != nil {
		return nil, err
	}
	idPath := filepath.Join(dir, topicIDFile)
	held, err := os.ReadFile(idPath)
	switch {
	case err == nil && topicID != "" && !metadata.ValidID(strings.TrimSpace(string(held))):
		// Not an id at all: the file is damaged, and says nothing about
		// whose records these are. Nothing is removed on its word.
		return nil, b.markOffline(tp, fmt.Errorf("open replica %s/%d: %w: %s holds %q, not a topic id", tp.topic, tp.partition, storage.ErrCorrupt, idPath, held))
	case err == nil && topicID != "" && strings.TrimSpace(string(held)) != topicID:
		b.logger.Warn("removing a replica of a deleted incarnation of the topic", "topic", tp.topic, "partition", tp.partition,
			"old_id", strings.TrimSpace(string(held)), "id", topicID)
		if err := b.root.RemoveReplica(tp.topic, tp.partition); err != nil {
			return nil, fmt.Errorf("remove replica %s/%d of a deleted incarnation: %w", tp.topic, tp.partition, err)
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("replica %s/%d: %w", tp.topic, tp.partition, err)
	}
	var hw int64
	if checkpointed && b.hw != nil {
		hw = b.hw.of(tp, topicID)
	}
	opts := b.logOpts
	b.setPolicy(&opts, tp.topic)
	opts.InitialOffset = initial
	// The checkpointed HW is known durable: a log that would end below it
	// (damage a crash cannot explain, an old copy put back, files deleted)
	// is corrupt, and the replica offline, rather than a shorter log that
	// could lead.
	opts.DurableFloor = hw
	log, err := b.root.OpenLog(tp.topic, tp.partition, opts)
	if err != nil {
		err = fmt.Errorf("open replica %s/%d: %w", tp.topic, tp.partition, err)
		if errors.Is(err, storage.ErrCorrupt) {
			b.markOffline(tp, err)
		}
		return nil, err
	}
	// A directory without the file is new, or from before topics had ids:
	// it is this incarnation's from now on.
	if topicID != "" && (len(held) == 0 || strings.TrimSpace(string(held)) != topicID) {
		if err := storage.WriteFileAtomic(idPath, []byte(topicID+"\n")); err != nil {
			log.Close()
			return nil, fmt.Errorf("replica %s/%d: record its topic id: %w", tp.topic, tp.partition, err)
		}
	}
	part := replication.NewPartition(tp.topic, tp.partition, b.id, log, b.logger.Named("replication"), replication.Options{
		Peers:         b.peers,
		EpochFile:     filepath.Join(log.Dir(), "leader-epoch"),
		OnStaleEpoch:  b.onStaleEpoch,
		TopicID:       topicID,
		HighWatermark: hw,
	})
	r := &Replica{Log: log, Part: part}
	b.mu.Lock()
	b.mu.replicas[tp] = r
	delete(b.mu.offline, tp)
	b.mu.Unlock()
	return r, nil
}

// markOffline records a replica as offline for err (corruption), logs it,
// and returns err.
func (b *Replicas) markOffline(tp topicPartition, err error) error {
	b.logger.Error("replica is corrupt and offline; rebuild it from its leader with gostream-ctl recover",
		"topic", tp.topic, "partition", tp.partition, "err", err)
	b.mu.Lock()
	b.mu.offline[tp] = err
	b.mu.Unlock()
	return err
}

// OfflineErr returns why a replica is offline, or nil.
func (b *Replicas) OfflineErr(topic string, partition int32) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.offline[topicPartition{topic, partition}]
}

// ResetReplica rebuilds a replica this broker cannot use: its files are
// moved whole into quarantine/damaged-<time>/ under the replica directory,
// and an empty log starting at offset start takes their place, to be
// filled from the leader. A replica that this broker leads is never reset.
func (b *Replicas) ResetReplica(topic, id string, partition int32, start int64) error {
	meta := b.Metadata()
	if meta == nil {
		return fmt.Errorf("%w: no metadata", transport.ErrNotReady)
	}
	t := meta.Topic(topic)
	if t != nil && id != "" && t.ID != id {
		return fmt.Errorf("%w: reset of topic %q with id %s, which here has id %s", transport.ErrUnknownTopicID, topic, id, t.ID)
	}
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s/%d", transport.ErrUnknownPartition, topic, partition)
	}
	part := t.Partitions[partition]
	if part.Leader == b.id || !slices.Contains(part.Replicas, b.id) {
		return fmt.Errorf("%w: broker %d leads %s/%d or holds no replica of it; it is never reset", transport.ErrInvalidRequest, b.id, topic, partition)
	}
	tp := topicPartition{topic, partition}
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	b.mu.Lock()
	r := b.mu.replicas[tp]
	delete(b.mu.replicas, tp)
	b.mu.Unlock()
	if r != nil {
		r.Part.Close()
		r.Log.Close()
	}
	if _, err := b.root.QuarantineReplica(topic, partition); err != nil {
		return fmt.Errorf("quarantine damaged replica %s/%d: %w", topic, partition, err)
	}
	b.logger.Warn("damaged replica moved to quarantine; rebuilding it from its leader", "topic", topic, "partition", partition, "start", start)
	nr, err := b.openReplicaAt(tp, t.ID, start, false)
	if err != nil {
		return err
	}
	// The checkpoint must not keep the old replica's HW: the new log is
	// empty until the leader fills it.
	if err := b.CheckpointHW(); err != nil {
		b.logger.Warn("checkpoint high watermarks after a reset", "err", err)
	}
	st := replication.State{Leader: part.Leader, LeaderEpoch: part.LeaderEpoch, Active: part.Active}
	if err := nr.Part.SetState(st); err != nil && !errors.Is(err, replication.ErrStaleEpoch) {
		return err
	}
	return nil
}

// closeReplica takes a replica out of the map and closes it, outside the
// lock (closing waits for follower senders).
func (b *Replicas) closeReplica(tp topicPartition, r *Replica) {
	b.mu.Lock()
	if b.mu.replicas[tp] == r {
		delete(b.mu.replicas, tp)
	}
	b.mu.Unlock()
	b.closeLog(tp, r)
}

func (b *Replicas) closeLog(tp topicPartition, r *Replica) {
	r.Part.Close()
	if err := r.Log.Close(); err != nil {
		b.logger.Warn("close log of a replica that goes", "topic", tp.topic, "partition", tp.partition, "err", err)
	}
}

// MovePacer is the pace of this node's copies to replicas being added by
// moves, all of them together, set to rate bytes per second: the rate
// of the newest move to copy from here (docs/reassignment.md).
func (b *Replicas) MovePacer(rate int64) *replication.Pacer {
	b.movePacer.SetRate(rate)
	return &b.movePacer
}

// Metadata returns the metadata applied last (nil before any).
func (b *Replicas) Metadata() *metadata.Cluster {
	return b.meta.Load()
}

// Lookup returns the topic's metadata and this broker's replica of the
// partition (nil when it hosts none). A request that names a topic id
// (id != "") other than the topic's is for another incarnation of the
// name: transport.ErrUnknownTopicID, and the topic is not touched.
func (b *Replicas) Lookup(topic, id string, partition int32) (*metadata.Topic, *Replica, error) {
	meta := b.meta.Load()
	if meta == nil {
		return nil, nil, fmt.Errorf("%w: broker %d has no metadata yet (it has not registered with the controller)", transport.ErrNotReady, b.id)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := meta.Topic(topic)
	if t != nil && id != "" && t.ID != id {
		return nil, nil, fmt.Errorf("%w: topic %q here is the one with id %s (metadata epoch %d), not %s: that one was deleted, or is newer than this broker's metadata",
			transport.ErrUnknownTopicID, topic, t.ID, meta.Epoch, id)
	}
	if t == nil && id != "" {
		return nil, nil, fmt.Errorf("%w: no topic %q with id %s here (metadata epoch %d)", transport.ErrUnknownTopicID, topic, id, meta.Epoch)
	}
	if t != nil && partition >= 0 && int(partition) < len(t.Partitions) {
		if err := b.mu.offline[topicPartition{topic, partition}]; err != nil {
			return t, nil, err
		}
	}
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: %s", transport.ErrUnknownPartition, metadata.NoSuchPartition(topic, len(t.Partitions), partition))
	}
	r := b.mu.replicas[topicPartition{topic, partition}]
	if r != nil && r.Part.TopicID != t.ID {
		r = nil // a replica of an earlier incarnation, not closed yet
	}
	return t, r, nil
}

// Close stops every partition and closes its log. The replicas leave the
// map under the lock and are closed outside it: closing waits for
// follower senders, which must not wait for this broker's locks.
func (b *Replicas) Close() error {
	if err := b.CheckpointHW(); err != nil {
		b.logger.Warn("last checkpoint of high watermarks", "err", err)
	}
	b.mu.Lock()
	reps := b.mu.replicas
	b.mu.replicas = make(map[topicPartition]*Replica)
	b.mu.Unlock()
	var errs []error
	for _, r := range reps {
		r.Part.Close()
		errs = append(errs, r.Log.Close())
	}
	return errors.Join(errs...)
}

// ResumeFailed tries to bring back every log that failed (a write or an
// fsync refused, a full disk): see storage.Log.Resume. A log that resumes
// takes appends again, and its replica leads or follows as before.
func (b *Replicas) ResumeFailed(ctx context.Context) {
	b.mu.RLock()
	var failed []*Replica
	for _, r := range b.mu.replicas {
		if r.Log.Failed() != nil {
			failed = append(failed, r)
		}
	}
	b.mu.RUnlock()
	for _, r := range failed {
		reason := r.Log.Failed()
		if err := r.Log.Resume(ctx); err != nil {
			b.logger.Debug("failed log does not resume yet", "topic", r.Part.Topic, "partition", r.Part.Index, "err", err)
			continue
		}
		b.logger.Info("failed log resumed", "topic", r.Part.Topic, "partition", r.Part.Index, "was", reason,
			"log_end_offset", r.Log.LogEndOffset())
	}
}

// ApplyRetention runs retention on every log. Nothing at or above a
// replica's high watermark is deleted: those records are not on every
// active replica yet, and a follower that is caught up from this log, or a
// leader that is failed over to, must still find them.
func (b *Replicas) ApplyRetention(ctx context.Context) {
	b.mu.RLock()
	reps := make([]*Replica, 0, len(b.mu.replicas))
	for _, r := range b.mu.replicas {
		reps = append(reps, r)
	}
	b.mu.RUnlock()
	for _, r := range reps {
		var err error
		if r.Part.Topic == transport.OffsetsTopic {
			err = r.boundOffsetsLog(ctx)
		} else {
			_, err = r.Log.ApplyRetention(ctx, r.Part.HighWatermark())
		}
		if err != nil && !errors.Is(err, storage.ErrClosed) && ctx.Err() == nil {
			b.logger.Warn("retention failed", "topic", r.Part.Topic, "partition", r.Part.Index, "err", err)
		}
	}
}

// boundOffsetsLog deletes the segments of a __consumer_offsets replica
// below its newest complete snapshot (docs/groups.md, "Snapshots"): the
// groups are rebuilt from there on. It reads what was appended since it
// last looked, up to the high watermark (so only snapshots every active
// replica holds count, and nothing it read can be truncated), and never
// deletes at or above the high watermark.
func (r *Replica) boundOffsetsLog(ctx context.Context) error {
	start, hw := r.Log.LogStartOffset(), r.Part.HighWatermark()
	if r.floor == nil || r.floor.Next() < start {
		r.floor = groups.NewSnapshotFloor(start)
	}
	for off := r.floor.Next(); off < hw; {
		buf, err := r.Log.Read(ctx, off, 1<<20, hw, nil)
		if err != nil {
			return fmt.Errorf("read for snapshots at offset %d: %w", off, err)
		}
		if len(buf) == 0 {
			break
		}
		var derr error
		err = record.Batches(buf, func(b record.Batch) bool {
			derr = b.Records(func(rec *record.Record) bool {
				r.floor.Observe(rec.Offset, rec.Key, rec.Value)
				return true
			})
			off = max(off, b.NextOffset())
			return derr == nil
		})
		if err = errors.Join(err, derr); err != nil {
			return fmt.Errorf("read for snapshots at offset %d: %w", off, err)
		}
	}
	floor, ok := r.floor.Floor()
	if !ok {
		return nil
	}
	_, err := r.Log.DeleteBelow(ctx, min(floor, hw))
	return err
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
