package kafkaapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/record"
)

// kerrTransactionsUnsupported answers what needs transactions, which
// gostream does not have.
var kerrTransactionsUnsupported = kerr.InvalidRequest.Code

// fetched is one partition's read.
type fetched struct {
	res broker.FetchResult
	err error
}

// fetch reads each partition from this node's leader replica: at once,
// and when that found less than MinBytes, again, waiting up to MaxWait for
// the first partition to have records. Sessions (KIP-227) are not kept:
// the answer's session id is 0, so clients send full fetches.
func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	type part struct {
		topic string
		req   *kmsg.FetchRequestTopicPartition
		got   fetched
	}
	var parts []*part
	for ti := range req.Topics {
		t := &req.Topics[ti]
		for pi := range t.Partitions {
			parts = append(parts, &part{topic: t.Topic, req: &t.Partitions[pi]})
		}
	}
	read := func(ctx context.Context, p *part, wait time.Duration) fetched {
		max := int(p.req.PartitionMaxBytes)
		if max <= 0 {
			max = 1
		}
		res, err := s.cfg.Core.Fetch(ctx, principalOf(ctx), broker.FetchRequest{Topic: p.topic, Partition: p.req.Partition,
			Offset: p.req.FetchOffset, MaxBytes: max, MaxWait: wait}, nil)
		return fetched{res, err}
	}
	total := 0
	for _, p := range parts {
		p.got = read(ctx, p, 0)
		total += len(p.got.res.Batches)
	}
	if wait := time.Duration(req.MaxWaitMillis) * time.Millisecond; total < int(max(req.MinBytes, 1)) && wait > 0 && len(parts) > 0 {
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range parts {
			if p.got.err != nil || len(p.got.res.Batches) > 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := read(wctx, p, wait)
				if errors.Is(got.err, context.Canceled) {
					return
				}
				mu.Lock()
				release(p.got)
				p.got = got
				mu.Unlock()
				if len(got.res.Batches) > 0 {
					cancel()
				}
			}()
		}
		wg.Wait()
		cancel()
	}
	budget := int(req.MaxBytes)
	if budget <= 0 {
		budget = 1 << 30
	}
	byTopic := map[string]int{}
	for _, p := range parts {
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(resp.Topics)
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			resp.Topics[i].Topic = p.topic
			byTopic[p.topic] = i
		}
		rt := &resp.Topics[i]
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = p.req.Partition
		rp.RecordBatches = []byte{} // empty, not null: librdkafka refuses a null record set
		if p.got.err != nil {
			rp.ErrorCode = s.code(p.got.err)
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		} else {
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p.got.res.HighWatermark, p.got.res.HighWatermark, p.got.res.LogStartOffset
			// The request's MaxBytes bounds the answer, but for its first
			// batch, which goes whole.
			if budget > 0 {
				kb, err := s.servedBatches(p.got.res)
				if err != nil {
					rp.ErrorCode = s.code(err)
				} else if kb != nil {
					rp.RecordBatches = kb
					budget -= len(kb)
				}
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	// The answer may hold the reads' buffers (servedBatches): they go
	// back once it is written.
	return &pooledResponse{Response: resp, release: func() {
		for _, p := range parts {
			release(p.got)
		}
	}}, nil
}

// pooledResponse is an answer that holds buffers to give back once it is
// written (or dropped).
type pooledResponse struct {
	kmsg.Response
	release func()
}

// done gives resp's buffers back, if it holds any.
func done(resp kmsg.Response) {
	if p, ok := resp.(*pooledResponse); ok && p.release != nil {
		p.release()
		p.release = nil
	}
}

// servedBatches are the Kafka batches of a read: when every batch read is
// of magic 2 and the read's buffer is its own, the Kafka batches are
// moved together in place, over the headers of ours (storage checked
// every batch's checksum on the read); otherwise they are copied, magic 1
// converted.
func (s *Server) servedBatches(res broker.FetchResult) ([]byte, error) {
	b := res.Batches
	if !res.Owned {
		return kafkaBatches(b)
	}
	for off := 0; off < len(b); {
		n, err := record.FrameSize(b[off:], len(b)-off)
		if err != nil || b[off+20] != record.MagicKafka {
			return kafkaBatches(b)
		}
		off += n
	}
	w := 0
	for off := 0; off < len(b); {
		n, _ := record.FrameSize(b[off:], len(b)-off)
		w += copy(b[w:], b[off+record.HeaderSize:off+n])
		off += n
	}
	return b[:w], nil
}

// release gives a read's buffer back.
func release(f fetched) {
	if f.res.Release != nil {
		f.res.Release()
	}
}

// kafkaBatches serves our batches to Kafka: the Kafka batches they carry,
// and batches of magic 1 converted.
func kafkaBatches(batches []byte) ([]byte, error) {
	// A magic-2 batch is served without its 34-byte header, so the
	// Kafka batches of the common case fit in as many bytes.
	out := make([]byte, 0, len(batches))
	var convErr error
	err := record.Batches(batches, func(b record.Batch) bool {
		out, convErr = b.AppendKafka(out)
		return convErr == nil
	})
	if err == nil {
		err = convErr
	}
	return out, err
}
