package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// smallCharge is the size up to which a charge may draw on a memory's
// headroom: requests this small (metadata, acknowledgements, small
// batches) go on while large ones have spent the capacity.
const smallCharge = 64 << 10

// memory counts bytes held for requests and responses against a capacity.
// Charges wait while they do not fit. A charge larger than the whole
// capacity is let in when nothing else is held, so that it cannot wait
// forever.
type memory struct {
	capacity int64
	// headroom is room past capacity for charges of at most smallCharge.
	headroom int64

	mu struct {
		sync.Mutex
		used    int64
		waiters int
		changed chan struct{} // closed and replaced when bytes are given back to waiters
	}
}

func newMemory(capacity, headroom int64) *memory {
	m := &memory{capacity: capacity, headroom: headroom}
	m.mu.changed = make(chan struct{})
	return m
}

// errMemoryWait means a charge did not fit before its wait was over.
var errMemoryWait = errors.New("transport: memory wait over")

// fitsLocked reports whether n more bytes fit for a charge that holds
// own already. What holds nothing else may take any amount: one request
// larger than the whole memory (a fetch reserving a read buffer above a
// small connection's share) waits until it is alone, not for ever.
func (m *memory) fitsLocked(n, own int64) bool {
	limit := m.capacity
	if n <= smallCharge {
		limit += m.headroom
	}
	return m.mu.used == own || m.mu.used+n <= limit
}

// take charges n bytes for a charge that holds own already, waiting while
// they do not fit until ctx ends (its error) or expired fires
// (errMemoryWait); a nil expired waits on ctx alone.
func (m *memory) take(ctx context.Context, n, own int64, expired <-chan time.Time) error {
	m.mu.Lock()
	for !m.fitsLocked(n, own) {
		ch := m.mu.changed
		m.mu.waiters++
		m.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-expired:
			err = errMemoryWait
		}
		m.mu.Lock()
		m.mu.waiters--
		if err != nil {
			m.mu.Unlock()
			return err
		}
	}
	m.mu.used += n
	m.mu.Unlock()
	return nil
}

// force charges n bytes whether they fit or not (n < 0 gives bytes back):
// for what is allocated already and must be answered anyway.
func (m *memory) force(n int64) {
	if n < 0 {
		m.give(-n)
		return
	}
	m.mu.Lock()
	m.mu.used += n
	m.mu.Unlock()
}

// give returns n bytes.
func (m *memory) give(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.mu.used -= n
	if m.mu.used < 0 {
		m.mu.Unlock()
		panic(fmt.Sprintf("transport: memory gave back %d bytes more than it held", -m.mu.used))
	}
	if m.mu.waiters > 0 {
		close(m.mu.changed)
		m.mu.changed = make(chan struct{})
	}
	m.mu.Unlock()
}

// inUse is the number of bytes charged.
func (m *memory) inUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.used
}

// charge is what one request holds of its connection's memory and of the
// server's: its body, what its Reply reserved, and later its response
// frame. It passes from the connection's reader to the request's Reply
// and then to the writer of its response, one at a time, so it needs no
// lock of its own.
type charge struct {
	conn, server *memory
	wait         time.Duration // how long a charge waits for the server's memory
	held         int64
}

// take charges n bytes to the connection, waiting as long as ctx lasts,
// then to the server, waiting up to c.wait. It returns an error matching
// ErrBusy if the server's memory stays spent, or ctx's error.
func (c *charge) take(ctx context.Context, n int64) error {
	if err := c.conn.take(ctx, n, c.held, nil); err != nil {
		return err
	}
	t := time.NewTimer(c.wait)
	defer t.Stop()
	if err := c.server.take(ctx, n, c.held, t.C); err != nil {
		c.conn.give(n)
		if errors.Is(err, errMemoryWait) {
			return c.busy()
		}
		return err
	}
	c.held += n
	return nil
}

func (c *charge) busy() error {
	return fmt.Errorf("%w: the node's request memory (%d bytes) is in use; retry", ErrBusy, c.server.capacity)
}

// set makes the charge n bytes, without waiting.
func (c *charge) set(n int64) {
	c.conn.force(n - c.held)
	c.server.force(n - c.held)
	c.held = n
}

// release gives back everything held.
func (c *charge) release() { c.set(0) }

// Reserve charges n more bytes to the memory of the request's connection
// and of the server (see ServerConfig), for a Reply about to allocate
// them: a fetch reserves its read buffer before it reads. It waits while
// the connection's share is spent (the connection's other responses are
// written meanwhile, or it closes: ctx ends), and up to
// ServerConfig.MemoryWait while the server's is, then returns an error
// matching ErrBusy. The request holds what it reserved until its Reply
// returns; from then on it holds its body and its response frame, until
// that is written. A Request that no Server read reserves nothing.
func (r *Request) Reserve(ctx context.Context, n int) error {
	if r.charge == nil || n <= 0 {
		return nil
	}
	return r.charge.take(ctx, int64(n))
}
