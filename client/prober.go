package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"gostream/transport"
)

// Prober asks brokers about their replicas under a short deadline each,
// and stops asking a broker that has once failed to answer at all, so that
// a dead broker costs one deadline, not one per partition: what cluster
// status, verify and topic describe ask with. Safe for concurrent use.
type Prober struct {
	c     *Client
	probe time.Duration

	mu struct {
		sync.Mutex
		down map[int32]error
	}
}

// NewProber returns a Prober whose requests each wait at most timeout
// (the client's RequestTimeout when timeout is 0), and never more than two
// seconds.
func (c *Client) NewProber(timeout time.Duration) *Prober {
	if timeout <= 0 {
		timeout = c.cfg.RequestTimeout
	}
	p := &Prober{c: c, probe: min(timeout, maxProbeTimeout)}
	p.mu.down = map[int32]error{}
	return p
}

// markDown records that broker does not answer.
func (p *Prober) markDown(broker int32, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.mu.down[broker]; !ok {
		p.mu.down[broker] = err
	}
}

// Down returns why broker is known not to answer, or nil.
func (p *Prober) Down(broker int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.down[broker]
}

// noteAnswer marks broker down when err says it did not answer at all.
func (p *Prober) noteAnswer(broker int32, err error) {
	if errors.Is(err, transport.ErrBrokerNotAvailable) || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		p.markDown(broker, err)
	}
}

// ReplicaState asks broker for its replica of topic/partition, observing
// only (it never fences).
func (p *Prober) ReplicaState(ctx context.Context, broker int32, topic string, partition int32) (ReplicaState, error) {
	if err := p.Down(broker); err != nil {
		return ReplicaState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.probe)
	defer cancel()
	st, err := p.c.ReplicaState(ctx, broker, topic, partition)
	p.noteAnswer(broker, err)
	return st, err
}

// LeaderOffsets asks a partition's leader, broker leader, for its offsets
// as ReplicaState asks a replica: under one probe deadline (within which
// the client retries), and not at all once the broker has failed to
// answer.
func (p *Prober) LeaderOffsets(ctx context.Context, leader int32, topic string, partition int32) (PartitionOffsets, error) {
	if err := p.Down(leader); err != nil {
		return PartitionOffsets{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.probe)
	defer cancel()
	offs, err := p.c.ListOffsets(ctx, topic, partition)
	p.noteAnswer(leader, err)
	return offs, err
}

// state is ReplicaState, for the reports' replicaStater.
func (p *Prober) state(ctx context.Context, broker int32, topic string, partition int32) (ReplicaState, error) {
	return p.ReplicaState(ctx, broker, topic, partition)
}
