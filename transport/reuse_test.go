package transport

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reuseHandler answers apiEcho's ProduceRequest with the batch's first byte
// as BaseOffset, after checking, in the Reply, that every byte of the batch
// is that byte: a body given back for reuse while its request was still
// served would be overwritten by another's. It reuses bodies when reuse is
// set.
type reuseHandler struct{ reuse bool }

func (h reuseHandler) ReusesBody(api API) bool { return h.reuse && api == apiEcho }

func (h reuseHandler) Handle(ctx context.Context, req *Request) Reply {
	var r ProduceRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	return func(ctx context.Context) (Message, error) {
		runtime.Gosched() // as a Replicate's Reply waits for its fsync
		for i, b := range r.Batch {
			if b != r.Batch[0] {
				return nil, fmt.Errorf("%w: byte %d of the batch is %d, not %d", ErrInvalidRequest, i, b, r.Batch[0])
			}
		}
		return &ProduceResponse{BaseOffset: int64(r.Batch[0])}, nil
	}
}

func TestReusedBodiesAreNotSharedWhileServed(t *testing.T) {
	_, addr := startServer(t, ServerConfig{}, reuseHandler{reuse: true})
	c := dial(t, addr)
	const senders, calls, size = 8, 50, 64 << 10
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			var pend []*Pending
			var want []byte
			for i := range calls {
				v := byte(s*calls + i)
				batch := make([]byte, size)
				for j := range batch {
					batch[j] = v
				}
				p, err := c.Send(testContext(t), apiEcho, &ProduceRequest{Batch: batch})
				if !assert.NoError(t, err) {
					return
				}
				pend, want = append(pend, p), append(want, v)
			}
			for i, p := range pend {
				var resp ProduceResponse
				if assert.NoError(t, p.Wait(testContext(t), &resp)) {
					assert.Equal(t, int64(want[i]), resp.BaseOffset)
				}
			}
		})
	}
	wg.Wait()
}

// TestLargeBodiesAndFramesAreReused checks what the pool is for: a
// round trip of a 64 KiB request allocates far less than its body and its
// frame (128 KiB) once the buffers are reused, on both sides.
func TestLargeBodiesAndFramesAreReused(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops buffers on purpose")
	}
	perCall := func(reuse bool) uint64 {
		_, addr := startServer(t, ServerConfig{}, reuseHandler{reuse: reuse})
		c := dial(t, addr)
		req := &ProduceRequest{Batch: make([]byte, 64<<10)}
		call := func() {
			var resp ProduceResponse
			require.NoError(t, c.Call(testContext(t), apiEcho, req, &resp))
		}
		for range 10 { // fill the pool
			call()
		}
		const n = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			call()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	reused, fresh := perCall(true), perCall(false)
	t.Logf("bytes allocated per call of 64 KiB: %d with reused bodies, %d without", reused, fresh)
	assert.Less(t, reused, uint64(16<<10), "the request's frame and body are reused")
	assert.Greater(t, fresh, uint64(64<<10), "a body that is not reused is allocated for each request")
}

// holdHandler reuses apiEcho's bodies; the first request's handler holds
// its body past the response and hands it to the test.
type holdHandler struct {
	held chan heldBody
}

type heldBody struct {
	batch   []byte
	release func()
}

func (h holdHandler) ReusesBody(api API) bool { return api == apiEcho }

func (h holdHandler) Handle(ctx context.Context, req *Request) Reply {
	var r ProduceRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	if r.Partition == 1 {
		h.held <- heldBody{r.Batch, req.Hold()}
	}
	return Immediate(&ProduceResponse{}, nil)
}

// TestHeldBodiesAreNotReused: a body the handler holds stays as it was
// while later requests are read into reused buffers, until it is released.
func TestHeldBodiesAreNotReused(t *testing.T) {
	h := holdHandler{held: make(chan heldBody, 1)}
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)
	send := func(partition int32, v byte) {
		require.NoError(t, c.Call(testContext(t), apiEcho, &ProduceRequest{Partition: partition, Batch: bytes.Repeat([]byte{v}, 64<<10)}, &ProduceResponse{}))
	}
	send(1, 0xaa)
	held := <-h.held
	for i := range 50 {
		send(0, byte(i))
	}
	assert.Equal(t, bytes.Repeat([]byte{0xaa}, 64<<10), held.batch, "a held body is not reused")
	held.release()
	held.release() // a second call does nothing
}
