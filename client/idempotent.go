package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"gostream/record"
	"gostream/transport"
)

// The idempotent producer (ProducerConfig.Idempotent; the package
// documentation, "Producing: idempotence", says what it promises).

// maxIdempotentInFlight bounds MaxInFlightPerPartition of an idempotent
// producer: a leader remembers a producer's last five batches, and a
// batch sent again is found to be a duplicate only among them.
const maxIdempotentInFlight = 5

// producerIDAttemptTimeout bounds one InitProducerID request: a node
// answers from the block of ids it holds, or after asking the active
// controller for a new block.
const producerIDAttemptTimeout = 5 * time.Second

// producerID is what an idempotent producer's batches carry besides their
// sequence.
type producerID struct {
	id    int64
	epoch int16
}

// newProducerID asks the cluster for a producer id, retrying while no
// broker gives one, as every call retries (until ctx's deadline or
// RetryTimeout). A cluster whose nodes do not serve InitProducerID is an
// error matching transport.ErrUnsupportedVersion.
func (c *Client) newProducerID(ctx context.Context) (producerID, error) {
	r := newRetrier(ctx, c.retryPolicy())
	for {
		id, err := c.producerIDOnce(ctx)
		if err == nil || !retryOn(ctx, err, retriable) {
			return id, err
		}
		c.log.Debug("no producer id yet; retrying", "err", err)
		if gaveUp := r.again(ctx, err); gaveUp != nil {
			return producerID{}, gaveUp
		}
	}
}

// producerIDOnce asks the brokers in turn for a producer id, once each,
// until one gives it. Any broker answers; asking again costs an id, no
// more.
func (c *Client) producerIDOnce(ctx context.Context) (producerID, error) {
	if c.closed() {
		return producerID{}, ErrClosed
	}
	var errs []error
	for _, addr := range c.candidates() {
		var resp transport.InitProducerIDResponse
		actx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, producerIDAttemptTimeout))
		err := c.pool.Call(actx, addr, transport.APIInitProducerID, &transport.InitProducerIDRequest{}, &resp)
		cancel()
		switch {
		case err == nil:
			return producerID{id: resp.ProducerID, epoch: resp.Epoch}, nil
		case errors.Is(err, transport.ErrUnsupportedVersion):
			return producerID{}, fmt.Errorf("producer id: the node at %s hands out none (it is older than the client), so there is no idempotent producer on this cluster: %w", addr, err)
		case !retriable(err) && !isContextErr(err):
			return producerID{}, fmt.Errorf("producer id: %w", err) // refused (Unauthorized, say): every broker answers alike
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return producerID{}, fmt.Errorf("producer id: %w: no broker known", transport.ErrBrokerNotAvailable)
	}
	return producerID{}, fmt.Errorf("producer id: no broker gave one: %w", errors.Join(errs...))
}

// nextSequence is the sequence after n records from s, wrapping past
// 2^31-1 to 0 as the leader counts (package producers).
func nextSequence(s int32, n int) int32 {
	return int32((int64(s) + int64(n)) % (math.MaxInt32 + 1))
}

// classify is the package's classify, with the refusals of an idempotent
// producer's batch: OutOfOrderSequence (the leader checked the sequence
// before the append: not appended) and InvalidProducerEpoch (fenced).
func (pp *partitionProducer) classify(err error) outcome {
	if pp.p.cfg.Idempotent {
		switch {
		case errors.Is(err, transport.ErrOutOfOrderSequence):
			return outOfOrder
		case errors.Is(err, transport.ErrInvalidProducerEpoch):
			return rejected
		}
	}
	return classify(err)
}

