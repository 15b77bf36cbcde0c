package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"gostream/record"
)

// Benchmarks of the hot functions of the transport on their own, with no
// socket: what the server does for each request it reads and each
// response it writes, and what a client (or a leader sending to its
// followers) does for each request it sends. Each runs with batches of 1,
// 16 and 256 records of 1 KiB. make bench-micro runs them with the other
// packages' (docs/benchmarks.md, "Hot functions on their own").

// benchRecordCounts are the records per batch of every benchmark here.
var benchRecordCounts = []int{1, 16, 256}

// benchBatch returns a batch of n records with 1 KiB values.
func benchBatch(b *testing.B, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10)}
	}
	batch, err := record.AppendBatch(nil, recs)
	require.NoError(b, err)
	return batch
}

// discardConn is a connection whose writes succeed and are dropped, and
// whose reads wait until it is closed: the socket taken out of a
// benchmark.
type discardConn struct {
	closed chan struct{}
	once   sync.Once
}

func newDiscardConn() *discardConn { return &discardConn{closed: make(chan struct{})} }

func (c *discardConn) Read([]byte) (int, error) {
	<-c.closed
	return 0, net.ErrClosed
}

func (c *discardConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
		return len(p), nil
	}
}

func (c *discardConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

var benchAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9400}

func (c *discardConn) LocalAddr() net.Addr              { return benchAddr }
func (c *discardConn) RemoteAddr() net.Addr             { return benchAddr }
func (c *discardConn) SetDeadline(time.Time) error      { return nil }
func (c *discardConn) SetReadDeadline(time.Time) error  { return nil }
func (c *discardConn) SetWriteDeadline(time.Time) error { return nil }

// repeatReader reads data over and over, without end.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

// benchServerConn is a connection of a server with default limits, as
// Server.startConn makes one, over nc and serving with h; nothing runs on
// it until the benchmark calls its methods.
func benchServerConn(b *testing.B, nc net.Conn, h Handler) *serverConn {
	s := NewServer(ServerConfig{}, h)
	b.Cleanup(func() { s.Close() })
	c := &serverConn{s: s, nc: nc, sem: make(chan struct{}, s.cfg.MaxInFlight), waitSem: make(chan struct{}, s.cfg.MaxWaiting),
		mem: newMemory(s.cfg.ConnMemoryBytes, 0)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	b.Cleanup(c.cancel)
	return c
}

// benchHandler answers every request at once with reply. It keeps nothing
// of a request's body, and says so as the node's handler does of produce
// requests (ReusesBody, for a server that reuses such bodies).
type benchHandler struct{ reply Reply }

func (h benchHandler) Handle(context.Context, *Request) Reply { return h.reply }

func (benchHandler) ReusesBody(api API) bool { return api == APIProduce }

// feedConn is a connection that reads frame over and over, frames times in
// all, then waits until it is closed; what is written to it is dropped,
// its frames counted, and answered is closed once there were frames of
// them.
type feedConn struct {
	*discardConn
	feed     repeatReader
	left     int // bytes still to read
	mu       sync.Mutex
	counter  frameCounter
	want     int
	answered chan struct{}
}

func newFeedConn(frame []byte, frames int) *feedConn {
	return &feedConn{discardConn: newDiscardConn(), feed: repeatReader{data: frame}, left: frames * len(frame),
		want: frames, answered: make(chan struct{})}
}

func (c *feedConn) Read(p []byte) (int, error) {
	if c.left == 0 {
		return c.discardConn.Read(p)
	}
	n, _ := c.feed.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, nil
}

func (c *feedConn) Write(p []byte) (int, error) {
	n, err := c.discardConn.Write(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.counter.frames
	c.counter.write(p[:n])
	if before < c.want && c.counter.frames >= c.want {
		close(c.answered)
	}
	return n, err
}

// frameCounter counts the frames of a stream of length-prefixed frames
// written to it in pieces of any size.
type frameCounter struct {
	frames int
	head   [4]byte
	inHead int // bytes of the next length prefix seen
	left   int // bytes of the current frame still to come
}

func (fc *frameCounter) write(p []byte) {
	for len(p) > 0 {
		if fc.left > 0 {
			k := min(fc.left, len(p))
			fc.left, p = fc.left-k, p[k:]
			if fc.left == 0 {
				fc.frames++
			}
			continue
		}
		k := copy(fc.head[fc.inHead:], p)
		fc.inHead, p = fc.inHead+k, p[k:]
		if fc.inHead == len(fc.head) {
			fc.inHead, fc.left = 0, int(binary.BigEndian.Uint32(fc.head[:]))
			if fc.left == 0 {
				fc.frames++
			}
		}
	}
}

// BenchmarkServerRequest is one produce request's whole life on a server
// connection, as a pipelining producer sends them, without the socket: its
// frame read (the header, the body's charge to the connection's and the
// server's memory, the body read into a buffer), handed to a handler that
// answers at once, its Reply run on a goroutine of its own, its
// acknowledgement built, written with those ready at the same time, and
// accounted for (the body's and the frame's buffers given back to the
// server, or left to the collector).
func BenchmarkServerRequest(b *testing.B) {
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			frame := requestFrame(APIProduce, 1, &ProduceRequest{Topic: "orders", Partition: 0, TimeoutMs: 30000, Batch: benchBatch(b, n)})
			ack := &ProduceResponse{Partition: 0, BaseOffset: 1 << 20, NextOffset: 1<<20 + int64(n), LeaderID: 1, LeaderEpoch: 3,
				AppendTime: time.Now().UnixMilli(), Replicas: []int32{1, 2, 3}}
			s := NewServer(ServerConfig{}, benchHandler{Immediate(ack, nil)})
			defer s.Close()
			nc := newFeedConn(frame, b.N)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			s.startConn(nc, "", func() {})
			<-nc.answered
			b.StopTimer()
		})
	}
}

