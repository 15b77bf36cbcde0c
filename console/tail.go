package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"gostream/client"
	"gostream/metadata"
	"gostream/record"
	"gostream/transport"
)

// Bounds of a live tail (docs/console.md, "Live tail").
const (
	// maxTails is how many tails a node serves at once.
	maxTails = 32
	// tailMaxPartitions is how many partitions one tail follows: a topic
	// of more needs partition.
	tailMaxPartitions = 64
	// tailPoll is the long poll of each partition's consumer.
	tailPoll = time.Second
	// tailFetchBytes bounds what a tail's fetches ask for, together: each
	// of its n partitions' fetches asks for 1/n of it.
	tailFetchBytes = 256 << 10
	// tailWriteTimeout is how long a browser has to take each write.
	tailWriteTimeout = 5 * time.Second
	// tailPing is how often a tail says it is alive when no record comes.
	tailPing = 15 * time.Second
)

// The events of a live tail: a record (a Message), a ping (a Ping), and
// an error (the API's error body) before the stream ends.
const (
	EventRecord = "record"
	EventPing   = "ping"
	EventError  = "error"
)

// Ping is the data of a ping event.
type Ping struct {
	// Time is the node's clock, Unix milliseconds.
	Time int64 `json:"time"`
}

// errBroken is what a tail's writes return once one has failed: the
// browser took too long or is gone.
var errBroken = errors.New("console: the tail's stream is broken")

func (s *Server) tail(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := s.allowed(r, metadata.OpRead, metadata.ResourceTopic, topic); err != nil {
		writeErr(w, err)
		return
	}
	partition, err := parseOptionalID(r.URL.RawQuery, "partition")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if !s.beginTail() {
		writeError(w, http.StatusTooManyRequests, "TooManyTails", fmt.Sprintf("too many live tails on this node (%d)", maxTails))
		return
	}
	defer s.tails.Add(-1)
	c := s.client(w, r)
	if c == nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The node stopping ends the tail (Shutdown).
	defer context.AfterFunc(s.stopping, cancel)()
	consumers, err := startTail(ctx, c, topic, partition)
	if err != nil {
		writeErr(w, err)
		return
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	tw := &tailWriter{w: w, rc: rc, drops: s.tailDrops}
	w.WriteHeader(http.StatusOK)
	if tw.flush() != nil {
		return
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, tp := range consumers {
		g.Go(func() error { return follow(gctx, tp, tw) })
	}
	ping := time.NewTicker(tailPing)
	defer ping.Stop()
	for gctx.Err() == nil {
		select {
		case <-gctx.Done():
		case now := <-ping.C:
			if tw.event(EventPing, Ping{Time: now.UnixMilli()}) != nil {
				cancel()
			}
		}
	}
	err = g.Wait()
	switch {
	case tw.isBroken(), r.Context().Err() != nil:
		// Nobody reads what would be written.
	case s.stopping.Err() != nil:
		tw.event(EventError, apiError{Error: "the node is stopping: start the tail again, on another node or once it is back", Code: "Unavailable"})
	case err != nil:
		status, code := statusOf(err)
		s.log.Debug("live tail ended", "topic", topic, "status", status, "err", err)
		tw.event(EventError, apiError{Error: err.Error(), Code: code})
	}
}

// beginTail takes one of the node's maxTails tails, if one is free.
func (s *Server) beginTail() bool {
	if s.tails.Add(1) > maxTails {
		s.tails.Add(-1)
		return false
	}
	return true
}

// tailed is one partition a tail follows, and its consumer.
type tailed struct {
	partition int32
	cons      *client.Consumer
}

// startTail makes the consumers of a tail of topic (of one partition, or
// of every one when partition is -1), each at its partition's high
// watermark now.
func startTail(ctx context.Context, c *client.Client, topic string, partition int32) ([]tailed, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	t, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if partition < 0 && len(t.Partitions) > tailMaxPartitions {
		return nil, fmt.Errorf("%w: topic %s has %d partitions; a tail follows at most %d: give partition",
			transport.ErrInvalidRequest, topic, len(t.Partitions), tailMaxPartitions)
	}
	parts, err := partitionsOf(t, partition, nil)
	if err != nil {
		return nil, err
	}
	out := make([]tailed, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listConcurrency)
	for i, p := range parts {
		g.Go(func() error {
			cons, err := client.NewConsumer(c, topic, p, client.ConsumerConfig{MaxBytes: tailFetchBytes / len(parts)})
			if err != nil {
				return err
			}
			out[i] = tailed{partition: p, cons: cons}
			return cons.SeekToEnd(gctx)
		})
	}
	return out, g.Wait()
}

// follow writes the records of one partition as they come until ctx
// ends, the stream breaks or a fetch fails. It fetches again only once
// the last fetch's records are written: nothing waits for the browser
// but them.
func follow(ctx context.Context, tp tailed, tw *tailWriter) error {
	for ctx.Err() == nil {
		recs, err := tp.cons.Poll(ctx, tailPoll)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			if err := tw.records(recs, tp.partition); err != nil {
				return err
			}
		}
	}
	return nil
}

// tailWriter writes a tail's events, one write at a time, each with its
// deadline: a browser that does not take the bytes in time, or is gone,
// breaks the stream, and every later write fails with errBroken.
type tailWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	drops prometheus.Counter

	mu struct {
		sync.Mutex
		buf    []byte // the events being written
		broken bool
	}
}

// records writes a record event for each of recs, of partition p, at
// once.
func (tw *tailWriter) records(recs []record.Record, p int32) error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.mu.broken {
		return errBroken
	}
	buf := tw.mu.buf[:0]
	for i := range recs {
		buf = appendEvent(buf, EventRecord, messageOf(p, &recs[i]))
	}
	tw.mu.buf = buf
	return tw.writeLocked()
}

// event writes one event.
func (tw *tailWriter) event(name string, data any) error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.mu.broken {
		return errBroken
	}
	tw.mu.buf = appendEvent(tw.mu.buf[:0], name, data)
	return tw.writeLocked()
}

// flush sends what was written (the header, at the start).
func (tw *tailWriter) flush() error {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.writeLocked()
}

// writeLocked writes buf and flushes it within tailWriteTimeout. A
// browser that did not take it in time is counted as dropped.
func (tw *tailWriter) writeLocked() error {
	tw.rc.SetWriteDeadline(time.Now().Add(tailWriteTimeout))
	_, err := tw.w.Write(tw.mu.buf)
	if err == nil {
		err = tw.rc.Flush()
	}
	if cap(tw.mu.buf) > tailFetchBytes {
		// A large fetch's encoding is not kept for the next, smaller ones.
		tw.mu.buf = nil
	}
	if err != nil {
		tw.mu.broken = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			tw.drops.Inc()
		}
		return errBroken
	}
	return nil
}

func (tw *tailWriter) isBroken() bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.mu.broken
}

// appendEvent appends a server-sent event named name whose data is v as
// JSON, on one line (JSON escapes every line break inside its strings).
func appendEvent(buf []byte, name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic("console: an event's data does not encode: " + err.Error()) // only our own types reach here
	}
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}
