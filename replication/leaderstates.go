package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaderStatesConfig configures LeaderStates.
type LeaderStatesConfig[K comparable, S any] struct {
	// Load builds key's state for a leadership: typically a new state that
	// lead.Replay fills from the replica's log. The state keeps lead to
	// append through and wait with. ctx ends when the state is dropped
	// before it is built.
	Load func(ctx context.Context, key K, lead *Leadership) (S, error)
	// AckWait bounds every wait of the leaderships handed to Load (an
	// append's wait, WaitAcked); 0 for no bound but the caller's.
	AckWait time.Duration
	// KeepOnFailedAck keeps a state whose append's wait failed. By
	// default it is dropped and the next Get or Begin builds it again from
	// the log: the records stay in the leader's log, but a state that
	// tracked what was acknowledged may no longer know. A state that is
	// what the leader's log holds, acknowledged or not, keeps it.
	KeepOnFailedAck bool
}

// LeaderStates keeps a user's state per key (a partition, a stream) for
// each key whose replica this broker leads: built once per leadership from
// the replica's log (Load), shared by every caller, and dropped when the
// leadership ends, when an append's wait fails (see
// LeaderStatesConfig.KeepOnFailedAck), or when Retain lets the key go.
// Once a state is dropped, nothing more is appended through its
// leadership (ErrStateDropped); a new leadership, at a newer epoch, builds
// a new state from its own log, which holds every acknowledged record.
//
// Loads run in goroutines the LeaderStates owns; Close stops them and
// waits for them. Every method is for any goroutine.
type LeaderStates[K comparable, S any] struct {
	cfg   LeaderStatesConfig[K, S]
	loads sync.WaitGroup
	mu    struct {
		sync.Mutex
		entries map[K]*leaderEntry[S]
		closed  bool
	}
}

// leaderEntry is one key's state for one leadership.
type leaderEntry[S any] struct {
	lead   *Leadership
	cancel context.CancelFunc
	ready  chan struct{} // closed once the load ended; then state and err are set
	state  S
	err    error
	// Under the LeaderStates' mu: stale, an append's wait failed (it is
	// built again); dropped, it left the map.
	stale, dropped bool
}

// loaded reports whether the load ended, and its error.
func (e *leaderEntry[S]) loaded() (bool, error) {
	select {
	case <-e.ready:
		return true, e.err
	default:
		return false, nil
	}
}

// NewLeaderStates returns an empty LeaderStates.
func NewLeaderStates[K comparable, S any](cfg LeaderStatesConfig[K, S]) *LeaderStates[K, S] {
	r := &LeaderStates[K, S]{cfg: cfg}
	r.mu.entries = map[K]*leaderEntry[S]{}
	return r
}

// Get returns key's state for the current leadership of p, and the
// leadership, building it first when there is none (or the one held is of
// an earlier leadership, was dropped, or failed to build): it waits for
// the build, which every caller of the key shares, and which the
// caller's ctx ending does not cancel. It returns an error matching
// ErrNotLeader when p does not lead, ErrLoadFailed when the build failed
// (the next Get tries again), and the context's error.
func (r *LeaderStates[K, S]) Get(ctx context.Context, key K, p *Partition) (S, *Leadership, error) {
	var zero S
	for {
		e, err := r.begin(context.WithoutCancel(ctx), key, p, true)
		if err != nil {
			return zero, nil, err
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			return zero, nil, ctx.Err()
		}
		if e.err == nil {
			return e.state, e.lead, nil
		}
		r.mu.Lock()
		dropped := e.dropped
		r.mu.Unlock()
		if dropped && errors.Is(e.err, context.Canceled) {
			continue // dropped while it loaded: build the current one
		}
		return zero, nil, e.err
	}
}

// Begin starts building key's state for the current leadership of p in
// the background, unless it is built or being built, or its build failed
// (Get tries again; Begin leaves it, for Peek to say), and returns at
// once. The build's context is ctx: it ends with it. It returns an error
// matching ErrNotLeader when p does not lead.
func (r *LeaderStates[K, S]) Begin(ctx context.Context, key K, p *Partition) error {
	_, err := r.begin(ctx, key, p, false)
	return err
}

