package client

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"gostream/record"
	"gostream/transport"
)

// ConsumerConfig configures a Consumer. Zero values take the defaults named.
type ConsumerConfig struct {
	// MaxBytes is about how many bytes of batches one fetch returns; a
	// batch larger than it still comes whole. Default 1 MiB.
	MaxBytes int
	// Group is the durable progress identity of the consumer: the group
	// whose committed offset of the partition Commit sets and Committed
	// and SeekToCommitted read. Empty: none, and those fail.
	Group string
	// ReuseMemory makes every Poll read its fetch into the memory of the
	// Poll before and return its records in the same slice: the records a
	// Poll returned, with their keys, values and headers, are valid only
	// until the next Poll, which overwrites them. It is for a consumer
	// that is done with each Poll's records before it polls again, and
	// spares it a new buffer of about MaxBytes a fetch (allocated, zeroed
	// and collected). Default false: records stay valid for good.
	ReuseMemory bool
}

// Consumer reads one partition from its leader, from a position it keeps.
// Poll, SeekTo, SeekToBeginning and SeekToEnd are for one goroutine at a
// time; Position and HighWatermark may be read from any goroutine. A
// Consumer starts at offset 0 and owns no goroutine or connection.
type Consumer struct {
	c         *Client
	topic     string
	partition int32
	cfg       ConsumerConfig
	position  atomic.Int64
	hw        atomic.Int64
	topicID   string // the incarnation read (see pinTopic); owned by Poll
	// With ReuseMemory, the memory of the last fetch and its records,
	// owned by Poll.
	buf  []byte
	recs []record.Record
}

// NewConsumer returns a Consumer of partition partition of topic that
// fetches through c. It returns ErrInvalidConfig for a negative partition
// or MaxBytes beyond what a request can ask for.
func NewConsumer(c *Client, topic string, partition int32, cfg ConsumerConfig) (*Consumer, error) {
	if partition < 0 {
		return nil, fmt.Errorf("%w: partition %d", ErrInvalidConfig, partition)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxBytes > math.MaxInt32 {
		return nil, fmt.Errorf("%w: MaxBytes %d", ErrInvalidConfig, cfg.MaxBytes)
	}
	cons := &Consumer{c: c, topic: topic, partition: partition, cfg: cfg}
	cons.hw.Store(-1)
	return cons, nil
}

// Position is the offset of the next record Poll returns.
func (c *Consumer) Position() int64 { return c.position.Load() }

// HighWatermark is the highest high watermark the partition's leader
// reported, or -1 before any answer. It never goes back: a leader that
// has just restarted, or just taken over, reports the HW it checkpointed,
// which may lag the one it reported before.
func (c *Consumer) HighWatermark() int64 { return c.hw.Load() }

func (c *Consumer) noteHW(hw int64) {
	for {
		cur := c.hw.Load()
		if hw <= cur || c.hw.CompareAndSwap(cur, hw) {
			return
		}
	}
}

// SeekTo moves the position to offset, and nothing else: it commits
// nothing. Poll returns an error matching transport.ErrOffsetOutOfRange
// if the offset is below the partition's log start; past the high
// watermark, even past the log end, polls wait for records to reach it
// and come back empty until then. (It is not called Seek, which go vet
// reserves for io.Seeker's signature.)
func (c *Consumer) SeekTo(offset int64) { c.position.Store(offset) }

// SeekToBeginning moves the position to the partition's log start offset.
func (c *Consumer) SeekToBeginning(ctx context.Context) error {
	offs, err := c.c.ListOffsets(ctx, c.topic, c.partition)
	if err != nil {
		return err
	}
	c.noteHW(offs.HighWatermark)
	c.position.Store(offs.LogStartOffset)
	return nil
}

// SeekToEnd moves the position to the partition's high watermark, so that
// Poll returns only records appended from now on.
func (c *Consumer) SeekToEnd(ctx context.Context) error {
	offs, err := c.c.ListOffsets(ctx, c.topic, c.partition)
	if err != nil {
		return err
	}
	c.noteHW(offs.HighWatermark)
	c.position.Store(c.hw.Load())
	return nil
}

// pollMargin is how long before the caller's deadline a long-poll asks the
// broker to answer, so that the answer, even empty, arrives in time.
const pollMargin = 100 * time.Millisecond

// Poll returns the records from the position on, waiting up to maxWait for
// some when there are none below the high watermark (nil and no error when
// the wait ends empty), and moves the position past them. It follows the
// partition's leader across leader changes. Every batch is verified: when
// one fails, Poll returns the records before it, and the next Poll returns
// an error matching ErrCorruptBatch with the position left on it. A
// position below the log start gives an error matching
// transport.ErrOffsetOutOfRange.
func (c *Consumer) Poll(ctx context.Context, maxWait time.Duration) ([]record.Record, error) {
	pos := c.position.Load()
	deadline := time.Now().Add(maxWait)
	var resp transport.FetchResponse
	err := c.c.withLeader(ctx, c.topic, c.partition, func(ctx context.Context, r route) error {
		var wait time.Duration
		if maxWait > 0 {
			// A retry after a leader change waits only what is left.
			wait = max(time.Until(deadline), time.Millisecond)
			// The broker answers, empty, before the caller gives up: a
			// call that times out on a silent connection closes it.
			if d, ok := ctx.Deadline(); ok && time.Until(d)-pollMargin < wait {
				wait = max(time.Until(d)-pollMargin, time.Millisecond)
			}
		}
		if err := pinTopic(&c.topicID, c.topic, r); err != nil {
			return err
		}
		req := &transport.FetchRequest{
			Topic:     c.topic,
			TopicID:   c.topicID,
			Partition: c.partition,
			Offset:    pos,
			MaxBytes:  int32(c.cfg.MaxBytes),
			MaxWaitMs: int32(min(wait.Milliseconds(), math.MaxInt32)),
		}
		resp = transport.FetchResponse{}
		var into transport.Message = &resp
		if c.cfg.ReuseMemory {
			into = &transport.Into{Resp: &resp, Buf: &c.buf}
		}
		return c.c.call(ctx, r.addr, wait, transport.APIFetch, req, into)
	})
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at offset %d: %w", c.topic, c.partition, pos, err)
	}
	c.noteHW(resp.HighWatermark)
	var out []record.Record
	if c.cfg.ReuseMemory {
		out = c.recs[:0]
	}
	recs, next, err := decodeFetched(resp.Batches, pos, out)
	if c.cfg.ReuseMemory {
		c.recs = recs[:0]
	}
	if len(recs) > 0 {
		c.position.Store(next)
		return recs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%d at offset %d: %w", ErrCorruptBatch, c.topic, c.partition, pos, err)
	}
	return nil, nil
}

