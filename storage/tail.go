package storage

import (
	"fmt"

	"gostream/record"
)

// BatchInfo identifies a stored batch by content: its CRC covers its
// offsets, epoch and records.
type BatchInfo struct {
	BaseOffset  int64
	NextOffset  int64
	LeaderEpoch int32
	CRC         uint32
}

// LastBatches returns the identities of up to n of the last batches of the
// log, oldest first, reading only batch headers. Replicas compare them to
// check by content that one log is a prefix of another.
func (l *Log) LastBatches(n int) ([]BatchInfo, error) {
	if n <= 0 {
		return nil, nil
	}
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	segs := append([]*segment(nil), l.mu.segments...)
	type span struct {
		s         *segment
		from, end int64
	}
	var spans []span
	// Walk back over index entries (and segments) until the span from the
	// chosen entry to the end holds at least n batches or the log is done.
	// Each index entry is at most IndexIntervalBytes plus one batch apart.
	need := int64(n)
	for i := len(segs) - 1; i >= 0 && need > 0; i-- {
		s := segs[i]
		if s.size == 0 {
			continue
		}
		from := int64(0)
		if k := len(s.index) - int(need) - 1; k > 0 {
			from = int64(s.index[k].pos)
		}
		spans = append(spans, span{s, from, s.size})
		need -= int64(len(s.index)) // every index entry is at least one batch
	}
	l.mu.RUnlock()

	var out []BatchInfo
	for i := len(spans) - 1; i >= 0; i-- {
		sp := spans[i]
		var hdr [record.HeaderSize]byte
		for pos := sp.from; pos < sp.end; {
			if _, err := sp.s.f.ReadAt(hdr[:], pos); err != nil {
				return nil, fmt.Errorf("read segment %d at %d: %w", sp.s.base, pos, err)
			}
			size, err := record.FrameSize(hdr[:], l.opts.MaxBatchBytes)
			if err != nil {
				return nil, corruptf("%s: batch header at %d: %v", sp.s.path, pos, err)
			}
			b := record.Batch(hdr[:])
			out = append(out, BatchInfo{BaseOffset: b.BaseOffset(), NextOffset: b.NextOffset(), LeaderEpoch: b.LeaderEpoch(), CRC: b.CRC()})
			pos += int64(size)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// BatchAt returns the identity of the batch that starts exactly at offset,
// and false when no batch of the log starts there.
func (l *Log) BatchAt(offset int64) (BatchInfo, bool, error) {
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return BatchInfo{}, false, ErrClosed
	}
	if offset < l.mu.segments[0].base || offset >= l.mu.next {
		l.mu.RUnlock()
		return BatchInfo{}, false, nil
	}
	i := len(l.mu.segments) - 1
	for i > 0 && l.mu.segments[i].base > offset {
		i--
	}
	s := l.mu.segments[i]
	pos, size := int64(0), s.size
	if len(s.index) > 0 {
		pos, _ = s.lookup(offset)
	}
	l.mu.RUnlock()
	var hdr [record.HeaderSize]byte
	for tries := 0; pos < size; tries++ {
		if _, err := s.f.ReadAt(hdr[:], pos); err != nil {
			return BatchInfo{}, false, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		fs, err := record.FrameSize(hdr[:], l.opts.MaxBatchBytes)
		if err != nil {
			return BatchInfo{}, false, corruptf("%s: batch header at %d: %v", s.path, pos, err)
		}
		b := record.Batch(hdr[:])
		switch {
		case b.BaseOffset() == offset:
			return BatchInfo{BaseOffset: b.BaseOffset(), NextOffset: b.NextOffset(), LeaderEpoch: b.LeaderEpoch(), CRC: b.CRC()}, true, nil
		case b.BaseOffset() > offset:
			if tries == 0 && pos > 0 {
				pos = 0 // the index entry was wrong: walk from the start
				continue
			}
			return BatchInfo{}, false, nil
		}
		pos += int64(fs)
	}
	return BatchInfo{}, false, nil
}
