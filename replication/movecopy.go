package replication

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gostream/transport"
)

// Moving a replica (docs/reassignment.md) copies a partition's log to a
// broker being added by recovery, paced by a Throttle and watched through
// CopyProgress. Only the bulk copy is paced: the tail copied while
// appends wait (join) never is, nor is the replication of produced
// records.

// Throttle paces the bytes a node sends to copy replicas.
type Throttle interface {
	// Wait returns once n more bytes may be sent, or with ctx's error.
	Wait(ctx context.Context, n int) error
}

// Pacer is a Throttle of a rate in bytes per second, shared by every copy
// of a node: each send reserves its slot after those before it, and
// waits for it. A copy that fell behind its slots (its requests took
// longer than their share of the rate: a busy target, a slow disk) may
// catch up by at most pacerCredit's worth of the rate at once; after a
// pause it may send that much at once, no more. Over any stretch of time
// T it sends at most rate × (T + pacerCredit) and one request.
type Pacer struct {
	mu   sync.Mutex
	rate float64   // bytes per second; 0: unpaced
	next time.Time // when the next send may start
}

// SetRate sets the rate, in bytes per second (0: unpaced), for the sends
// that reserve their slot from now on.
func (p *Pacer) SetRate(bytesPerSec int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = float64(bytesPerSec)
}

// Rate is the rate in bytes per second, 0 when unpaced.
func (p *Pacer) Rate() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.rate)
}

// Wait implements Throttle.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	p.mu.Lock()
	if p.rate <= 0 {
		p.mu.Unlock()
		return ctx.Err()
	}
	now := time.Now()
	at := now.Add(-pacerCredit)
	if p.next.After(at) {
		at = p.next
	}
	p.next = at.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// pacerCredit is how far behind its slots a Pacer lets its sends fall and
// still catch up: at 50 MB/s, 10 MB at most sent ahead of the steady
// rate, about 10 requests of a megabyte.
const pacerCredit = 200 * time.Millisecond

// copyTrack is one copy's progress, read by CopyProgress while it runs.
type copyTrack struct {
	copied  atomic.Int64
	total   atomic.Int64
	running atomic.Bool
	started time.Time
}

// copyPace is what a paced copy sends through: its throttle (nil:
// unpaced) and the progress it counts.
type copyPace struct {
	throttle Throttle
	track    *copyTrack
	chunk    int // bytes a request carries at most; 0: copyChunk
}

// copyChunk is what one request of a copy carries at most.
const copyChunk = 1 << 20

// pacedChunk is what one request of a copy paced at rate bytes per second
// carries at most: about 50 ms of it, from 64 KiB to copyChunk, so that a
// slow throttle is not a burst of a megabyte followed by a long pause.
func pacedChunk(rate int64) int {
	return int(min(max(rate/20, 64<<10), copyChunk))
}

// readMax is how many bytes a copy reads at once.
func (c *copyPace) readMax() int {
	if c == nil || c.chunk <= 0 {
		return copyChunk
	}
	return c.chunk
}

// before waits for n bytes' slot.
func (c *copyPace) before(ctx context.Context, n int) error {
	if c == nil || c.throttle == nil {
		return nil
	}
	return c.throttle.Wait(ctx, n)
}

// sent counts n bytes the peer acknowledged.
func (c *copyPace) sent(n int) {
	if c != nil && c.track != nil {
		c.track.copied.Add(int64(n))
	}
}

// sizer is the part of a Log that tells its size in bytes (storage.Log
// does); progress estimates what is left to copy from it.
type sizer interface{ Size() int64 }

// estimateBytes is about how many bytes of this replica's log lie in
// [from, to): its size in proportion to the offsets, 0 when the log does
// not tell its size.
func (p *Partition) estimateBytes(from, to int64) int64 {
	s, ok := p.log.(sizer)
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	if !ok || end <= start || to <= from {
		return 0
	}
	return int64(float64(s.Size()) * float64(min(to, end)-max(from, start)) / float64(end-start))
}

// CopyProgress is how far this leader's copy of its log to broker, a
// replica being added, has come: the last copy started for it, running
// or not; a zero answer when there was none.
func (p *Partition) CopyProgress(broker int32) transport.MoveProgressResponse {
	p.mu.Lock()
	t := p.mu.copies[broker]
	p.mu.Unlock()
	if t == nil {
		return transport.MoveProgressResponse{}
	}
	return transport.MoveProgressResponse{Running: t.running.Load(), CopiedBytes: t.copied.Load(), TotalBytes: t.total.Load(), Started: t.started.UnixMilli()}
}

// RecoverFollowerPaced is RecoverFollower for a replica being added by a
// move: its bulk copy waits on throttle, whose rate is about rate bytes
// per second (nil: unpaced), in requests sized for that rate, and is
// counted for CopyProgress.
func (p *Partition) RecoverFollowerPaced(ctx context.Context, broker int32, throttle Throttle, rate int64) (RecoverResult, error) {
	pace := &copyPace{throttle: throttle, track: &copyTrack{}}
	if throttle != nil && rate > 0 {
		pace.chunk = pacedChunk(rate)
	}
	return p.recoverFollower(ctx, broker, pace)
}

// trackCopy makes pace's count, if it has one, what CopyProgress reports
// for broker from now on, running until the returned function is called.
// A recovery calls it once it is the one that runs for broker: one
// refused meanwhile leaves the running copy's count in place.
func (p *Partition) trackCopy(broker int32, pace *copyPace) (done func()) {
	if pace == nil || pace.track == nil {
		return func() {}
	}
	t := pace.track
	t.started = time.Now()
	t.running.Store(true)
	p.mu.Lock()
	if p.mu.copies == nil {
		p.mu.copies = map[int32]*copyTrack{}
	}
	p.mu.copies[broker] = t
	p.mu.Unlock()
	return func() { t.running.Store(false) }
}

// beginRecovery marks broker's recovery as under way here; a second one
// at once is refused (the first one's copy and truncation would race with
// it). The caller runs the returned end.
func (p *Partition) beginRecovery(broker int32) (end func(), err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.recovering[broker] {
		return nil, fmt.Errorf("%w: a recovery of broker %d for %s/%d is under way on its leader; try again once it is done", ErrNotReady, broker, p.Topic, p.Index)
	}
	if p.mu.recovering == nil {
		p.mu.recovering = map[int32]bool{}
	}
	p.mu.recovering[broker] = true
	return func() {
		p.mu.Lock()
		delete(p.mu.recovering, broker)
		p.mu.Unlock()
	}, nil
}
