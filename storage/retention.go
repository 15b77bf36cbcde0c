package storage

import (
	"context"
	"time"
)

// ApplyRetention deletes the oldest whole segments that the retention
// settings no longer keep: by size, while the segments after them still hold
// at least RetentionBytes; by age, when their newest batch is older than
// RetentionAge. The active segment is never deleted, so the log start offset
// only moves forward and never past the log end. It returns the number of
// segments deleted.
func (l *Log) ApplyRetention(ctx context.Context) (int, error) {
	if l.opts.RetentionBytes <= 0 && l.opts.RetentionAge <= 0 {
		return 0, nil
	}
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
	now := l.opts.Now()
	drop := 0
	for _, s := range segs[:len(segs)-1] {
		bySize := l.opts.RetentionBytes > 0 && total-s.size >= l.opts.RetentionBytes
		byAge := l.opts.RetentionAge > 0 && now.Sub(time.UnixMilli(s.lastTime)) > l.opts.RetentionAge
		if !bySize && !byAge {
			break
		}
		total -= s.size
		drop++
	}
	l.mu.RUnlock()
	if drop == 0 {
		return 0, nil
	}
	l.mu.Lock()
	l.mu.segments = segs[drop:]
	l.mu.Unlock()
	// Oldest first, so a crash part way leaves a contiguous log.
	for _, s := range segs[:drop] {
		if err := l.removeSegment(s); err != nil {
			return 0, markNoSpace(err)
		}
	}
	l.logger.Info("retention deleted segments", "segments", drop, "log_start_offset", segs[drop].base)
	return drop, nil
}
