package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/record"
	"gostream/storage"
)

// Sentinel errors of package replication.
var (
	// ErrNotLeader means this replica does not lead the partition.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrStaleEpoch means a request for a leader epoch older than the
	// replica has seen.
	ErrStaleEpoch = errors.New("replication: stale leader epoch")
	// ErrOffsetOutOfRange means a fetch offset outside the log.
	ErrOffsetOutOfRange = errors.New("replication: offset out of range")
)

// Log is what a Partition needs of its replica's log.
type Log interface {
	Write(batch record.Batch, epoch int32) (storage.AppendResult, storage.Durable, error)
	Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error)
	LogStartOffset() int64
	LogEndOffset() int64
	DurableEndOffset() int64
	LastEpoch() int32
}

// State is the leadership state of a partition as the controller assigned it.
type State struct {
	Leader      int32
	LeaderEpoch int32
	Active      []int32
}

// Partition is one partition replica on this broker.
type Partition struct {
	Topic    string
	Index    int32
	brokerID int32
	log      Log
	logger   hclog.Logger

	mu struct {
		sync.Mutex
		state     State
		hw        int64
		hwChanged chan struct{}
	}
}

// NewPartition wraps the log of a replica on broker brokerID. Until SetState
// is called it leads nothing.
func NewPartition(topic string, index, brokerID int32, log Log, logger hclog.Logger) *Partition {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	p := &Partition{Topic: topic, Index: index, brokerID: brokerID, log: log,
		logger: logger.With("topic", topic, "partition", index)}
	p.mu.hwChanged = make(chan struct{})
	p.mu.hw = log.LogStartOffset()
	return p
}

// SetState applies the controller's leadership state. A state with an
// older epoch than the one held is refused with ErrStaleEpoch. When this
// broker leads with no other active replica, everything durable in its log
// is committed, so the HW moves to the durable end.
func (p *Partition) SetState(s State) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.LeaderEpoch < p.mu.state.LeaderEpoch {
		return fmt.Errorf("%w: partition %s/%d at epoch %d, asked for %d", ErrStaleEpoch, p.Topic, p.Index, p.mu.state.LeaderEpoch, s.LeaderEpoch)
	}
	p.mu.state = State{Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, Active: slices.Clone(s.Active)}
	if s.Leader == p.brokerID && len(s.Active) == 1 && s.Active[0] == p.brokerID {
		p.advanceHWLocked(p.log.DurableEndOffset())
	}
	return nil
}

// State returns the partition's leadership state.
func (p *Partition) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.mu.state
	s.Active = slices.Clone(s.Active)
	return s
}

func (p *Partition) advanceHWLocked(hw int64) {
	if hw > p.mu.hw {
		p.mu.hw = hw
		close(p.mu.hwChanged)
		p.mu.hwChanged = make(chan struct{})
	}
}

// HighWatermark is the offset below which every active replica holds the
// records.
func (p *Partition) HighWatermark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.hw
}

// Ack is the acknowledgement of a produced batch.
type Ack struct {
	BaseOffset  int64
	NextOffset  int64
	LeaderEpoch int32
	AppendTime  int64
	Replicas    []int32 // the replicas that hold the batch durably
}

// Produce appends batch as leader, in the order Produce is called, and
// returns a function that waits until every active replica holds it. The
// batch's header is restamped in place. It returns ErrNotLeader when this
// replica does not lead, and the log's errors.
func (p *Partition) Produce(batch record.Batch) (func(ctx context.Context) (Ack, error), error) {
	p.mu.Lock()
	st := p.mu.state
	p.mu.Unlock()
	if st.Leader != p.brokerID {
		return nil, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	res, durable, err := p.log.Write(batch, st.LeaderEpoch)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (Ack, error) {
		if err := durable(ctx); err != nil {
			return Ack{}, err
		}
		p.mu.Lock()
		p.advanceHWLocked(res.NextOffset)
		p.mu.Unlock()
		return Ack{BaseOffset: res.BaseOffset, NextOffset: res.NextOffset, LeaderEpoch: res.LeaderEpoch,
			AppendTime: res.AppendTime, Replicas: []int32{p.brokerID}}, nil
	}, nil
}

// FetchResult is what a fetch returns.
type FetchResult struct {
	HighWatermark  int64
	LogStartOffset int64
	Batches        []byte
}

// Fetch reads whole batches from offset below the HW, up to about maxBytes.
// With maxWait > 0 it waits until there is something to return or the wait
// is over. It returns ErrNotLeader when this replica does not lead, and
// ErrOffsetOutOfRange for an offset below the log start or above the log end.
func (p *Partition) Fetch(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration) (FetchResult, error) {
	var timer <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timer = t.C
	}
	for {
		p.mu.Lock()
		st, hw, changed := p.mu.state, p.mu.hw, p.mu.hwChanged
		p.mu.Unlock()
		if st.Leader != p.brokerID {
			return FetchResult{}, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
		}
		start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
		if offset < start || offset > end {
			return FetchResult{}, fmt.Errorf("%w: offset %d, partition %s/%d holds [%d, %d)", ErrOffsetOutOfRange, offset, p.Topic, p.Index, start, end)
		}
		if offset < hw {
			b, err := p.log.Read(ctx, offset, maxBytes, hw, nil)
			if errors.Is(err, storage.ErrOffsetOutOfRange) {
				return FetchResult{}, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
			}
			if err != nil {
				return FetchResult{}, err
			}
			return FetchResult{HighWatermark: hw, LogStartOffset: start, Batches: b}, nil
		}
		if timer == nil {
			return FetchResult{HighWatermark: hw, LogStartOffset: start}, nil
		}
		select {
		case <-changed:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			return FetchResult{}, ctx.Err()
		}
	}
}

// Offsets returns the log start, the HW and the log end.
func (p *Partition) Offsets() (start, hw, end int64) {
	return p.log.LogStartOffset(), p.HighWatermark(), p.log.LogEndOffset()
}
