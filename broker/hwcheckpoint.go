package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"gostream/storage"
)

// hwCheckpointFile, in the storage root, holds every replica's high
// watermark as of the last checkpoint (docs/cluster.md, "High
// watermark").
const hwCheckpointFile = "high-watermarks"

const hwCheckpointVersion = 1

// hwEntry is one replica's checkpointed high watermark.
type hwEntry struct {
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	HW        int64  `json:"hw"`
}

type hwFile struct {
	Version  int       `json:"version"`
	Replicas []hwEntry `json:"replicas"`
}

// hwCheckpoints keeps the high watermarks of a node's replicas on disk.
// A checkpoint is written after the HWs advanced, with values the replicas
// held, so it is never above a replica's true HW; it lags by at most one
// interval. It is a cache of facts the replicas learn again: a file that
// does not parse is reported and ignored, and replaced by the next
// checkpoint.
type hwCheckpoints struct {
	path   string
	logger hclog.Logger

	mu struct {
		sync.Mutex
		// last is what the file holds: read at start, then each write.
		last map[topicPartition]hwEntry
		// forgets counts the replicas forgotten: a save of replicas
		// listed before a forget could put one back (see forget).
		forgets int
	}
}

// forgets is how many replicas were forgotten so far; CheckpointHW reads
// it before it lists the open replicas, and hands it to save.
func (c *hwCheckpoints) forgetsSoFar() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.forgets
}

// forget drops, at once and on disk, the checkpoint of a replica this
// broker deletes because it no longer holds it (a move took it off): a
// replica of the partition it is given again later starts empty, and
// must not be held to the old one's high watermark (it would be found
// corrupt, "acknowledged but the log has no segment").
func (c *hwCheckpoints) forget(tp topicPartition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.forgets++
	if _, ok := c.mu.last[tp]; !ok {
		return nil
	}
	next := make(map[topicPartition]hwEntry, len(c.mu.last))
	for k, e := range c.mu.last {
		if k != tp {
			next[k] = e
		}
	}
	return c.writeLocked(next)
}

func loadHWCheckpoints(rootDir string, logger hclog.Logger) *hwCheckpoints {
	c := &hwCheckpoints{path: filepath.Join(rootDir, hwCheckpointFile), logger: logger}
	c.mu.last = map[topicPartition]hwEntry{}
	data, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c
	case err != nil:
		logger.Warn("cannot read the high watermark checkpoint; replicas start without it", "path", c.path, "err", err)
		return c
	}
	var f hwFile
	if err := json.Unmarshal(data, &f); err != nil || f.Version != hwCheckpointVersion {
		logger.Warn("the high watermark checkpoint does not parse; replicas start without it, and it is replaced at the next checkpoint",
			"path", c.path, "err", err, "version", f.Version)
		return c
	}
	for _, e := range f.Replicas {
		if e.HW > 0 && e.Partition >= 0 {
			c.mu.last[topicPartition{e.Topic, e.Partition}] = e
		}
	}
	return c
}

// of returns the checkpointed HW of a replica of the topic incarnation id,
// 0 when there is none.
func (c *hwCheckpoints) of(tp topicPartition, id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.mu.last[tp]; ok && e.TopicID == id {
		return e.HW
	}
	return 0
}

// save writes a checkpoint of current, the HWs of the open replicas, over
// the last one: the entries of replicas not open now (offline, say) are
// kept while keep says their topic still exists, so that a damaged
// replica's HW is not forgotten. It writes nothing when nothing changed.
//
// forgets is forgetsSoFar as it was before current was listed: when a
// replica was forgotten since, current may hold it, and nothing is
// written this time (the next checkpoint lists the replicas anew).
func (c *hwCheckpoints) save(current map[topicPartition]hwEntry, forgets int, keep func(hwEntry) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if forgets != c.mu.forgets {
		return nil
	}
	next := make(map[topicPartition]hwEntry, len(current))
	for tp, e := range c.mu.last {
		if _, open := current[tp]; !open && keep(e) {
			next[tp] = e
		}
	}
	for tp, e := range current {
		next[tp] = e
	}
	if equalEntries(next, c.mu.last) {
		return nil
	}
	return c.writeLocked(next)
}

// writeLocked writes next as the checkpoint; the caller holds mu.
func (c *hwCheckpoints) writeLocked(next map[topicPartition]hwEntry) error {
	f := hwFile{Version: hwCheckpointVersion, Replicas: make([]hwEntry, 0, len(next))}
	for _, e := range next {
		f.Replicas = append(f.Replicas, e)
	}
	slices.SortFunc(f.Replicas, func(a, b hwEntry) int {
		if d := strings.Compare(a.Topic, b.Topic); d != 0 {
			return d
		}
		return int(a.Partition - b.Partition)
	})
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := storage.WriteFileAtomic(c.path, append(data, '\n')); err != nil {
		return fmt.Errorf("checkpoint high watermarks: %w", err)
	}
	c.mu.last = next
	return nil
}

func equalEntries(a, b map[topicPartition]hwEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// CheckpointHW writes the HWs of this broker's replicas.
func (b *Replicas) CheckpointHW() error {
	if b.hw == nil {
		return nil
	}
	forgets := b.hw.forgetsSoFar()
	b.mu.RLock()
	current := make(map[topicPartition]hwEntry, len(b.mu.replicas))
	for tp, r := range b.mu.replicas {
		current[tp] = hwEntry{Topic: tp.topic, TopicID: r.Part.TopicID, Partition: tp.partition, HW: r.Part.HighWatermark()}
	}
	b.mu.RUnlock()
	meta := b.Metadata()
	return b.hw.save(current, forgets, func(e hwEntry) bool {
		if meta == nil {
			return true
		}
		t := meta.Topic(e.Topic)
		return t != nil && t.ID == e.TopicID && int(e.Partition) < len(t.Partitions) && slices.Contains(t.Partitions[e.Partition].Replicas, b.id)
	})
}
