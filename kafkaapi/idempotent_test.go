package kafkaapi_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/record"
)

// lossyProxy forwards Kafka connections to a node, and now and then loses
// the answer to a Produce: it forwards the request, waits for the node to
// have appended and acknowledged it, and closes both connections
// without passing the answer on. The client sees its request fail with
// its outcome unknown, and sends the same batch again.
type lossyProxy struct {
	ln      net.Listener
	target  string
	produce atomic.Int32 // produce requests seen
	lost    atomic.Int32 // answers lost
	every   int32        // lose the answer to every n-th produce
	max     int32        // at most this many
}

// newLossyProxy binds the proxy's address; start serves it.
func newLossyProxy(t *testing.T, every, max int32) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return &lossyProxy{ln: ln, every: every, max: max}
}

// start forwards to target.
func (p *lossyProxy) start(target string) {
	p.target = target
	ln := p.ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
}

func (p *lossyProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var once sync.Once
	closeBoth := func() { once.Do(func() { client.Close(); server.Close() }) }
	// Answers pass frame by frame until one is to be lost: from then on
	// none is passed, and both connections close once the node answered.
	var losing atomic.Bool
	go func() {
		defer closeBoth()
		for {
			frame, err := proxyFrame(server)
			if err != nil || losing.Load() {
				return
			}
			if _, err := client.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := proxyFrame(client)
		if err != nil {
			closeBoth()
			return
		}
		if int16(binary.BigEndian.Uint16(frame[4:])) == kmsg.Produce.Int16() {
			if n := p.produce.Add(1); n%p.every == 0 && p.lost.Load() < p.max {
				p.lost.Add(1)
				losing.Store(true)
			}
		}
		if _, err := server.Write(frame); err != nil {
			closeBoth()
			return
		}
	}
}

// proxyFrame reads one size-prefixed frame, the size included.
func proxyFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// franz-go with its defaults (idempotent) produces through a connection
// that loses answers to Produce requests: each lost answer's batch is
// sent again, found to be a duplicate, and answered with its original
// offsets. Every record is in the partition once, in the order produced.
// With the duplicate check taken out, the retries are refused as out of
// sequence (or appended twice): this test fails.
func TestIdempotentRetriesOfLostAnswersAreDuplicates(t *testing.T) {
	proxy := newLossyProxy(t, 5, 4)
	n := startOneNodeAdvertising(t, map[string]int{"orders": 1}, proxy.ln.Addr().String())
	proxy.start(n.addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxy.ln.Addr().String()), kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(64), kgo.RecordRetries(20))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const total = 300
	var (
		mu    sync.Mutex
		errs  []error
		acked = map[string]int64{}
		wg    sync.WaitGroup
	)
	for i := range total {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: "orders", Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			acked[string(r.Value)] = r.Offset
		})
		if i%10 == 9 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Len(t, acked, total)
	assert.GreaterOrEqual(t, proxy.lost.Load(), int32(2), "answers lost")

	offs, err := n.core.ListOffsets("", "orders", "", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(total), offs.HighWatermark, "every record once")
	res, err := n.core.Fetch(ctx, "", broker.FetchRequest{Topic: "orders", Partition: 0, Offset: 0, MaxBytes: 1 << 20}, nil)
	require.NoError(t, err)
	got := records(t, res.Batches)
	require.Len(t, got, total)
	for i, v := range got {
		assert.Equal(t, strconv.Itoa(i), v, "offset %d", i)
		assert.Equal(t, int64(i), acked[v], "record %s acknowledged at its offset", v)
	}
}

// records are the values of the records of batches, in order.
func records(t *testing.T, batches []byte) []string {
	var out []string
	err := record.Batches(batches, func(b record.Batch) bool {
		require.NoError(t, b.Records(func(r *record.Record) bool {
			out = append(out, string(r.Value))
			return true
		}))
		return true
	})
	require.NoError(t, err)
	return out
}
