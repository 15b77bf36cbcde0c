package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gostream/record"
)

var (
	// ErrLoading means a leader state that is being built from its
	// replica's log (LeaderStates.Peek): it is retriable.
	ErrLoading = errors.New("replication: leader state loading")
	// ErrLoadFailed marks the error of a leader state's build: its Load
	// failed (the log could not be read, or holds what the user does not
	// take).
	ErrLoadFailed = errors.New("replication: leader state could not be built")
	// ErrStateDropped means an append through a leadership whose state the
	// registry dropped (its append's wait failed, or a newer state took its
	// place): nothing was appended, and the caller gets the state again
	// and retries.
	ErrStateDropped = errors.New("replication: leader state dropped")
)

// replayRead is how many bytes Replay reads at a time.
const replayRead = 1 << 20

// Leadership is a replica's leadership of its partition at one leader
// epoch: what a user that keeps state beside the leader's log (see
// LeaderStates) reads the log through and appends through. It ends when the
// replica stops leading at that epoch; its successor, at a newer epoch, is
// another Leadership.
type Leadership struct {
	p     *Partition
	epoch int32
	done  <-chan struct{}
	// ackWait bounds the waits for acknowledgements, 0 for none.
	ackWait time.Duration
	// onAckFailed, when set (by a LeaderStates), is called once an append's
	// wait failed.
	onAckFailed func()
	// dropped is set, under p.produceMu, once the state built on this
	// leadership is dropped: it appends nothing more.
	dropped bool
}

// Leadership returns this replica's leadership at its current epoch, or
// an error matching ErrNotLeader when it does not lead.
func (p *Partition) Leadership() (*Leadership, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.mu.state
	if st.Leader != p.brokerID || p.mu.leading == nil {
		return nil, fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
	}
	return &Leadership{p: p, epoch: st.LeaderEpoch, done: p.mu.leading}, nil
}

// Partition returns the replica, for what the leadership does not cover
// (reads below the high watermark, catching up a follower).
func (l *Leadership) Partition() *Partition { return l.p }

// Epoch returns the leader epoch.
func (l *Leadership) Epoch() int32 { return l.epoch }

// Done returns a channel that is closed when the leadership ends: the
// replica's state names another leader or a newer epoch, or the replica
// is closed.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Current reports whether the leadership has not ended (see Done). A
// current leadership may still have been passed by a newer leader this
// replica has not heard of: Confirm asks.
func (l *Leadership) Current() bool {
	select {
	case <-l.done:
		return false
	default:
		return true
	}
}

// same reports whether o is the same replica's leadership at the same
// epoch.
func (l *Leadership) same(o *Leadership) bool { return l.p == o.p && l.epoch == o.epoch }

// Replay calls fn with every batch of the replica's log, from the one
// that holds its start to its end as it is when Replay begins, in log
// order, each once, and returns that end. A log's start moves by whole
// segments, so its first batch starts at it. An error from fn stops it
// and is returned as it is; the log's errors are wrapped with where they
// happened. The batch's bytes are fn's to keep.
func (l *Leadership) Replay(ctx context.Context, fn func(record.Batch) error) (int64, error) {
	log := l.p.log
	off, end := log.LogStartOffset(), log.LogEndOffset()
	for off < end {
		buf, err := log.Read(ctx, off, replayRead, end, nil)
		if err != nil {
			return 0, fmt.Errorf("read %s/%d at offset %d: %w", l.p.Topic, l.p.Index, off, err)
		}
		if len(buf) == 0 {
			return 0, fmt.Errorf("read %s/%d at offset %d: nothing below the log end %d", l.p.Topic, l.p.Index, off, end)
		}
		var ferr error
		err = record.Batches(buf, func(b record.Batch) bool {
			if b.NextOffset() <= off {
				return true
			}
			if ferr = fn(b); ferr != nil {
				return false
			}
			off = b.NextOffset()
			return true
		})
		if ferr != nil {
			return 0, ferr
		}
		if err != nil {
			return 0, fmt.Errorf("batch at offset %d of %s/%d: %w", off, l.p.Topic, l.p.Index, err)
		}
	}
	return end, nil
}

