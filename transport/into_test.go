package transport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillHandler answers a FetchRequest with MaxBytes bytes of batches, each
// the byte Offset, and holds the answer to one whose Offset is 255 until
// the connection's context ends.
var fillHandler = HandlerFunc(func(ctx context.Context, req *Request) Reply {
	var r FetchRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err))
	}
	if r.Offset == 255 {
		return func(ctx context.Context) (Message, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	b := make([]byte, r.MaxBytes)
	for i := range b {
		b[i] = byte(r.Offset)
	}
	return Immediate(&FetchResponse{HighWatermark: r.Offset, Batches: b}, nil)
})

func TestCallIntoReadsTheResponseIntoTheCallersMemory(t *testing.T) {
	_, addr := startServer(t, ServerConfig{}, fillHandler)
	c := dial(t, addr)
	fetch := func(fill byte, size int, buf *[]byte) (FetchResponse, error) {
		var resp FetchResponse
		err := c.Call(testContext(t), apiBig, &FetchRequest{Offset: int64(fill), MaxBytes: int32(size)}, &Into{Resp: &resp, Buf: buf})
		return resp, err
	}
	same := func(a, b []byte) bool { return &a[:1][0] == &b[:1][0] }

	mem := make([]byte, 0, 256<<10)
	buf := mem
	resp, err := fetch(1, 200<<10, &buf)
	require.NoError(t, err)
	assert.Equal(t, int64(1), resp.HighWatermark)
	require.Len(t, resp.Batches, 200<<10)
	assert.Equal(t, byte(1), resp.Batches[0])
	assert.Equal(t, byte(1), resp.Batches[len(resp.Batches)-1])
	assert.True(t, same(buf, mem), "the body was read into the memory given")
	assert.Equal(t, 0, len(buf), "Buf is given back empty, with its capacity")

	first := resp.Batches
	t.Run("the next response overwrites the one before", func(t *testing.T) {
		resp, err := fetch(2, 100<<10, &buf)
		require.NoError(t, err)
		require.Len(t, resp.Batches, 100<<10)
		assert.Equal(t, byte(2), resp.Batches[len(resp.Batches)-1])
		assert.Equal(t, byte(2), first[0], "the first response's bytes were the memory reused")
		assert.True(t, same(buf, mem))
	})

	t.Run("a response larger than the memory gets new memory", func(t *testing.T) {
		resp, err := fetch(3, 300<<10, &buf)
		require.NoError(t, err)
		require.Len(t, resp.Batches, 300<<10)
		assert.Equal(t, byte(3), resp.Batches[0])
		assert.False(t, same(buf, mem))
		assert.GreaterOrEqual(t, cap(buf), 300<<10, "Buf is the new memory, kept for the next call")
		assert.Equal(t, byte(2), first[0], "the memory too small was not written")
	})

	t.Run("a call that fails leaves Buf nil", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
		defer cancel()
		var resp FetchResponse
		err := c.Call(ctx, apiBig, &FetchRequest{Offset: 255, MaxBytes: 10}, &Into{Resp: &resp, Buf: &buf})
		require.ErrorIs(t, err, ErrTimeout)
		assert.Nil(t, buf, "the connection's reader could still write into the memory")
		resp, err = fetch(4, 10, &buf)
		require.NoError(t, err)
		assert.Equal(t, []byte{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, resp.Batches)
	})

	t.Run("without Into every response gets its own memory", func(t *testing.T) {
		var a, b FetchResponse
		require.NoError(t, c.Call(testContext(t), apiBig, &FetchRequest{Offset: 5, MaxBytes: 1 << 10}, &a))
		require.NoError(t, c.Call(testContext(t), apiBig, &FetchRequest{Offset: 6, MaxBytes: 1 << 10}, &b))
		assert.Equal(t, byte(5), a.Batches[0])
		assert.Equal(t, byte(6), b.Batches[0])
	})
}
