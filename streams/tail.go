package streams

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gostream/durable"
	"gostream/metadata"
	"gostream/transport"
)

// tailWait is how long a tail's read from the leader waits for data.
const tailWait = 20 * time.Second

// Backoff between a tail's failed reads, while readers still wait on it.
const (
	tailBackoffMin = 50 * time.Millisecond
	tailBackoffMax = time.Second
)

// errTailsClosed is the answer of a wait on a tail once the server stops.
var errTailsClosed = fmt.Errorf("%w: the node is stopping", transport.ErrShuttingDown)

// behindError says the tail moved past the reader's position, and not by
// the answer the tail holds: the reader reads from at itself (there is
// data there).
type behindError struct{ at string }

func (e *behindError) Error() string { return "the stream's tail moved past " + e.at }

// pollFunc reads a stream from its leader: from a token, up to about
// maxBytes, waiting up to wait for data.
type pollFunc func(ctx context.Context, t *metadata.Topic, from string, maxBytes int, wait time.Duration) (*durable.ReadResult, error)

// tails are the node's subscriptions to the tails of the streams its
// live readers wait on, one per stream (by topic id). See the package
// documentation.
type tails struct {
	poll     pollFunc
	pollWait time.Duration
	onTails  func(delta int)
	wg       sync.WaitGroup
	mu       struct {
		sync.Mutex
		m      map[string]*tail
		closed bool
	}
}

func newTails(poll pollFunc, wait time.Duration, onTails func(int)) *tails {
	ts := &tails{poll: poll, pollWait: wait, onTails: onTails}
	ts.mu.m = map[string]*tail{}
	return ts
}

// tail is one stream's subscription: a loop that reads the stream from
// its acknowledged tail, waiting on the leader, and wakes the readers
// waiting here when the tail moves or the read fails.
type tail struct {
	name   string // the stream's topic
	id     string // its incarnation
	cancel context.CancelFunc
	mu     struct {
		sync.Mutex
		topic    *metadata.Topic
		maxBytes int
		info     durable.Info // the stream's, as the last read said
		// from is where the next read reads from: the acknowledged tail
		// as last known. last is the last answer that moved it, read
		// from last.Start; nil before one.
		from string
		last *durable.ReadResult
		// changed is closed, and replaced, each time last or failed is
		// set. failed is the last read's error, for the readers that
		// waited on failedAt, the channel closed when it failed.
		changed  chan struct{}
		failed   error
		failedAt chan struct{}
		// waiting counts the readers waiting; joined says that one came
		// since the loop's read began. The loop ends when neither holds
		// after a read that woke no reader, and done is set then.
		waiting int
		joined  bool
		done    bool
	}
}

// join adds a reader to t's subscription, which it starts, at from, if
// there is none: a subscription of another incarnation of the topic, or
// one that ended, is replaced. info is what the reader's read said of
// the stream. It returns the subscription and the channel closed at its
// next change: the reader sees every change from now on.
func (ts *tails) join(t *metadata.Topic, from string, maxBytes int, info durable.Info) (*tail, chan struct{}, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.mu.closed {
		return nil, nil, errTailsClosed
	}
	if tl := ts.mu.m[t.Name]; tl != nil {
		tl.mu.Lock()
		if !tl.mu.done && tl.id == t.ID {
			tl.mu.waiting++
			tl.mu.joined = true
			watch := tl.mu.changed
			tl.mu.Unlock()
			return tl, watch, nil
		}
		tl.mu.Unlock()
		tl.cancel() // a deleted incarnation's, or one that ended
	}
	ctx, cancel := context.WithCancel(context.Background())
	tl := &tail{name: t.Name, id: t.ID, cancel: cancel}
	tl.mu.topic, tl.mu.maxBytes, tl.mu.info, tl.mu.from = t, maxBytes, info, from
	tl.mu.changed = make(chan struct{})
	tl.mu.waiting, tl.mu.joined = 1, true
	ts.mu.m[t.Name] = tl
	ts.wg.Add(1)
	watch := tl.mu.changed
	ts.onTails(1)
	go ts.run(ctx, tl)
	return tl, watch, nil
}

// leave takes a reader out of tl's subscription.
func (tl *tail) leave() {
	tl.mu.Lock()
	tl.mu.waiting--
	tl.mu.Unlock()
}

// run reads the stream from its tail while readers wait on it.
func (ts *tails) run(ctx context.Context, tl *tail) {
	defer ts.wg.Done()
	defer ts.onTails(-1)
	defer tl.cancel()
	backoff := tailBackoffMin
	// answered: the last read woke readers, who come back for what
	// follows (an SSE stream's next read) as soon as they have sent it on.
	answered := false
	for {
		tl.mu.Lock()
		if (tl.mu.waiting == 0 && !tl.mu.joined && !answered) || ctx.Err() != nil {
			tl.end()
			tl.mu.Unlock()
			ts.remove(tl)
			return
		}
		tl.mu.joined = false
		t, from, maxBytes := tl.mu.topic, tl.mu.from, tl.mu.maxBytes
		tl.mu.Unlock()
		res, err := ts.poll(ctx, t, from, maxBytes, ts.pollWait)
		if ctx.Err() != nil {
			continue // ends at the top
		}
		if err != nil {
			answered = false
			tl.fail(err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, tailBackoffMax)
			continue
		}
		backoff = tailBackoffMin
		tl.mu.Lock()
		tl.mu.info = res.Info
		moved := len(res.Messages) > 0 || res.Closed || res.Next != from
		answered = moved
		if moved {
			tl.mu.last, tl.mu.from = res, res.Next
			tl.wakeLocked()
		}
		if res.Closed && len(res.Messages) == 0 {
			// The stream is closed at its tail: nothing more comes. The
			// readers that wait have the answer; later ones read it
			// themselves, at once.
			tl.end()
			tl.mu.Unlock()
			ts.remove(tl)
			return
		}
		tl.mu.Unlock()
	}
}

