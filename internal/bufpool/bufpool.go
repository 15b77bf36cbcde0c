// Package bufpool reuses the large byte buffers of the hot paths: frames,
// request bodies and produced batches.
//
// They are the bulk of what a node allocates: every batch a leader takes is
// read into a body, copied into one Replicate frame per follower and read
// again into a body on each. Allocated afresh, each is zeroed by the
// runtime and then collected; at a few hundred megabytes a second that was
// a fifth of a node's CPU (docs/benchmarks.md). They are reused instead, in
// size classes, where their last user is known: a client's request frame
// once written, a server's response frame once written, a request's body
// once its response is written and its holds released (Ref), a Kafka
// producer's batch once its followers' senders are done with it.
//
// A reused buffer is not zeroed: its user fills what it reads of it (a body
// is read whole, a frame is encoded by appending).
//
// The classes are powers of two and the halfway sizes between them, from
// MinSize to MaxSize, so a buffer wastes less than half of its class (a
// fifth on average) and the memory a server charges for a response (its
// capacity) stays close to its size. Smaller buffers are cheap to allocate
// and larger ones rare: both are allocated as asked, and not kept.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

const (
	minPooledShift = 12 // 4 KiB
	maxPooledShift = 24 // 16 MiB
	// MinSize and MaxSize bound the buffers kept for reuse.
	MinSize = 1 << minPooledShift
	MaxSize = 1 << maxPooledShift
	// classes: 2^k and 1.5 * 2^k for each k from minPooledShift up, and
	// 2^maxPooledShift.
	bufClasses = 2*(maxPooledShift-minPooledShift) + 1
)

var bufPools [bufClasses]sync.Pool

// bufClass returns the class of the smallest buffer of at least n bytes,
// for MinSize <= n <= MaxSize.
func bufClass(n int) int {
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	if k <= minPooledShift {
		return 0
	}
	if n <= 3<<(k-2) { // fits 1.5 * 2^(k-1)
		return 2*(k-1-minPooledShift) + 1
	}
	return 2 * (k - minPooledShift)
}

// classSize is the capacity of the buffers of class c.
func classSize(c int) int {
	size := 1 << (minPooledShift + c/2)
	if c%2 == 1 {
		size += size / 2
	}
	return size
}

// Get returns a buffer of length n whose contents are undefined, from the
// pool when n is in the pooled range.
func Get(n int) []byte {
	if n < MinSize || n > MaxSize {
		return make([]byte, n)
	}
	c := bufClass(n)
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, classSize(c))
}

// Put gives b back for reuse. Its caller must hold the only reference to
// b's memory and make no use of it afterwards. A buffer that is not of a
// class's exact capacity (allocated elsewhere, or grown by append) is left
// to the garbage collector.
func Put(b []byte) {
	n := cap(b)
	if n < MinSize || n > MaxSize {
		return
	}
	c := bufClass(n)
	if classSize(c) != n {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}

// Ref counts the holders of a pooled buffer: whoever made it, and each
// Hold. The buffer goes back to the pool when the last lets go. A holder
// that never lets go only leaves the buffer to the garbage collector.
type Ref struct {
	refs atomic.Int32
	buf  []byte
}

// NewRef returns a Ref of buf held once, by its caller.
func NewRef(buf []byte) *Ref {
	r := &Ref{buf: buf}
	r.refs.Store(1)
	return r
}

// Hold adds a holder and returns its release, which may be called more
// than once (only the first counts).
func (r *Ref) Hold() (release func()) {
	r.refs.Add(1)
	var once sync.Once
	return func() { once.Do(r.Drop) }
}

// Drop lets go of one hold: the caller's own, once, or a Hold's through
// its release. The last gives the buffer back.
func (r *Ref) Drop() {
	if r.refs.Add(-1) == 0 {
		Put(r.buf)
	}
}
