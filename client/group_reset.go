package client

import (
	"context"
	"fmt"
	"math"
	"time"

	"gostream/transport"
)

// ResetTo names where a reset moves each partition's committed offset:
// ResetEarliest (the partition's log start) or ResetLatest (its high
// watermark), as a consumer's reset policy says them, or one of these.
type ResetTo string

// The places a reset moves to, besides the log start and the high
// watermark.
const (
	// ResetOffset moves to ResetTarget.Offset.
	ResetOffset ResetTo = "offset"
	// ResetShift moves the committed offset by ResetTarget.Offset
	// (negative: back); a partition never committed is left out.
	ResetShift ResetTo = "shift"
	// ResetTime moves to the first batch appended at or after
	// ResetTarget.Time (OffsetForTime).
	ResetTime ResetTo = "time"
)

// ResetTarget says where PlanOffsetReset moves each partition: To, with
// Offset for ResetOffset (0 or more) and ResetShift, Time for ResetTime.
type ResetTarget struct {
	To     ResetTo
	Offset int64
	Time   time.Time
}

// OffsetReset is one partition of a reset's plan.
type OffsetReset struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset now, Never when none was.
	Committed int64
	// New is the offset the reset commits, Never when the partition is
	// left out (a shift of a partition never committed).
	New int64
	// Note says why New is not where the target points (kept at the log
	// start or the high watermark) or why the partition is left out.
	Note string
}

// PlanOffsetReset computes where a reset of group's committed offsets on
// topic would move each partition (partitions, or every partition when
// none is named), and changes nothing: ResetOffsets(ResetMoves(plan))
// writes it. New offsets are kept between each partition's log start and
// its high watermark: an offset or a shift beyond them stops at them,
// however far (a shift saturates, it never wraps around). Errors: a
// topic the cluster does not know is transport.ErrUnknownTopic, a
// partition it does not have transport.ErrUnknownPartition, a target it
// cannot place transport.ErrInvalidRequest or transport.ErrInvalidOffset.
func (c *Client) PlanOffsetReset(ctx context.Context, group, topic string, partitions []int32, target ResetTarget) ([]OffsetReset, error) {
	switch target.To {
	case ResetEarliest, ResetLatest, ResetShift, ResetTime:
	case ResetOffset:
		if target.Offset < 0 {
			return nil, fmt.Errorf("%w: reset to offset %d: want an offset, 0 or more", transport.ErrInvalidOffset, target.Offset)
		}
	default:
		return nil, fmt.Errorf("%w: reset to %q: want earliest, latest, offset, shift or time", transport.ErrInvalidRequest, target.To)
	}
	t, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	chosen := map[int32]bool{}
	for _, p := range partitions {
		if p < 0 || int(p) >= len(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q has partitions 0 to %d, not %d", transport.ErrUnknownPartition, topic, len(t.Partitions)-1, p)
		}
		chosen[p] = true
	}
	committed, err := c.CommittedOffsets(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	old := map[int32]int64{}
	for _, o := range committed {
		old[o.Partition] = o.Offset
	}
	var plan []OffsetReset
	for _, p := range t.Partitions {
		if len(chosen) > 0 && !chosen[p.Partition] {
			continue
		}
		row := OffsetReset{Topic: topic, Partition: p.Partition, Committed: Never, New: Never}
		cur, was := old[p.Partition]
		if was {
			row.Committed = cur
		}
		if target.To == ResetShift && !was {
			row.Note = "never committed: nothing to shift"
			plan = append(plan, row)
			continue
		}
		offs, err := c.ListOffsets(ctx, topic, p.Partition)
		if err != nil {
			return nil, err
		}
		var to int64
		switch target.To {
		case ResetEarliest:
			to = offs.LogStartOffset
		case ResetLatest:
			to = offs.HighWatermark
		case ResetOffset:
			to = target.Offset
		case ResetShift:
			to = shifted(cur, target.Offset)
		case ResetTime:
			if to, err = c.OffsetForTime(ctx, topic, p.Partition, target.Time); err != nil {
				return nil, err
			}
		}
		if to < offs.LogStartOffset {
			to, row.Note = offs.LogStartOffset, "kept at the log start"
		}
		if to > offs.HighWatermark {
			to, row.Note = offs.HighWatermark, "kept at the high watermark"
		}
		row.New = to
		plan = append(plan, row)
	}
	return plan, nil
}

// ResetMoves are the offsets a plan of PlanOffsetReset commits: one per
// partition it does not leave out.
func ResetMoves(plan []OffsetReset) []CommitOffset {
	var out []CommitOffset
	for _, r := range plan {
		if r.New != Never {
			out = append(out, CommitOffset{Topic: r.Topic, Partition: r.Partition, Offset: r.New})
		}
	}
	return out
}

// shifted is offset moved by n, saturating at the ends of int64 rather
// than wrapping around: a shift past either end lands on that end, which
// the clamp to the log start or the high watermark then brings in.
func shifted(offset, n int64) int64 {
	switch {
	case n > 0 && offset > math.MaxInt64-n:
		return math.MaxInt64
	case n < 0 && offset < math.MinInt64-n:
		return math.MinInt64
	}
	return offset + n
}