func (r *LeaderStates[K, S]) begin(ctx context.Context, key K, p *Partition, retryFailed bool) (*leaderEntry[S], error) {
	lead, err := p.Leadership()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %s/%d: shutting down", ErrNotLeader, p.Topic, p.Index)
	}
	e := r.mu.entries[key]
	if e != nil && e.lead.same(lead) && !e.stale {
		done, err := e.loaded()
		if !done || err == nil || !retryFailed {
			r.mu.Unlock()
			return e, nil
		}
	}
	old := e
	if old != nil {
		r.removeLocked(key, old)
	}
	e = r.startLocked(ctx, key, lead)
	r.mu.Unlock()
	if old != nil {
		old.lead.drop()
	}
	return e, nil
}

// startLocked starts building key's state for lead. The caller holds mu.
func (r *LeaderStates[K, S]) startLocked(ctx context.Context, key K, lead *Leadership) *leaderEntry[S] {
	ctx, cancel := context.WithCancel(ctx)
	e := &leaderEntry[S]{lead: lead, cancel: cancel, ready: make(chan struct{})}
	lead.ackWait = r.cfg.AckWait
	if !r.cfg.KeepOnFailedAck {
		lead.onAckFailed = func() { r.stale(key, e) }
	}
	r.mu.entries[key] = e
	r.loads.Add(1)
	go func() {
		defer r.loads.Done()
		defer cancel()
		s, err := r.cfg.Load(ctx, key, lead)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrLoadFailed, err)
		}
		e.state, e.err = s, err
		close(e.ready)
	}()
	return e
}

// removeLocked takes e, key's entry, out of the map and cancels its
// build; the caller drops its leadership once it has released mu.
func (r *LeaderStates[K, S]) removeLocked(key K, e *leaderEntry[S]) {
	e.cancel()
	e.dropped = true
	delete(r.mu.entries, key)
}

// stale marks e, if it is still key's entry, to be built again, and
// appends nothing more through its leadership.
func (r *LeaderStates[K, S]) stale(key K, e *leaderEntry[S]) {
	r.mu.Lock()
	if r.mu.entries[key] == e {
		e.stale = true
	}
	r.mu.Unlock()
	e.lead.drop()
}

// Peek returns key's state and its leadership without waiting: an error
// matching ErrNotLeader when none is kept or its leadership ended,
// ErrLoading while it is built (or, its append's wait having failed,
// until Get or Begin builds it again), and ErrLoadFailed when its build
// failed.
func (r *LeaderStates[K, S]) Peek(key K) (S, *Leadership, error) {
	var zero S
	r.mu.Lock()
	e := r.mu.entries[key]
	stale := e != nil && e.stale
	r.mu.Unlock()
	if e == nil {
		return zero, nil, fmt.Errorf("%w: no state kept", ErrNotLeader)
	}
	if !e.lead.Current() {
		return zero, nil, fmt.Errorf("%w: the leadership of %s/%d at epoch %d ended", ErrNotLeader, e.lead.p.Topic, e.lead.p.Index, e.lead.epoch)
	}
	done, err := e.loaded()
	switch {
	case !done || stale:
		return zero, nil, fmt.Errorf("%w: %s/%d at epoch %d", ErrLoading, e.lead.p.Topic, e.lead.p.Index, e.lead.epoch)
	case err != nil:
		return zero, nil, err
	}
	return e.state, e.lead, nil
}

// Ready returns the states that are built, of current leaderships, by
// key: what a periodic task (expiry, metrics) goes over.
func (r *LeaderStates[K, S]) Ready() map[K]S {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[K]S, len(r.mu.entries))
	for k, e := range r.mu.entries {
		if done, err := e.loaded(); done && err == nil && !e.stale && e.lead.Current() {
			out[k] = e.state
		}
	}
	return out
}

// Retain drops the states of the keys keep refuses, and those whose
// leadership ended.
func (r *LeaderStates[K, S]) Retain(keep func(K) bool) {
	var dropped []*Leadership
	r.mu.Lock()
	for k, e := range r.mu.entries {
		if !keep(k) || !e.lead.Current() {
			r.removeLocked(k, e)
			dropped = append(dropped, e.lead)
		}
	}
	r.mu.Unlock()
	for _, l := range dropped {
		l.drop()
	}
}

// Close drops every state, stops the builds under way and waits for them.
// Get and Begin answer ErrNotLeader after it. It may be called again.
func (r *LeaderStates[K, S]) Close() {
	r.mu.Lock()
	r.mu.closed = true
	var dropped []*Leadership
	for k, e := range r.mu.entries {
		r.removeLocked(k, e)
		dropped = append(dropped, e.lead)
	}
	r.mu.Unlock()
	for _, l := range dropped {
		l.drop()
	}
	r.loads.Wait()
}