// encode builds b, an idempotent producer's batch about to be sent for the
// first time: a Kafka record batch with the producer id, its epoch and
// the partition's next sequence, whose records read as the leader's
// append time (as records of magic 1 do). Its bytes do not change after.
// When a new producer id is due, it asks for one first; nothing is sent
// when that fails (the error matches transport.ErrNotSent, or is
// ErrClosed).
func (pp *partitionProducer) encode(ctx context.Context, b *batch) error {
	if pp.newPID {
		id, err := pp.p.c.producerIDOnce(ctx)
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err != nil {
			return fmt.Errorf("%w: %w", transport.ErrNotSent, err)
		}
		pp.log.Info("continuing with a new producer id after a gap in the sequence", "producer_id", id.id, "old_producer_id", pp.pid.id)
		pp.pid, pp.sequence, pp.newPID = id, 0, false
	}
	recs := make([]record.Record, len(b.records))
	size := record.HeaderSize + record.KafkaHeaderSize
	for i := range b.records {
		recs[i] = b.records[i].rec
		size += b.records[i].size
	}
	kb, err := record.AppendKafkaBatch(make([]byte, 0, size), recs, record.KafkaBatchOptions{
		ProducerID: pp.pid.id, ProducerEpoch: pp.pid.epoch, BaseSequence: pp.sequence, LogAppendTime: true})
	if err == nil {
		b.data, err = record.WrapKafka(kb)
	}
	if err != nil {
		// enqueue bounds every record, and a batch is never empty.
		panic(fmt.Sprintf("client: encode idempotent batch of %d records, %d bytes: %v", len(recs), size, err))
	}
	b.producer = pp.pid
	pp.sequence = nextSequence(pp.sequence, len(recs))
	return nil
}

// settleIdempotent decides, for an idempotent producer once every batch
// in flight is answered, which of them to send again, in their order: a
// batch that may have been appended (the leader answers a duplicate with
// the original's offsets, and refuses out of sequence a batch that would
// follow a later one), one that provably was not appended and that no
// appended batch follows, and one refused out of sequence after a batch
// that is sent again. A batch refused out of sequence with nothing before
// it to explain the gap, that never may have been appended, is sent again
// under a new producer id, and so is every such batch after it. See the
// package documentation.
func (pp *partitionProducer) settleIdempotent() {
	lastAppended := -1
	for i, b := range pp.inflight {
		if b.outcome == appended {
			lastAppended = i
		}
	}
	first := -1    // the first batch to send again
	fresh := false // a batch before, in this run, takes a new producer id
	for i, b := range pp.inflight {
		again := false
		switch {
		case b.outcome == appended, b.outcome == rejected:
		case fresh:
			if b.maybeAppended {
				b.gaveUp = " (not sent again: a batch before it was refused out of sequence, and an earlier attempt of this one may have appended it)"
			} else {
				again = pp.mayRetry(b)
				b.data = nil // never appended: it takes the new producer id's next sequence
			}
		case i < lastAppended && !b.maybeAppended:
			// Provably not appended, and a batch after it was: sent
			// again it would follow that one.
			b.gaveUp = " (not sent again: a batch sent after it was appended)"
		case b.outcome == unknown, b.outcome == notAppended:
			again = pp.mayRetry(b)
		case b.outcome == outOfOrder && first >= 0:
			again = pp.mayRetry(b) // the gap is a batch before it, sent again first
		case b.outcome == outOfOrder && b.maybeAppended:
			b.gaveUp = " (not sent again: the leader has a gap in the producer's sequence before it, and an earlier attempt of this one may have appended it)"
		case b.outcome == outOfOrder && pp.mayRetry(b):
			// The leader's sequence of this producer id is not ours (a
			// batch before it was given up): the batch was never
			// appended, so it starts a new producer id.
			b.data, pp.newPID, fresh, again = nil, true, true, true
		}
		if again {
			if first < 0 {
				first = i
			}
			continue
		}
		b.final = true
		pp.noteGaveUp(b)
	}
	end := len(pp.inflight)
	if first >= 0 {
		end = first
	}
	for _, b := range pp.inflight[:end] {
		pp.finish(b, b.gaveUp)
	}
	if first < 0 {
		pp.inflight = nil
		pp.draining = false
		return
	}
	pp.sendAgain(first)
}
