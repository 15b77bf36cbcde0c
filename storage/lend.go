package storage

import (
	"fmt"
	"math"
	"os"
	"sort"
	"sync"

	"gostream/record"
)

// Range is a run of whole batches as they lie in one segment file, lent
// by ReadRange so that a server can send them from the file to a socket
// (splice(2), sendfile(2)) without reading them into the process. Until Release the
// segment's file stays open, whatever retention, truncation or Close do
// meanwhile, and the bytes of the range stay as they were when it was
// lent: see ReadRange.
type Range struct {
	s          *segment
	f          *os.File
	pos, end   int64 // file positions
	base, next int64 // offsets: the first batch's base, after the last batch
}

// File is the segment's file. The range's bytes are File's bytes
// [Position(), Position()+Len()). It must not be closed, and it is valid
// until Release.
func (r *Range) File() *os.File { return r.f }

// Position is where the range starts in File.
func (r *Range) Position() int64 { return r.pos }

// Len is the number of bytes in the range.
func (r *Range) Len() int { return int(r.end - r.pos) }

// BaseOffset is the base offset of the range's first batch, which may be
// below the offset asked for (as with Read).
func (r *Range) BaseOffset() int64 { return r.base }

// NextOffset is the offset after the range's last batch.
func (r *Range) NextOffset() int64 { return r.next }

// ReadAt reads the range's bytes from off, counted from the range's
// start, as io.ReaderAt does.
func (r *Range) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > r.end-r.pos {
		return 0, fmt.Errorf("storage: read at %d of a range of %d bytes", off, r.end-r.pos)
	}
	p = p[:min(int64(len(p)), r.end-r.pos-off)]
	return r.f.ReadAt(p, r.pos+off)
}

// Release gives the range back: the log may then close the segment's file
// (if retention deleted it, or the log was closed) or cut the bytes (a
// truncation waits for the ranges it would cut). It may be called more
// than once.
func (r *Range) Release() { r.s.giveBack(r) }

// lentRanges is what a segment has lent (guarded by its own mutex, not
// the Log's, so that giving a range back never waits for the log).
type lentRanges struct {
	sync.Mutex
	ranges  map[*Range]struct{}
	retired bool          // deleted or closed: the last range given back closes the file
	back    chan struct{} // closed (and renewed) when a range is given back
}

// lend registers r as lent. The caller holds the Log's mu (read or
// write), so the segment is still in the log and not retired.
func (s *segment) lend(r *Range) {
	s.lent.Lock()
	if s.lent.ranges == nil {
		s.lent.ranges = make(map[*Range]struct{})
	}
	s.lent.ranges[r] = struct{}{}
	s.lent.Unlock()
}

// giveBack unregisters r, and closes the file if the segment was retired
// and r was its last range.
func (s *segment) giveBack(r *Range) {
	s.lent.Lock()
	if _, ok := s.lent.ranges[r]; !ok {
		s.lent.Unlock()
		return
	}
	delete(s.lent.ranges, r)
	if s.lent.back != nil {
		close(s.lent.back)
		s.lent.back = nil
	}
	last := s.lent.retired && len(s.lent.ranges) == 0
	s.lent.Unlock()
	if last {
		s.f.Close()
	}
}

// setEnd narrows a range lent as a placeholder to its final end.
func (s *segment) setEnd(r *Range, end int64) {
	s.lent.Lock()
	r.end = end
	s.lent.Unlock()
}

// retire closes the segment's file once no range of it is lent: at once
// if none is, else when the last is given back. Deleting a file that is
// open keeps its bytes readable through the descriptor (POSIX), so a
// range of a segment that retention deleted still sends what it held.
// After retire the log never reads the segment again.
func (s *segment) retire() error {
	s.lent.Lock()
	s.lent.retired = true
	idle := len(s.lent.ranges) == 0
	s.lent.Unlock()
	if idle {
		return s.f.Close()
	}
	return nil
}

// lentPast returns a channel that is closed when a range is next given
// back, if a range lent from s reaches past file position pos; nil if none
// does.
func (s *segment) lentPast(pos int64) <-chan struct{} {
	s.lent.Lock()
	defer s.lent.Unlock()
	for r := range s.lent.ranges {
		if r.end > pos {
			if s.lent.back == nil {
				s.lent.back = make(chan struct{})
			}
			return s.lent.back
		}
	}
	return nil
}

// allChecked is the checked position of a segment whose every batch was
// checked: one this process wrote (appends check every batch) or whose
// file recovery scanned whole.
const allChecked = math.MaxInt64

// noteChecked records that the batches in [from, to) of s checked out on a
// read. The checked prefix grows only where the read joins it.
func (s *segment) noteChecked(from, to int64) {
	for {
		c := s.checked.Load()
		if from > c || to <= c {
			return
		}
		if s.checked.CompareAndSwap(c, to) {
			return
		}
	}
}

