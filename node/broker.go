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

	mu struct {
		sync.RWMutex
		meta     *metadata.Cluster
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
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.meta != nil && meta.Epoch < b.mu.meta.Epoch {
		return nil
	}
	if b.mu.meta != nil && meta.ClusterID != b.mu.meta.ClusterID {
		return fmt.Errorf("%w: metadata of cluster %q, this node is in cluster %q", storage.ErrStampMismatch, meta.ClusterID, b.mu.meta.ClusterID)
	}
	if err := b.root.SetClusterID(meta.ClusterID); err != nil {
		return err
	}
	if b.cache != nil && (b.mu.meta == nil || meta.Epoch > b.mu.meta.Epoch) {
		if err := b.cache.Save(meta); err != nil {
			return fmt.Errorf("cache metadata: %w", err)
		}
	}
	var errs []error
	want := map[topicPartition]bool{}
	for _, t := range meta.Topics {
		for p, part := range t.Partitions {
			if !slices.Contains(part.Replicas, b.id) {
				continue
			}
			tp := topicPartition{t.Name, int32(p)}
			want[tp] = true
			r, ok := b.mu.replicas[tp]
			if !ok {
				var err error
				if r, err = b.openReplicaLocked(tp); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			st := replication.State{Leader: part.Leader, LeaderEpoch: part.LeaderEpoch, Active: part.Active}
			if st.Leader == b.id && b.awaitingController.Load() {
				st.Leader = -1
			}
			if err := r.part.SetState(st); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for tp, r := range b.mu.replicas {
		if want[tp] {
			continue
		}
		r.part.Close()
		if err := r.log.Close(); err != nil {
			b.logger.Warn("close log of deleted topic", "topic", tp.topic, "partition", tp.partition, "err", err)
		}
		delete(b.mu.replicas, tp)
		if meta.Topic(tp.topic) == nil {
			if err := b.removeTopicDir(tp.topic); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.mu.meta = meta
	b.metrics.partitions.Set(float64(len(b.mu.replicas)))
	return errors.Join(errs...)
}

func (b *broker) openReplicaLocked(tp topicPartition) (*replica, error) {
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
	b.mu.replicas[tp] = r
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
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.meta
}

// lookup returns the topic's metadata and this broker's replica of the
// partition (nil when it hosts none).
func (b *broker) lookup(topic string, partition int32) (*metadata.Topic, *replica, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mu.meta == nil {
		return nil, nil, fmt.Errorf("%w: %q (no metadata yet)", metadata.ErrUnknownTopic, topic)
	}
	t := b.mu.meta.Topic(topic)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, nil, fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", transport.ErrUnknownPartition, topic, len(t.Partitions)-1, partition)
	}
	return t, b.mu.replicas[topicPartition{topic, partition}], nil
}

// close closes every log.
func (b *broker) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for tp, r := range b.mu.replicas {
		r.part.Close()
		errs = append(errs, r.log.Close())
		delete(b.mu.replicas, tp)
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