// decodeFetched verifies and decodes the batches in buf and appends to out
// the records from pos on, returning them and the offset after the last
// one. It stops at the first batch that fails verification, returning
// what came before it and the error.
func decodeFetched(buf []byte, pos int64, out []record.Record) ([]record.Record, int64, error) {
	next, prevEnd := pos, int64(-1)
	for len(buf) > 0 {
		b, rest, err := record.Frame(buf, record.MaxBatchSize)
		if err != nil {
			return out, next, fmt.Errorf("batch after offset %d: %w", max(prevEnd, pos), err)
		}
		if prevEnd >= 0 && b.BaseOffset() < prevEnd {
			return out, next, fmt.Errorf("%w: batch at offset %d overlaps the one ending at %d", record.ErrInvalid, b.BaseOffset(), prevEnd)
		}
		// The response buffer belongs to this poll alone (or, with
		// ReuseMemory, until the next), so the records may alias it: no
		// copy per record.
		if out == nil {
			out = make([]record.Record, 0, int(b.RecordCount())*max(1, len(buf)/len(b)))
		}
		mark := len(out)
		err = b.Records(func(r *record.Record) bool {
			if r.Offset >= next {
				out = append(out, *r)
			}
			return true
		})
		if err != nil {
			return out[:mark], next, fmt.Errorf("batch at offset %d: %w", b.BaseOffset(), err)
		}
		next = max(next, b.NextOffset())
		prevEnd = b.NextOffset()
		buf = rest
	}
	return out, next, nil
}

// Reset policies: where a consumer with no committed offset starts.
const (
	ResetEarliest = "earliest" // the partition's log start
	ResetLatest   = "latest"   // its high watermark: only records appended from now on
)

func (c *Consumer) group() (string, error) {
	if c.cfg.Group == "" {
		return "", fmt.Errorf("%w: the consumer of %s/%d has no group: set ConsumerConfig.Group to commit", ErrInvalidConfig, c.topic, c.partition)
	}
	return c.cfg.Group, nil
}

// Commit commits the position as the group's offset of the partition:
// the records before it are processed. Nothing is committed unless asked.
// It fails as Client.CommitOffsets does (below the offset committed:
// transport.ErrOffsetRegression, and nothing is written).
func (c *Consumer) Commit(ctx context.Context) error {
	return c.CommitOffset(ctx, c.Position(), "")
}

// CommitOffset commits offset, with a metadata string, as the group's
// offset of the partition.
func (c *Consumer) CommitOffset(ctx context.Context, offset int64, metadata string) error {
	g, err := c.group()
	if err != nil {
		return err
	}
	return c.c.CommitOffsets(ctx, g, CommitOffset{Topic: c.topic, Partition: c.partition, Offset: offset, Metadata: metadata})
}

// Committed returns the group's committed offset of the partition, and
// false when it was never committed (which is not a committed 0).
func (c *Consumer) Committed(ctx context.Context) (int64, bool, error) {
	g, err := c.group()
	if err != nil {
		return 0, false, err
	}
	o, ok, err := c.c.Committed(ctx, g, c.topic, c.partition)
	return o.Offset, ok, err
}

// SeekToCommitted moves the position to the group's committed offset or,
// when none was ever committed, by reset (ResetEarliest, the default, or
// ResetLatest). It reports whether there was a committed offset. Seeking
// moves the position only: nothing is committed.
func (c *Consumer) SeekToCommitted(ctx context.Context, reset string) (bool, error) {
	off, ok, err := c.Committed(ctx)
	switch {
	case err != nil:
		return false, err
	case ok:
		c.SeekTo(off)
		return true, nil
	case reset == ResetLatest:
		return false, c.SeekToEnd(ctx)
	case reset == "" || reset == ResetEarliest:
		return false, c.SeekToBeginning(ctx)
	}
	return false, fmt.Errorf("%w: reset policy %q (want %s or %s)", ErrInvalidConfig, reset, ResetEarliest, ResetLatest)
}