// ReadRange is Read answered with where the batches lie rather than with
// their bytes: the same batches Read would return for the same arguments
// (every byte of them, TestReadRangeMatchesRead), as a Range of one
// segment's file, lent until the caller releases it. It returns a nil
// Range and no error when the batches cannot be lent so, and the caller
// reads them with Read:
//
//   - they would come to fewer than minBytes (a copy of a few kilobytes
//     costs less than the system calls that spare it);
//   - the segment's file is not an operating system file (an FS other
//     than OSFS);
//   - some batch of them has not been checked since the log was opened.
//     Read checks the checksum of every batch it returns, and a lent range
//     is never read by the process, so ranges are lent only of batches
//     checked already: by the append that wrote them (Write and WriteExact
//     validate every batch), by recovery's scan of the newest segment, or
//     by an earlier Read of an older segment. The first read of an older
//     segment after a restart is a Read, which checks it;
//   - there is nothing to read at offset (Read returns no bytes).
//
// A lent range's bytes do not change while it is lent: the log only
// writes past the end of its data (appends, preallocation), retention
// deletes whole segments (the file stays open, and readable, until the
// range is released), Close closes the files only once the ranges are
// released, and a truncation that would cut into a lent range waits for
// it to be released first (TruncateTo; a range lies below the durable end
// and the high watermark, which a replica's truncation does not cut below
// but to rebuild a replica found wrong).
//
// It returns the errors of Read.
func (l *Log) ReadRange(offset int64, maxBytes int, limit int64, minBytes int) (*Range, error) {
	l.mu.RLock()
	spot, ok, err := l.locateLocked(offset, limit)
	if err != nil || !ok {
		l.mu.RUnlock()
		return nil, err
	}
	s, pos, indexed, size, end, index := spot.s, spot.pos, spot.indexed, spot.size, spot.end, spot.s.index
	of, ok := s.f.(osFile)
	if !ok || size-pos < int64(minBytes) {
		l.mu.RUnlock()
		return nil, nil
	}
	// Lent at once, before the walk below reads the file, as a placeholder
	// up to the segment's size: a truncation that comes meanwhile waits for
	// it, so the walk reads the bytes the log held when it looked.
	r := &Range{s: s, f: of.File, pos: pos, end: size}
	s.lend(r)
	l.mu.RUnlock()
	ok = false
	defer func() {
		if !ok {
			r.Release()
		}
	}()

	h, err := l.batchHolding(s, offset, pos, indexed, size)
	if err != nil || h.size == 0 {
		return nil, err
	}
	pos = h.pos
	r.pos, r.base, r.next = pos, h.base, h.next
	stop := pos + min(int64(max(maxBytes, record.HeaderSize)), size-pos)
	at := pos + h.size
	if at <= stop {
		// Skip by the index to the last indexed batch that the answer
		// takes whole, then walk the headers after it: a batch that is
		// not indexed starts less than the index interval after an
		// indexed one.
		j := sort.Search(len(index), func(j int) bool {
			return int64(index[j].pos) > stop || s.base+int64(index[j].rel) > end
		}) - 1
		w := headerWalk{f: s.f, chunk: l.opts.IndexIntervalBytes + record.HeaderSize, maxBatch: l.opts.MaxBatchBytes, size: size}
		defer w.done()
		if j >= 0 && int64(index[j].pos) > at {
			e := int64(index[j].pos)
			hh, err := w.header(e)
			if err != nil || hh.base != s.base+int64(index[j].rel) {
				return nil, nil // a wrong index entry: Read walks it
			}
			at, r.next = e, hh.base
		}
		for at < stop {
			hh, err := w.header(at)
			if err != nil || hh.base >= end || at+hh.size > stop {
				break // the next batch is not whole in the answer, not readable yet, or damaged (Read reports it)
			}
			at += hh.size
			r.next = hh.next
		}
	}
	if at-pos < int64(minBytes) || at > s.checked.Load() {
		return nil, nil
	}
	s.setEnd(r, at)
	ok = true
	return r, nil
}

// located is the header of the batch that holds an offset, and where it
// is; size 0 when the segment holds no such batch.
type located struct {
	batchHeader
	pos int64
}

// batchHolding walks batch headers of s from pos (an index entry that
// claims base offset indexed) to the batch that holds offset, as Read
// does.
func (l *Log) batchHolding(s *segment, offset, pos, indexed, size int64) (located, error) {
	for first := true; ; first = false {
		h, err := readHeader(s.f, pos, l.opts.MaxBatchBytes)
		if first && indexMiss(pos, h, err, indexed) {
			pos = 0 // a wrong index entry; walk from the segment's start
			continue
		}
		if err != nil {
			return located{}, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		if h.next > offset {
			return located{h, pos}, nil
		}
		pos += h.size
		if pos >= size {
			return located{}, nil
		}
	}
}

// headerWalk reads batch headers from a file a chunk at a time: the
// headers of small batches come from one read, not one each.
type headerWalk struct {
	f        File
	chunk    int64
	maxBatch int
	size     int64 // the segment's data ends here
	buf      []byte
	pooled   *[]byte // where buf came from, when it did
	at       int64   // file position of buf
}

// walkBufs keeps headerWalk's chunks, one per ReadRange at a time.
var walkBufs = sync.Pool{New: func() any { return new([]byte) }}

func (w *headerWalk) header(pos int64) (batchHeader, error) {
	if pos < w.at || pos+record.HeaderSize > w.at+int64(len(w.buf)) {
		n := min(w.chunk, w.size-pos)
		if n < record.HeaderSize {
			return batchHeader{}, fmt.Errorf("%w: no batch header at %d", record.ErrShort, pos)
		}
		if w.pooled == nil {
			w.pooled = walkBufs.Get().(*[]byte)
			w.buf = *w.pooled
		}
		if int64(cap(w.buf)) < n {
			w.buf = make([]byte, n)
		}
		w.buf = w.buf[:n]
		if _, err := w.f.ReadAt(w.buf, pos); err != nil {
			return batchHeader{}, err
		}
		w.at = pos
	}
	b := w.buf[pos-w.at:]
	n, err := record.FrameSize(b, w.maxBatch)
	if err != nil {
		return batchHeader{}, err
	}
	rb := record.Batch(b[:record.HeaderSize])
	return batchHeader{base: rb.BaseOffset(), next: rb.NextOffset(), size: int64(n), epoch: rb.LeaderEpoch(), appendTime: rb.AppendTime()}, nil
}

// done gives the walk's chunk back to the pool.
func (w *headerWalk) done() {
	if w.pooled != nil {
		*w.pooled = w.buf[:0]
		walkBufs.Put(w.pooled)
	}
}
