package storage

import (
	"context"
	"fmt"
	"time"

	"gostream/record"
)

// Policy is the part of a log's configuration that may change while the
// log is open: when the active segment rolls, and what retention deletes.
// Zero SegmentBytes and SegmentAge take the defaults (DefaultSegmentBytes,
// DefaultSegmentAge); zero or negative RetentionBytes and RetentionAge keep
// everything.
type Policy struct {
	// SegmentBytes rolls the active segment when the next batch would make
	// it larger (a single larger batch still gets a segment of its own).
	// At most MaxSegmentBytes.
	SegmentBytes int64
	// SegmentAge rolls the active segment when its first batch is older
	// than this, by the append time of the batch being appended.
	SegmentAge time.Duration
	// RetentionBytes deletes the oldest whole segments while the rest still
	// hold at least this many bytes.
	RetentionBytes int64
	// RetentionAge deletes whole segments whose newest batch is older.
	RetentionAge time.Duration
}

func (o *Options) policy() Policy {
	return Policy{SegmentBytes: o.SegmentBytes, SegmentAge: o.SegmentAge, RetentionBytes: o.RetentionBytes, RetentionAge: o.RetentionAge}
}

func (p *Policy) setDefaults() error {
	if p.SegmentBytes == 0 {
		p.SegmentBytes = DefaultSegmentBytes
	}
	if p.SegmentBytes < record.HeaderSize || p.SegmentBytes > MaxSegmentBytes {
		return fmt.Errorf("storage: segment bytes %d outside [%d, %d]", p.SegmentBytes, record.HeaderSize, MaxSegmentBytes)
	}
	if p.SegmentAge <= 0 {
		p.SegmentAge = DefaultSegmentAge
	}
	if p.RetentionBytes < 0 {
		p.RetentionBytes = 0
	}
	if p.RetentionAge < 0 {
		p.RetentionAge = 0
	}
	return nil
}

// Policy returns the log's policy, with its defaults filled in.
func (l *Log) Policy() Policy {
	return *l.policy.Load()
}

// SetPolicy changes when segments roll and what retention keeps, from the
// next append and the next ApplyRetention on: a smaller SegmentBytes rolls
// the active segment at the next append that would pass it. It never waits
// for an append in progress. An invalid policy (SegmentBytes outside its
// bounds) is refused and the log keeps its policy.
func (l *Log) SetPolicy(p Policy) error {
	if err := p.setDefaults(); err != nil {
		return err
	}
	l.policy.Store(&p)
	return nil
}

// ApplyRetention deletes the oldest whole segments that the retention
// policy no longer keeps: by size, while the segments after them still hold
// at least RetentionBytes; by age, when their newest batch is older than
// RetentionAge. Only segments that end at or below limit are deleted, so
// that no record at or above limit is (the replication layer passes the
// high watermark: a record that not every active replica holds yet is
// never deleted, nor anything after it). The active segment is never
// deleted, so the log start offset only moves forward and never past the
// log end. It returns the number of segments deleted, and ErrClosed or the
// context's error.
func (l *Log) ApplyRetention(ctx context.Context, limit int64) (int, error) {
	policy := l.policy.Load()
	if policy.RetentionBytes <= 0 && policy.RetentionAge <= 0 {
		return 0, nil
	}
	now := l.opts.Now()
	return l.deleteOldest(ctx, limit, func(s *segment, after int64) bool {
		bySize := policy.RetentionBytes > 0 && after >= policy.RetentionBytes
		byAge := policy.RetentionAge > 0 && now.Sub(time.UnixMilli(s.lastTime)) > policy.RetentionAge
		return bySize || byAge
	})
}

// DeleteBelow deletes the oldest whole segments that end at or below
// limit, whatever the retention policy says: a log whose owner knows that
// nothing below limit is needed (a __consumer_offsets replica, below its
// newest complete snapshot) bounds itself so. The active segment is never
// deleted. It returns the number of segments deleted.
func (l *Log) DeleteBelow(ctx context.Context, limit int64) (int, error) {
	return l.deleteOldest(ctx, limit, func(*segment, int64) bool { return true })
}

// deleteOldest deletes the oldest whole segments, each ending at or below
// limit, while drop(segment, bytes of the segments after it) says so.
func (l *Log) deleteOldest(ctx context.Context, limit int64, drop func(s *segment, after int64) bool) (int, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	segs := append([]*segment(nil), l.mu.segments...)
	var total int64
	for _, s := range segs {
		total += s.size
	}
	n := 0
	for i, s := range segs[:len(segs)-1] {
		if segs[i+1].base > limit {
			break // it holds records at or above the limit
		}
		if !drop(s, total-s.size) {
			break
		}
		total -= s.size
		n++
	}
	l.mu.RUnlock()
	if n == 0 {
		return 0, nil
	}
	l.mu.Lock()
	l.mu.segments = segs[n:]
	l.mu.Unlock()
	// Oldest first, so a crash part way leaves a contiguous log.
	for _, s := range segs[:n] {
		if err := l.removeSegment(s); err != nil {
			return 0, markNoSpace(err)
		}
	}
	l.logger.Info("retention deleted segments", "segments", n, "log_start_offset", segs[n].base)
	return n, nil
}
