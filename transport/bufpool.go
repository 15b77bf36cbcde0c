package transport

import (
	"math/bits"
	"sync"
)

// Frames and request bodies are the bulk of what a node allocates: every
// batch a leader takes is read into a body, copied into one Replicate frame
// per follower and read again into a body on each. Allocated afresh, each
// is zeroed by the runtime and then collected; at a few hundred megabytes a
// second that was a fifth of a node's CPU (docs/benchmarks.md). The
// buffers below are reused instead, in size classes, for the buffers whose
// last user is known: a client's request frame once written, a server's
// response frame once written, and the body of a request whose handler
// keeps nothing of it (BodyReuser) once its response is written.
//
// A reused buffer is not zeroed: its user fills what it reads of it (a
// body is read whole, a frame is encoded by appending).
//
// The classes are powers of two and the halfway sizes between them, from
// minPooled to maxPooled, so a buffer wastes less than half of its class
// (a fifth on average) and the memory a server charges for a response (its
// capacity) stays close to its size. Smaller buffers are cheap to allocate
// and larger ones rare: both are allocated as before.
const (
	minPooledShift = 12 // 4 KiB
	maxPooledShift = 24 // 16 MiB
	minPooled      = 1 << minPooledShift
	maxPooled      = 1 << maxPooledShift
	// classes: 2^k and 1.5 * 2^k for each k from minPooledShift up, and
	// 2^maxPooledShift.
	bufClasses = 2*(maxPooledShift-minPooledShift) + 1
)

var bufPools [bufClasses]sync.Pool

// bufClass returns the class of the smallest buffer of at least n bytes,
// for minPooled <= n <= maxPooled.
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

// getBuf returns a buffer of length n whose contents are undefined, from the
// pool when n is in the pooled range.
func getBuf(n int) []byte {
	if n < minPooled || n > maxPooled {
		return make([]byte, n)
	}
	c := bufClass(n)
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, classSize(c))
}

// putBuf gives b back for reuse. Its caller must hold the only reference to
// b's memory and make no use of it afterwards. A buffer that is not of a
// class's exact capacity (allocated elsewhere, or grown by append) is left
// to the garbage collector.
func putBuf(b []byte) {
	n := cap(b)
	if n < minPooled || n > maxPooled {
		return
	}
	c := bufClass(n)
	if classSize(c) != n {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
