package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"gostream/client"
	"gostream/transport"
)

// topic describe asks every replica of a topic for its log end, as the
// client's cluster report does: each under a short deadline, several at
// once, and a broker that once did not answer is not asked again.

// maxProbeTimeout bounds each request to one broker (and --timeout bounds
// it further): a broker that has not answered by then is reported as not
// answering.
const maxProbeTimeout = 2 * time.Second

// maxConcurrentProbes bounds the requests topic describe has in flight at
// once.
const maxConcurrentProbes = 16

// replicaStater asks a broker for its replica of a partition.
type replicaStater interface {
	state(ctx context.Context, broker int32, topic string, partition int32) (client.ReplicaState, error)
}

// replicaProber asks replicas for their state under a short deadline each,
// and stops asking a broker that has once failed to answer at all, so that
// a dead broker costs one deadline, not one per partition.
type replicaProber struct {
	cl    *client.Client
	probe time.Duration

	mu struct {
		sync.Mutex
		down map[int32]error
	}
}

func newReplicaProber(cl *client.Client, g globals) *replicaProber {
	p := &replicaProber{cl: cl, probe: min(g.timeout, maxProbeTimeout)}
	p.mu.down = map[int32]error{}
	return p
}

// markDown records that broker does not answer.
func (p *replicaProber) markDown(broker int32, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.mu.down[broker]; !ok {
		p.mu.down[broker] = err
	}
}

// state asks broker for its replica of topic/partition, observing only.
func (p *replicaProber) state(ctx context.Context, broker int32, topic string, partition int32) (client.ReplicaState, error) {
	p.mu.Lock()
	err := p.mu.down[broker]
	p.mu.Unlock()
	if err != nil {
		return client.ReplicaState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.probe)
	defer cancel()
	st, err := p.cl.ReplicaState(ctx, broker, topic, partition)
	if errors.Is(err, transport.ErrBrokerNotAvailable) || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		p.markDown(broker, err)
	}
	return st, err
}