// Append appends batch to the log as Partition.Produce does, only while
// the leadership is current (ErrNotLeader otherwise) and its state not
// dropped (ErrStateDropped), and returns the log end after it and a wait
// that returns once every active replica holds it. The caller applies the
// batch to its state when Append returns, and serializes its appends with
// that (under its own lock), so the state follows the log's order; the
// wait is for after the lock. A wait that fails drops a state the
// LeaderStates keeps (unless configured to keep it): the records stay in the
// leader's log, and whether the state still says what the log holds is
// no longer known.
func (l *Leadership) Append(batch record.Batch) (end int64, wait func(context.Context) error, err error) {
	w, err := l.Produce(batch, nil)
	if err != nil {
		return 0, nil, err
	}
	return batch.NextOffset(), func(ctx context.Context) error {
		_, err := w(ctx)
		return err
	}, nil
}

// Produce is Append for a caller that answers a producer: its wait returns
// the Ack, as Partition.Produce's does. The batch is stamped in place, so
// its BaseOffset and NextOffset are where it landed once Produce returns.
// hold is as Partition.ProduceHeld's (nil: the batch's memory is not
// reused).
func (l *Leadership) Produce(batch record.Batch, hold func() (release func())) (func(context.Context) (Ack, error), error) {
	_, w, err := l.p.produce(batch, l, hold)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (Ack, error) {
		if l.ackWait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, l.ackWait)
			defer cancel()
		}
		ack, err := w(ctx)
		if err != nil {
			if l.onAckFailed != nil {
				l.onAckFailed()
			}
			return Ack{}, err
		}
		return ack, nil
	}, nil
}

// WaitAcked waits until the high watermark reaches end: every record
// below end is on every active replica. It returns an error matching
// ErrNotLeader when the replica stops leading first, and the context's
// error.
//
// The high watermark counts only while this leadership lasts: once the
// replica has stopped leading at this epoch (another leader, a newer
// epoch, a follower that knows one), its log may have been cut back and
// refilled by the next leader, and a high watermark past end no longer
// says that what this leadership appended below end is there.
func (l *Leadership) WaitAcked(ctx context.Context, end int64) error {
	p := l.p
	if end <= 0 {
		return nil
	}
	if l.ackWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.ackWait)
		defer cancel()
	}
	for {
		p.mu.Lock()
		st, hw, changed := p.mu.state, p.mu.hw, p.mu.hwChanged
		passed := p.passedLocked(l.epoch)
		p.mu.Unlock()
		if st.Leader != p.brokerID {
			return fmt.Errorf("%w: partition %s/%d is led by broker %d", ErrNotLeader, p.Topic, p.Index, st.Leader)
		}
		if st.LeaderEpoch != l.epoch || passed {
			return fmt.Errorf("%w: broker %d no longer leads %s/%d at epoch %d", ErrNotLeader, p.brokerID, p.Topic, p.Index, l.epoch)
		}
		if hw >= end {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Confirm returns nil only if the leadership is current and no active
// follower has seen a newer leader epoch, asked now
// (Partition.ConfirmLeader): what a user answers from its state after
// Confirm is not something a newer leader has passed. It returns an error
// matching ErrNotLeader when the leadership ended or a newer one exists,
// and the error of a follower that could not be asked.
func (l *Leadership) Confirm(ctx context.Context) error {
	if err := l.p.ConfirmLeader(ctx); err != nil {
		return err
	}
	// After: ConfirmLeader confirms the epoch the replica leads at now.
	if !l.Current() {
		return fmt.Errorf("%w: broker %d no longer leads %s/%d at epoch %d", ErrNotLeader, l.p.brokerID, l.p.Topic, l.p.Index, l.epoch)
	}
	return nil
}

// drop marks the leadership's state dropped: once drop returns, nothing
// more is appended through it.
func (l *Leadership) drop() {
	l.p.produceMu.Lock()
	l.dropped = true
	l.p.produceMu.Unlock()
}
