package groups

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// hwAsk bounds a question to another broker about a high watermark.
const hwAsk = 5 * time.Second

// idPartition is a partition of a topic's incarnation: a topic created
// again under its name starts anew.
type idPartition struct {
	topicID   string
	partition int32
}

// hwCache answers a coordinator's questions about the topics its groups
// consume (Topics): their ids and partition counts from the metadata, and
// their high watermarks from their leaders, cached (a commit at or below
// the HW known needs no question).
type hwCache struct {
	cfg HostConfig
	mu  sync.Mutex
	// Under mu.
	known map[idPartition]int64
	at    map[idPartition]time.Time // when known was last learned
}

func newHWCache(cfg HostConfig) *hwCache {
	return &hwCache{cfg: cfg, known: map[idPartition]int64{}, at: map[idPartition]time.Time{}}
}

// recent returns the partition's high watermark for a lag: its own when
// this broker leads it, else the one last learned from its leader if that
// is no older than fresh.
func (h *hwCache) recent(topic string, partition int32, fresh time.Duration) (int64, bool) {
	t, part, err := h.cfg.Lookup(topic, "", partition)
	if err != nil {
		return 0, false
	}
	if part != nil && t.Partitions[partition].Leader == h.cfg.Broker {
		if _, hw, _, err := part.LeaderOffsets(); err == nil {
			return hw, true
		}
	}
	key := idPartition{t.ID, partition}
	h.mu.Lock()
	defer h.mu.Unlock()
	hw, ok := h.known[key]
	return hw, ok && time.Since(h.at[key]) <= fresh
}

// Topic implements Topics.
func (h *hwCache) Topic(name string) (string, int32, bool) {
	meta := h.cfg.Metadata()
	if meta == nil {
		return "", 0, false
	}
	t := meta.Topic(name)
	if t == nil {
		return "", 0, false
	}
	return t.ID, int32(len(t.Partitions)), true
}

// HighWatermark implements Topics.
func (h *hwCache) HighWatermark(ctx context.Context, topic string, partition int32, atLeast int64) (int64, error) {
	t, part, err := h.cfg.Lookup(topic, "", partition)
	if err != nil {
		return 0, err
	}
	key := idPartition{t.ID, partition}
	h.mu.Lock()
	hw, ok := h.known[key]
	h.mu.Unlock()
	if ok && hw >= atLeast {
		return hw, nil
	}
	var end int64
	if part != nil && t.Partitions[partition].Leader == h.cfg.Broker {
		_, hw, end, err = part.LeaderOffsets()
	} else {
		hw, end, err = h.ask(ctx, t, partition)
	}
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	if hw > h.known[key] {
		h.known[key] = hw
	}
	h.at[key] = time.Now()
	hw = h.known[key]
	h.mu.Unlock()
	if hw < atLeast && atLeast <= end {
		// The records are in the leader's log but not known to be on
		// every active replica: a leader that has just restarted or taken
		// over says the HW it checkpointed until its followers answer.
		// The commit may be valid in a moment; one above the log end is
		// not, and the coordinator refuses it.
		return 0, fmt.Errorf("%w: %s/%d: high watermark %d, below %d, which its log holds: not acknowledged yet", transport.ErrNotReady, topic, partition, hw, atLeast)
	}
	return hw, nil
}

// ask asks the partition's leader for its high watermark and log end.
func (h *hwCache) ask(ctx context.Context, t *metadata.Topic, partition int32) (hw, end int64, err error) {
	leader := t.Partitions[partition].Leader
	var addr string
	if meta := h.cfg.Metadata(); meta != nil {
		if b, ok := meta.Broker(leader); ok {
			addr = b.Addr
		}
	}
	if addr == "" {
		return 0, 0, fmt.Errorf("%w: %s/%d has no leader with an address (leader %d)", transport.ErrBrokerNotAvailable, t.Name, partition, leader)
	}
	ctx, cancel := context.WithTimeout(ctx, hwAsk)
	defer cancel()
	resp, err := h.cfg.ListOffsets(ctx, addr, &transport.ListOffsetsRequest{Topic: t.Name, TopicID: t.ID, Partition: partition})
	if err != nil {
		return 0, 0, fmt.Errorf("ask broker %d: %w", leader, err)
	}
	return resp.HighWatermark, resp.LogEndOffset, nil
}
