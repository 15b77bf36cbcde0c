package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"gostream/metadata"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// broker hosts this node's partition replicas and the cached cluster
// metadata they are served by.
type broker struct {
	id      int32
	root    *storage.Root
	logOpts storage.Options
	logger  hclog.Logger
	metrics *metrics
	// peers reaches other brokers; set before the first metadata applies.
	peers replication.Peers
	// cache keeps the last metadata on disk, so a node serves at once after
	// a restart even while the controller is down. Nil on the controller,
	// whose own file is the truth.
	cache *metadata.Store
	// awaitingController is set while a restarted broker has not yet heard
	// from the controller: it leads nothing on the strength of its cached
	// metadata alone, since it cannot know whether a failover happened.
	awaitingController atomic.Bool

	// meta is the metadata applied last; readers never wait for an
	// application in progress.
	meta    atomic.Pointer[metadata.Cluster]
	applyMu sync.Mutex

	mu struct {
		sync.RWMutex
		replicas map[topicPartition]*replica
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

type replica struct {
	log  *storage.Log
	part *replication.Partition
}

func newBroker(id int32, root *storage.Root, logOpts storage.Options, logger hclog.Logger, m *metrics) *broker {
	b := &broker{id: id, root: root, logOpts: logOpts, logger: logger, metrics: m}
	b.mu.replicas = make(map[topicPartition]*replica)
	return b
}

// applyMetadata makes the hosted replicas match meta: it opens the logs of
// replicas assigned to this broker, applies leadership, and closes and
// removes the replicas of deleted topics. Metadata older than what is held
// is ignored.
func (b *broker) applyMetadata(meta *metadata.Cluster) error {
	// applyMu orders whole applications; mu is held only to touch the
	// replica map, never while a partition changes state (which may wait
	// for its follower senders, and they read the metadata).
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
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
	var errs []error
	type change struct {
		r  *replica
		st replication.State
	}
	var changes []change
	want := map[topicPartition]bool{}
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			if !slices.Contains(part.Replicas, b.id) {
				continue
			}
			tp := topicPartition{t.Name, int32(p)}
			want[tp] = true
			b.mu.RLock()
			r, ok := b.mu.replicas[tp]
			b.mu.RUnlock()
			if !ok {
				var err error
				if r, err = b.openReplica(tp); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			st := replication.State{Leader: part.Leader, LeaderEpoch: part.LeaderEpoch, Active: part.Active}
			if st.Leader == b.id && b.awaitingController.Load() {
				st.Leader = -1
			}
			changes = append(changes, change{r, st})
		}
	}
	b.meta.Store(meta)
	for _, c := range changes {
		err := c.r.part.SetState(c.st)
		switch {
		case errors.Is(err, replication.ErrStaleEpoch):
			// The replica has seen a newer epoch than this metadata gives (a
			// failover fenced it and did not finish): it leads nothing and
			// waits for metadata that catches up.
			b.logger.Warn("metadata is behind this replica's epoch; waiting for newer metadata",
				"topic", c.r.part.Topic, "partition", c.r.part.Index, "epoch", c.st.LeaderEpoch, "fenced", c.r.part.FencedEpoch())
		case err != nil:
			errs = append(errs, err)
		}
	}
	var gone []topicPartition
	var goneReplicas []*replica
	b.mu.Lock()
	for tp, r := range b.mu.replicas {
		if !want[tp] {
			gone = append(gone, tp)
			goneReplicas = append(goneReplicas, r)
			delete(b.mu.replicas, tp)
		}
	}
	b.metrics.partitions.Set(float64(len(b.mu.replicas)))
	b.mu.Unlock()
	for i, tp := range gone {
		r := goneReplicas[i]
		r.part.Close()
		if err := r.log.Close(); err != nil {
			b.logger.Warn("close log of deleted topic", "topic", tp.topic, "partition", tp.partition, "err", err)
		}
		if meta.Topic(tp.topic) == nil {
			if err := b.removeTopicDir(tp.topic); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (b *broker) openReplica(tp topicPartition) (*replica, error) {
	opts := b.logOpts
	log, err := b.root.OpenLog(tp.topic, tp.partition, opts)
	if err != nil {
		return nil, fmt.Errorf("open replica %s/%d: %w", tp.topic, tp.partition, err)
	}
	part := replication.NewPartition(tp.topic, tp.partition, b.id, log, b.logger.Named("replication"), replication.Options{
		Peers:        b.peers,
		EpochFile:    filepath.Join(log.Dir(), "leader-epoch"),
		OnStaleEpoch: b.metrics.staleEpochs.Inc,
	})
	r := &replica{log: log, part: part}
	b.mu.Lock()
	b.mu.replicas[tp] = r
	b.mu.Unlock()
	return r, nil
}

// removeTopicDir deletes a deleted topic's directory: it is renamed out of
// the way first, so a crash never leaves a half-deleted topic under its name.
func (b *broker) removeTopicDir(topic string) error {
	dir, err := b.root.ReplicaDir(topic, 0)
	if err != nil {
		return err
	}
	topicDir := filepath.Dir(dir)
	trash := filepath.Join(b.root.Dir(), "deleted")
	if err := ensureDir(trash); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(trash, topic+"-")
	if err != nil {
		return err
	}
	if err := os.Rename(topicDir, filepath.Join(tmp, topic)); err != nil {
		if os.IsNotExist(err) {
			return os.Remove(tmp)
		}
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return os.RemoveAll(tmp)
}

// metadata returns the cached metadata.
func (b *broker) metadata() *metadata.Cluster {
	return b.meta.Load()
}

// lookup returns the topic's metadata and this broker's replica of the
// partition (nil when it hosts none).
func (b *broker) lookup(topic string, partition int32) (*metadata.Topic, *replica, error) {
	meta := b.meta.Load()
	if meta == nil {
		return nil, nil, fmt.Errorf("%w: %q (no metadata yet)", metadata.ErrUnknownTopic, topic)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := meta.Topic(topic)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", transport.ErrUnknownPartition, topic, len(t.Partitions)-1, partition)
	}
	return t, b.mu.replicas[topicPartition{topic, partition}], nil
}

// close stops every partition and closes its log. The replicas leave the
// map under the lock and are closed outside it: closing waits for
// follower senders, which must not wait for this broker's locks.
func (b *broker) close() error {
	b.mu.Lock()
	reps := b.mu.replicas
	b.mu.replicas = make(map[topicPartition]*replica)
	b.mu.Unlock()
	var errs []error
	for _, r := range reps {
		r.part.Close()
		errs = append(errs, r.log.Close())
	}
	return errors.Join(errs...)
}

// applyRetention runs retention on every log.
func (b *broker) applyRetention(ctx context.Context) {
	b.mu.RLock()
	logs := make([]*storage.Log, 0, len(b.mu.replicas))
	for _, r := range b.mu.replicas {
		logs = append(logs, r.log)
	}
	b.mu.RUnlock()
	for _, l := range logs {
		if _, err := l.ApplyRetention(ctx); err != nil && !errors.Is(err, storage.ErrClosed) {
			b.logger.Warn("retention failed", "dir", l.Dir(), "err", err)
		}
	}
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
