package kafkaapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/internal/bufpool"
	"gostream/record"
	"gostream/transport"
)

var errUnknownTopicID = fmt.Errorf("%w: topics are named, not looked up by id, here", transport.ErrUnknownTopicID)

// produce appends each partition's batch on this node's leader replica
// now, in the order the request lists them, and returns the answer to
// come: each partition's outcome once every active replica holds its
// batch durably, whatever acks asked for (acks=1 gets the guarantee of
// acks=all); acks=0 gets no answer.
func (s *Server) produce(ctx context.Context, req *kmsg.ProduceRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.TransactionID != nil {
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerrTransactionsUnsupported
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return func(context.Context) (response, error) { return kresp(resp), nil }, nil
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	type waiting struct {
		rp   *kmsg.ProduceResponseTopicPartition
		wait func(context.Context) (broker.ProduceResult, error)
	}
	var waits []waiting
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for i, p := range t.Partitions {
			rp := &rt.Partitions[i]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			b, ref, err := s.batch(p.Records)
			if err != nil {
				rp.ErrorCode = s.code(err)
				continue
			}
			// The batch is written to the leader's log before Produce
			// returns; the followers' queues hold it until it is sent.
			wait, err := s.cfg.Core.Produce(principalOf(ctx), broker.ProduceRequest{Topic: t.Topic, Partition: p.Partition, Batch: b, Timeout: timeout, Hold: ref.Hold})
			ref.Drop()
			if err != nil {
				rp.ErrorCode = s.code(err)
				continue
			}
			waits = append(waits, waiting{rp, wait})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	collect := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, w := range waits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := w.wait(ctx)
				if err != nil {
					w.rp.ErrorCode = s.code(err)
					return
				}
				w.rp.BaseOffset = res.BaseOffset
			}()
		}
		wg.Wait()
	}
	if req.Acks == 0 {
		// Appended; nobody is told. The waits still run, for the
		// metrics and the high watermark.
		go collect(context.WithoutCancel(ctx))
		return func(context.Context) (response, error) { return nil, nil }, nil
	}
	return func(ctx context.Context) (response, error) {
		collect(ctx)
		return kresp(resp), nil
	}, nil
}

// batch is the one Kafka record batch of a partition's records, wrapped
// for the log in a pooled buffer, which ref holds: its caller drops ref
// once done with the batch, and hands ref.Hold to whatever keeps it
// longer.
func (s *Server) batch(records []byte) (b record.Batch, ref *bufpool.Ref, err error) {
	if len(records) < 12 {
		return nil, nil, fmt.Errorf("%w: no record batch", transport.ErrInvalidBatch)
	}
	n := int(uint32(records[8])<<24|uint32(records[9])<<16|uint32(records[10])<<8|uint32(records[11])) + 12
	if n != len(records) {
		return nil, nil, fmt.Errorf("%w: a produce carries exactly one record batch per partition", transport.ErrInvalidBatch)
	}
	buf := bufpool.Get(record.HeaderSize + len(records))
	if b, err = record.WrapKafkaInto(buf, records); err != nil {
		bufpool.Put(buf)
		return nil, nil, fmt.Errorf("%w: %v", transport.ErrInvalidBatch, err)
	}
	return b, bufpool.NewRef(buf), nil
}
