package storage

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"

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
	return l.BatchesBefore(l.LogEndOffset(), n)
}

// BatchesBefore returns the identities of up to n batches that end at or
// before offset before, the last ones first in the log order (oldest
// first), reading only batch headers. Recovery walks a log backward with it
// to find where it parts from another.
func (l *Log) BatchesBefore(before int64, n int) ([]BatchInfo, error) {
	var out []BatchInfo
	for n > 0 {
		page, segBase, err := l.batchesBeforeInSegment(before, n)
		if err != nil {
			return nil, err
		}
		out = append(page, out...)
		n -= len(page)
		if segBase < 0 || segBase <= l.LogStartOffset() {
			break
		}
		before = segBase
	}
	return out, nil
}

// batchesBeforeInSegment collects up to n batches ending at or before
// `before` from the one segment that holds offset before-1, and returns
// that segment's base (-1 when no segment holds it).
func (l *Log) batchesBeforeInSegment(before int64, n int) ([]BatchInfo, int64, error) {
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return nil, -1, ErrClosed
	}
	if before <= l.mu.segments[0].base || before > l.mu.next {
		l.mu.RUnlock()
		return nil, -1, nil
	}
	i := sort.Search(len(l.mu.segments), func(i int) bool { return l.mu.segments[i].base >= before }) - 1
	s := l.mu.segments[i]
	size := s.size
	// Start n+1 index entries back: every entry is at least one batch.
	from := int64(0)
	rel := before - 1 - s.base
	k := sort.Search(len(s.index), func(j int) bool { return int64(s.index[j].rel) > rel }) - 1
	if k-n-1 > 0 {
		from = int64(s.index[k-n-1].pos)
	}
	l.mu.RUnlock()

	var page []BatchInfo
	hdr := getHeaderBuf()
	defer putHeaderBuf(hdr)
	for pos := from; pos < size; {
		if _, err := s.f.ReadAt(hdr[:], pos); err != nil {
			return nil, -1, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		fs, err := record.FrameSize(hdr[:], l.opts.MaxBatchBytes)
		if err != nil {
			return nil, -1, corruptf("%s: batch header at %d: %v", s.path, pos, err)
		}
		b := record.Batch(hdr[:])
		if b.NextOffset() > before {
			break
		}
		page = append(page, BatchInfo{BaseOffset: b.BaseOffset(), NextOffset: b.NextOffset(), LeaderEpoch: b.LeaderEpoch(), CRC: b.CRC()})
		pos += int64(fs)
	}
	if len(page) > n {
		page = page[len(page)-n:]
	}
	return page, s.base, nil
}

// Digest sums the identities (offsets, epoch, CRC) of every batch that
// starts in [from, to), so that two replicas can compare long ranges by
// content in one exchange. A batch that starts in the range but ends past
// `to` makes `to` no batch boundary: ErrNotBatchBoundary.
func (l *Log) Digest(ctx context.Context, from, to int64) ([32]byte, int, error) {
	h := sha256.New()
	count := 0
	var buf [24]byte
	// Walk forward from `from` over headers, segment by segment.
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return [32]byte{}, 0, ErrClosed
	}
	if from < l.mu.segments[0].base || to > l.mu.next || from > to {
		start, next := l.mu.segments[0].base, l.mu.next
		l.mu.RUnlock()
		return [32]byte{}, 0, fmt.Errorf("%w: digest of [%d, %d), log holds [%d, %d)", ErrOffsetOutOfRange, from, to, start, next)
	}
	segs := append([]*segment(nil), l.mu.segments...)
	type start struct {
		s         *segment
		pos, size int64
	}
	var starts []start
	for i, s := range segs {
		if s.next <= from || s.base >= to {
			continue
		}
		pos := int64(0)
		if i == sort.Search(len(segs), func(j int) bool { return segs[j].base > from })-1 {
			pos, _ = s.lookup(from)
		}
		starts = append(starts, start{s, pos, s.size})
	}
	l.mu.RUnlock()
	hdr := getHeaderBuf()
	defer putHeaderBuf(hdr)
	for _, st := range starts {
		if err := ctx.Err(); err != nil {
			return [32]byte{}, 0, err
		}
		for pos := st.pos; pos < st.size; {
			if _, err := st.s.f.ReadAt(hdr[:], pos); err != nil {
				return [32]byte{}, 0, fmt.Errorf("read segment %d at %d: %w", st.s.base, pos, err)
			}
			fs, err := record.FrameSize(hdr[:], l.opts.MaxBatchBytes)
			if err != nil {
				return [32]byte{}, 0, corruptf("%s: batch header at %d: %v", st.s.path, pos, err)
			}
			b := record.Batch(hdr[:])
			pos += int64(fs)
			if b.NextOffset() <= from {
				continue
			}
			if b.BaseOffset() < from {
				return [32]byte{}, 0, fmt.Errorf("%w: offset %d is inside the batch [%d, %d)", ErrNotBatchBoundary, from, b.BaseOffset(), b.NextOffset())
			}
			if b.BaseOffset() >= to {
				break
			}
			if b.NextOffset() > to {
				return [32]byte{}, 0, fmt.Errorf("%w: offset %d is inside the batch [%d, %d)", ErrNotBatchBoundary, to, b.BaseOffset(), b.NextOffset())
			}
			binary.BigEndian.PutUint64(buf[0:], uint64(b.BaseOffset()))
			binary.BigEndian.PutUint64(buf[8:], uint64(b.NextOffset()))
			binary.BigEndian.PutUint32(buf[16:], uint32(b.LeaderEpoch()))
			binary.BigEndian.PutUint32(buf[20:], b.CRC())
			h.Write(buf[:24])
			count++
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, count, nil
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
	hdr := getHeaderBuf()
	defer putHeaderBuf(hdr)
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
