package producers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/record"
	"gostream/replication"
	"gostream/transport"
)

// DefaultExpiry is how long a producer id with no batch is remembered.
const DefaultExpiry = 24 * time.Hour

// kept is how many of a producer's last batches a leader remembers: as
// many as a Kafka producer may have in flight per partition.
const kept = 5

// Config configures a Host.
type Config struct {
	// Expiry forgets a producer with no batch for that long (default
	// DefaultExpiry).
	Expiry time.Duration
	// AckWait bounds the wait for a duplicate's original to be
	// acknowledged (0: the caller's context alone).
	AckWait time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger hclog.Logger
}

// Host keeps the idempotent producers' state of every partition this
// broker leads. Every method is for any goroutine.
type Host struct {
	cfg    Config
	states *replication.LeaderStates[*replication.Partition, *table]
}

// New returns a Host with no state; Close releases it.
func New(cfg Config) *Host {
	if cfg.Expiry <= 0 {
		cfg.Expiry = DefaultExpiry
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := &Host{cfg: cfg}
	h.states = replication.NewLeaderStates(replication.LeaderStatesConfig[*replication.Partition, *table]{
		Load:    h.load,
		AckWait: cfg.AckWait,
	})
	return h
}

// Close drops every state and stops the builds under way.
func (h *Host) Close() { h.states.Close() }

// Run forgets, once a minute until ctx ends, the states of partitions
// this broker no longer leads and the producers idle past the expiry;
// then it closes the Host.
func (h *Host) Run(ctx context.Context) error {
	defer h.Close()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			h.Sweep()
		}
	}
}

// Sweep does what Run does once a minute.
func (h *Host) Sweep() {
	h.states.Retain(func(*replication.Partition) bool { return true })
	cutoff := h.cfg.Now().Add(-h.cfg.Expiry).UnixMilli()
	for _, t := range h.states.Ready() {
		t.expire(cutoff)
	}
}

// Producers returns how many producers the state of p's current
// leadership holds, and false when there is none.
func (h *Host) Producers(p *replication.Partition) (int, bool) {
	t, _, err := h.states.Peek(p)
	if err != nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID), true
}

// table is one leadership's producers of one partition.
type table struct {
	lead *replication.Leadership
	mu   sync.Mutex
	byID map[int64]*producer
}

// producer is what a leader remembers of one producer id.
type producer struct {
	epoch int16
	// batches are its last batches, oldest first, at most kept.
	batches []entry
	// lastAppend is the append time of its newest batch (Unix ms).
	lastAppend int64
}

// entry is one batch of a producer.
type entry struct {
	first, last int32 // sequences
	base, next  int64 // offsets
	leaderEpoch int32
	appendTime  int64
}