// BenchmarkServerRespond is serverConn.respond of one response, alone on
// its connection: the frame built, charged, written (to a connection that
// drops it) and accounted for. A produce's acknowledgement, and a fetch's
// batches: copied into the frame below 64 KiB, written from where they
// lie from there on.
func BenchmarkServerRespond(b *testing.B) {
	bench := func(b *testing.B, api API, m Message, bytes int) {
		c := benchServerConn(b, newDiscardConn(), HandlerFunc(func(context.Context, *Request) Reply { return nil }))
		req := &Request{Frame: Frame{API: uint16(api), Version: Version1, CorrelationID: 1}}
		log := hclog.NewNullLogger()
		if bytes > 0 {
			b.SetBytes(int64(bytes))
		}
		b.ReportAllocs()
		for b.Loop() {
			c.sem <- struct{}{} // as serve does; written frees it
			c.inFlight.Add(1)
			c.respond(req, m, nil, log)
		}
	}
	b.Run("produce", func(b *testing.B) {
		bench(b, APIProduce, &ProduceResponse{Partition: 0, BaseOffset: 1 << 20, NextOffset: 1<<20 + 16, LeaderID: 1, LeaderEpoch: 3,
			AppendTime: time.Now().UnixMilli(), Replicas: []int32{1, 2, 3}}, 0)
	})
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("fetch/records=%d", n), func(b *testing.B) {
			batch := benchBatch(b, n)
			bench(b, APIFetch, &FetchResponse{HighWatermark: 1 << 20, Batches: batch}, len(batch))
		})
	}
}

// benchClientConn is a client connection, as Dial makes one, over a
// connection that drops what is written to it.
func benchClientConn(b *testing.B) *Conn {
	c := &Conn{nc: newDiscardConn(), addr: benchAddr.String(), cfg: ConnConfig{MaxFrameBytes: FrameLimit(MaxBatchBytesCeiling)},
		done: make(chan struct{}), callTimeout: DefaultCallTimeout, wsem: make(chan struct{}, 1)}
	c.mu.pending = make(map[uint32]*Pending)
	go c.readLoop()
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkClientSendNotify is Conn.SendNotify of one request, alone on
// its connection: the frame built, the call registered, the frame written
// (to a connection that drops it); the call is then canceled. A client's
// produce, and a leader's Replicate to a follower, which carries the
// batches as the leader stored them.
func BenchmarkClientSendNotify(b *testing.B) {
	bench := func(b *testing.B, api API, m Message, bytes int) {
		c := benchClientConn(b)
		ctx := context.Background()
		b.SetBytes(int64(bytes))
		b.ReportAllocs()
		for b.Loop() {
			p, err := c.SendNotify(ctx, api, m, nil)
			if err != nil {
				b.Fatal(err)
			}
			p.Cancel()
		}
	}
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("produce/records=%d", n), func(b *testing.B) {
			batch := benchBatch(b, n)
			bench(b, APIProduce, &ProduceRequest{Topic: "orders", Partition: 0, TimeoutMs: 30000, Batch: batch}, len(batch))
		})
	}
	for _, n := range benchRecordCounts {
		b.Run(fmt.Sprintf("replicate/records=%d", n), func(b *testing.B) {
			batch := benchBatch(b, n)
			bench(b, APIReplicate, &ReplicateRequest{Topic: "orders", Partition: 0, LeaderEpoch: 3, LeaderID: 1, HighWatermark: 1 << 20,
				Batches: [][]byte{batch}}, len(batch))
		})
	}
}

// BenchmarkClientCallFetch is a Call of a fetch whose answer carries 1 MiB
// of batches (the server's is built once), read into new memory, as a
// Consumer's poll does by default, or into the memory of the call before
// (Into, a Consumer's ReuseMemory). B/op is what reading a response costs
// the client, and the allocation the collector then frees.
func BenchmarkClientCallFetch(b *testing.B) {
	batches := make([]byte, 1<<20)
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		return Immediate(&FetchResponse{HighWatermark: 1, Batches: batches}, nil)
	})
	_, addr := startServer(b, ServerConfig{}, h)
	c := dial(b, addr)
	for _, into := range []bool{false, true} {
		b.Run(fmt.Sprintf("into=%v", into), func(b *testing.B) {
			ctx := context.Background()
			var buf []byte
			b.SetBytes(int64(len(batches)))
			b.ReportAllocs()
			for b.Loop() {
				var resp FetchResponse
				var m Message = &resp
				if into {
					m = &Into{Resp: &resp, Buf: &buf}
				}
				if err := c.Call(ctx, APIFetch, &FetchRequest{Topic: "orders", MaxBytes: 1 << 20}, m); err != nil || len(resp.Batches) != len(batches) {
					b.Fatalf("fetch: %d bytes, %v", len(resp.Batches), err)
				}
			}
		})
	}
}