// wakeLocked wakes the readers waiting. Called with tl.mu held.
func (tl *tail) wakeLocked() {
	close(tl.mu.changed)
	tl.mu.changed = make(chan struct{})
}

// fail hands err to the readers waiting now.
func (tl *tail) fail(err error) {
	tl.mu.Lock()
	tl.mu.failed, tl.mu.failedAt = err, tl.mu.changed
	tl.wakeLocked()
	tl.mu.Unlock()
}

// end marks the subscription ended and wakes the readers still waiting,
// which join another. Called with tl.mu held.
func (tl *tail) end() {
	tl.mu.done = true
	tl.wakeLocked()
}

func (ts *tails) remove(tl *tail) {
	ts.mu.Lock()
	if ts.mu.m[tl.name] == tl {
		delete(ts.mu.m, tl.name)
	}
	ts.mu.Unlock()
}

// close ends every subscription and waits for their loops; a wait on a
// tail after it fails with errTailsClosed.
func (ts *tails) close() {
	ts.mu.Lock()
	ts.mu.closed = true
	for _, tl := range ts.mu.m {
		tl.cancel()
	}
	ts.mu.Unlock()
	ts.wg.Wait()
}

// waitAtTail waits on the tail of t's stream when req reads from where
// the node's subscription is (or from the start of the answer it holds),
// without asking the leader first: the next read of a live reader that
// was answered from the tail. ok is false when the reader is elsewhere,
// or no subscription runs.
func (ts *tails) waitAtTail(ctx context.Context, t *metadata.Topic, req *durable.ReadRequest) (res *durable.ReadResult, ok bool, err error) {
	if _, kind, err := durable.ParseOffset(req.Offset); err != nil || kind != durable.AtToken {
		return nil, false, nil
	}
	ts.mu.Lock()
	tl := ts.mu.m[t.Name]
	ts.mu.Unlock()
	if tl == nil {
		return nil, false, nil
	}
	tl.mu.Lock()
	at := tl.id == t.ID && !tl.mu.done && (tl.mu.from == req.Offset || tl.mu.last != nil && tl.mu.last.Start == req.Offset)
	info := tl.mu.info
	tl.mu.Unlock()
	if !at {
		return nil, false, nil
	}
	res, err = ts.wait(ctx, t, &durable.ReadResult{Info: info, Start: req.Offset, Next: req.Offset, UpToDate: true}, req)
	return res, true, err
}

// wait waits on the tail of t's stream for what follows now.Next, the
// acknowledged tail a read just found (with nothing to return), for up
// to req.Wait: it returns the answer of the subscription's read from
// there, cut to req.MaxBytes; now, timed out, at the end of the wait; a
// *behindError when the tail moved past the reader and the answer held
// is not from there; the read's error when the subscription's read
// failed while the reader waited.
func (ts *tails) wait(ctx context.Context, t *metadata.Topic, now *durable.ReadResult, req *durable.ReadRequest) (*durable.ReadResult, error) {
	at := now.Next
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	for {
		tl, watch, err := ts.join(t, at, req.MaxBytes, now.Info)
		if err != nil {
			return nil, err
		}
		res, again, err := tl.await(ctx, at, req.MaxBytes, watch, deadline.C)
		tl.leave()
		if !again {
			if res == nil && err == nil {
				out := *now
				out.TimedOut = true
				return &out, nil
			}
			return res, err
		}
	}
}

// await waits on tl for the answer from at, from the change watch is
// closed at on. again is set when the subscription ended meanwhile: the
// reader joins another.
func (tl *tail) await(ctx context.Context, at string, maxBytes int, watch chan struct{}, deadline <-chan time.Time) (res *durable.ReadResult, again bool, err error) {
	for {
		tl.mu.Lock()
		if tl.mu.failedAt == watch {
			// The read failed while this reader waited on it.
			err := tl.mu.failed
			tl.mu.Unlock()
			return nil, false, err
		}
		last, from, done, changed := tl.mu.last, tl.mu.from, tl.mu.done, tl.mu.changed
		tl.mu.Unlock()
		switch {
		case last != nil && last.Start == at:
			return cut(last, maxBytes), false, nil
		case from > at:
			return nil, false, &behindError{at: at}
		case done:
			return nil, true, nil
		case changed != watch:
			// Changed since it was watched, not to this reader's answer:
			// watch the next change.
			watch = changed
			continue
		}
		select {
		case <-watch:
		case <-deadline:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// cut returns res with at most about maxBytes of data (the first message
// whole, whatever its size). res is shared by every reader of the tail:
// it is not changed.
func cut(res *durable.ReadResult, maxBytes int) *durable.ReadResult {
	out := *res
	size := 0
	for i, m := range res.Messages {
		if i > 0 && size+len(m.Data) > maxBytes {
			out.Messages = res.Messages[:i:i]
			out.Next = res.Messages[i-1].Next
			out.UpToDate, out.Closed = false, false
			break
		}
		size += len(m.Data)
	}
	return &out
}
