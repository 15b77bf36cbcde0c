package kafkaapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/record"
)

// Special timestamps of ListOffsets.
const (
	latest       = -1
	earliest     = -2
	maxTimestamp = -3
)

// listOffsets answers each partition's earliest offset (its log start),
// latest (its high watermark: what a consumer may read), or the first
// offset whose record's timestamp is at or after the one asked, read
// from the log (-1 when there is none below the high watermark).
func (s *Server) listOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.Timestamp = p.Partition, -1, -1
			o, err := s.cfg.Core.ListOffsets(principalOf(ctx), t.Topic, "", p.Partition)
			switch {
			case err != nil:
				rp.ErrorCode, rp.Offset = s.code(err), -1
			case p.Timestamp == earliest:
				rp.Offset = o.LogStartOffset
			case p.Timestamp == latest:
				rp.Offset = o.HighWatermark
			default:
				rp.Offset, rp.Timestamp, err = s.offsetForTime(ctx, t.Topic, p.Partition, o, p.Timestamp)
				if err != nil {
					rp.ErrorCode, rp.Offset = s.code(err), -1
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// offsetForTime reads the partition from its start for the first record
// whose timestamp is at least ts (for maxTimestamp: the record of the
// greatest timestamp), below the high watermark. It returns -1, -1 when
// there is none.
func (s *Server) offsetForTime(ctx context.Context, topic string, partition int32, o broker.Offsets, ts int64) (offset, at int64, err error) {
	offset, at = -1, -1
	best := int64(-1)
	for next := o.LogStartOffset; next < o.HighWatermark; {
		res, err := s.cfg.Core.Fetch(ctx, principalOf(ctx), broker.FetchRequest{Topic: topic, Partition: partition,
			Offset: next, MaxBytes: 1 << 20}, nil)
		if err != nil {
			return -1, -1, err
		}
		if len(res.Batches) == 0 {
			release(fetched{res: res})
			break
		}
		found := false
		err = record.Batches(res.Batches, func(b record.Batch) bool {
			next = b.NextOffset()
			if ts != maxTimestamp && b.MaxTimestamp() < ts {
				return true
			}
			_ = b.Records(func(r *record.Record) bool {
				switch {
				case ts == maxTimestamp:
					if r.Timestamp > best {
						best, offset, at = r.Timestamp, r.Offset, r.Timestamp
					}
				case r.Timestamp >= ts:
					offset, at, found = r.Offset, r.Timestamp, true
					return false
				}
				return true
			})
			return !found
		})
		release(fetched{res: res})
		if err != nil {
			return -1, -1, err
		}
		if found {
			return offset, at, nil
		}
	}
	return offset, at, nil
}
