package node

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/go-hclog"

	"gostream/controller"
	"gostream/metadata"
	"gostream/transport"
)

// pushers send the controller's metadata to the other brokers, one pusher
// per broker (see push).
type pushers struct {
	self   int32
	pool   *transport.Pool
	active func() *controller.Controller // the active controller here, or nil
	log    hclog.Logger
	mu     sync.Mutex
	to     map[int32]*pusher
}

func newPushers(self int32, pool *transport.Pool, active func() *controller.Controller, log hclog.Logger) *pushers {
	return &pushers{self: self, pool: pool, active: active, log: log, to: map[int32]*pusher{}}
}

// pushMetadata sends meta to every other registered broker (pushers.push).
func (n *Node) pushMetadata(ctx context.Context, meta *metadata.Cluster) {
	n.pushes.push(ctx, meta)
}

// push sends meta to every other registered broker and waits
// until each has taken it (or newer), or its push failed, or ctx ends;
// except for brokers whose last push failed: those are sent it in the
// background and not waited for, so a change made while a broker is down
// or cut off costs no push timeout, however many changes a failover
// makes. A broker that misses a push catches up by polling.
//
// Each broker has one push in flight at a time, of the newest metadata:
// the changes made while it is in flight go together in the next. A burst
// of changes (a client creating hundreds of streams at once) then costs
// each broker a few pushes, not one per change queued behind the others.
func (ps *pushers) push(ctx context.Context, meta *metadata.Cluster) {
	var wait []*pusher
	for _, b := range meta.Brokers {
		if b.ID == ps.self {
			continue
		}
		p := ps.get(b.ID)
		if !p.offer(meta, b) {
			wait = append(wait, p)
		}
	}
	for _, p := range wait {
		p.wait(ctx, meta.Epoch)
	}
}

// get returns the pusher of broker id.
func (ps *pushers) get(id int32) *pusher {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.to[id]
	if p == nil {
		p = &pusher{ps: ps, changed: make(chan struct{})}
		ps.to[id] = p
	}
	return p
}

// pusher sends one broker the controller's newest metadata.
type pusher struct {
	ps *pushers

	mu      sync.Mutex
	broker  metadata.Broker
	want    *metadata.Cluster // the newest offered
	acked   int64             // the newest epoch the broker took
	failed  int64             // the newest epoch whose push failed
	lagging bool              // the last push failed
	running bool              // a goroutine is pushing
	changed chan struct{}     // closed when acked or failed moves
}

// offer makes meta the metadata to send, if it is the newest, and starts
// a push unless one is in flight. It reports whether the broker is
// lagging (its last push failed): a caller does not wait for it.
func (p *pusher) offer(meta *metadata.Cluster, b metadata.Broker) (lagging bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.want == nil || meta.Epoch > p.want.Epoch {
		p.want, p.broker = meta, b
	}
	if !p.running {
		p.running = true
		go p.run()
	}
	return p.lagging
}

// wait waits until the broker took epoch or newer, or a push of epoch or
// newer failed, or ctx ends.
func (p *pusher) wait(ctx context.Context, epoch int64) {
	for {
		p.mu.Lock()
		done, ch := p.acked >= epoch || p.failed >= epoch, p.changed
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (p *pusher) run() {
	for {
		p.mu.Lock()
		meta, b := p.want, p.broker
		if meta == nil || meta.Epoch <= p.acked || meta.Epoch <= p.failed {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		err := p.push(meta, b)
		p.mu.Lock()
		if err == nil {
			p.acked = max(p.acked, meta.Epoch)
		} else {
			p.failed = max(p.failed, meta.Epoch)
		}
		p.lagging = err != nil
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if err != nil {
			p.ps.log.Warn("broker did not take new metadata; it will catch up by polling", "peer", b.ID, "metadata_epoch", meta.Epoch, "err", err)
		}
	}
}

func (p *pusher) push(meta *metadata.Cluster, b metadata.Broker) error {
	blob, err := metadata.Marshal(meta)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), controller.PushTimeout(meta))
	defer cancel()
	err = p.ps.pool.Call(ctx, b.Addr, transport.APIUpdateMetadata, &transport.MetadataBlob{Metadata: blob}, nil)
	if c := p.ps.active(); errors.Is(err, transport.ErrStaleMetadata) && c != nil {
		if c.Metadata().Epoch > meta.Epoch {
			// A newer change was pushed first (by the poll, say): the
			// broker holds newer than this, and is sent the newest next.
			return nil
		}
		c.CheckPushRefused(ctx, b)
	}
	return err
}