func (h *Host) load(ctx context.Context, _ *replication.Partition, lead *replication.Leadership) (*table, error) {
	t := &table{lead: lead, byID: map[int64]*producer{}}
	if _, err := lead.Replay(ctx, func(b record.Batch) error {
		if id, epoch, seq := b.Producer(); id >= 0 && seq >= 0 {
			t.record(id, epoch, seq, b)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	t.expire(h.cfg.Now().Add(-h.cfg.Expiry).UnixMilli())
	return t, nil
}

// lastSequence is the sequence of a batch's last record.
func lastSequence(first int32, count int32) int32 {
	if count <= 0 {
		return first
	}
	if first > math.MaxInt32-(count-1) {
		return count - 1 - (math.MaxInt32 - first) - 1
	}
	return first + count - 1
}

// nextSequence is the sequence after s.
func nextSequence(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// record remembers b, just appended (or found in the log), as the newest
// batch of producer id at epoch.
func (t *table) record(id int64, epoch int16, first int32, b record.Batch) {
	p := t.byID[id]
	if p == nil {
		p = &producer{epoch: epoch}
		t.byID[id] = p
	}
	if epoch != p.epoch {
		p.epoch, p.batches = epoch, p.batches[:0]
	}
	if len(p.batches) == kept {
		p.batches = append(p.batches[:0], p.batches[1:]...)
	}
	p.batches = append(p.batches, entry{first: first, last: lastSequence(first, b.RecordCount()),
		base: b.BaseOffset(), next: b.NextOffset(), leaderEpoch: b.LeaderEpoch(), appendTime: b.AppendTime()})
	p.lastAppend = b.AppendTime()
}

// check decides about a batch of producer id: a duplicate (its entry), a
// refusal, or neither (append it). The caller holds mu.
func (t *table) check(id int64, epoch int16, first, last int32) (*entry, error) {
	p := t.byID[id]
	switch {
	case p == nil:
		return nil, nil
	case epoch < p.epoch:
		return nil, fmt.Errorf("%w: producer %d at epoch %d; epoch %d of it has written here since", transport.ErrInvalidProducerEpoch, id, epoch, p.epoch)
	case epoch > p.epoch:
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d starts epoch %d at sequence %d; a new epoch starts at 0", transport.ErrOutOfOrderSequence, id, epoch, first)
		}
		return nil, nil
	}
	for i := range p.batches {
		if e := &p.batches[i]; e.first == first && e.last == last {
			return e, nil
		}
	}
	if len(p.batches) == 0 {
		return nil, nil
	}
	if want := nextSequence(p.batches[len(p.batches)-1].last); first != want {
		return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d, expected %d", transport.ErrOutOfOrderSequence, id, epoch, first, want)
	}
	return nil, nil
}

// expire forgets the producers whose newest batch was appended before
// cutoff (Unix ms).
func (t *table) expire(cutoff int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, p := range t.byID {
		if p.lastAppend < cutoff {
			delete(t.byID, id)
		}
	}
}

// Produce appends b, a batch of an idempotent producer (its producer id
// is not -1), to partition p, which this broker leads, unless it is a
// duplicate or out of its producer's sequence (see the package doc), and
// returns the wait for its acknowledgement by every active replica. A
// duplicate's wait returns the original's Ack once the high watermark has
// passed it. ctx bounds the build of the partition's state, which the
// first batch after a change of leader waits for. hold is as
// replication.Partition.ProduceHeld's.
func (h *Host) Produce(ctx context.Context, p *replication.Partition, b record.Batch, hold func() (release func())) (func(context.Context) (replication.Ack, error), error) {
	id, epoch, first := b.Producer()
	if id < 0 {
		return nil, fmt.Errorf("%w: not an idempotent producer's batch", transport.ErrInvalidRequest)
	}
	if first < 0 || epoch < 0 {
		return nil, fmt.Errorf("%w: producer %d's batch has epoch %d and sequence %d; an idempotent batch has both", transport.ErrInvalidBatch, id, epoch, first)
	}
	last := lastSequence(first, b.RecordCount())
	for {
		t, lead, err := h.states.Get(ctx, p, p)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		dup, err := t.check(id, epoch, first, last)
		if err != nil {
			t.mu.Unlock()
			return nil, err
		}
		if dup != nil {
			e := *dup
			t.mu.Unlock()
			return func(ctx context.Context) (replication.Ack, error) {
				if err := lead.WaitAcked(ctx, e.next); err != nil {
					return replication.Ack{}, err
				}
				return replication.Ack{BaseOffset: e.base, NextOffset: e.next, LeaderEpoch: e.leaderEpoch,
					AppendTime: e.appendTime, Replicas: p.State().Active}, nil
			}, nil
		}
		wait, err := lead.Produce(b, hold)
		if errors.Is(err, replication.ErrStateDropped) {
			t.mu.Unlock()
			continue // the state was dropped under us: build it again
		}
		if err != nil {
			t.mu.Unlock()
			return nil, err
		}
		t.record(id, epoch, first, b)
		t.mu.Unlock()
		return wait, nil
	}
}
