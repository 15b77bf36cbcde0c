package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// QuarantineDir is the directory under a replica's log directory that keeps
// every byte cut off the log, by TruncateTo or by torn-tail recovery.
const QuarantineDir = "quarantine"

type quarantineRange struct {
	s        *segment
	from, to int64 // file positions
}

// quarantine copies the given byte ranges, in order, into one new file under
// quarantine/ and makes it durable before anything is cut. If it fails, a
// partly written file is removed again, so that a full disk gets its space
// back.
func (l *Log) quarantine(name string, ranges []quarantineRange) error {
	qdir := filepath.Join(l.dir, QuarantineDir)
	if err := l.fs.MkdirAll(qdir, 0o755); err != nil {
		return fmt.Errorf("create quarantine: %w", err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return err
	}
	path := filepath.Join(qdir, name)
	f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create quarantine file: %w", err)
	}
	if err := copyRanges(f, ranges); err != nil {
		f.Close()
		l.fs.Remove(path) // a failure here leaves a partial copy, never a cut
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(l.fs, qdir)
}

func copyRanges(f File, ranges []quarantineRange) error {
	w := io.NewOffsetWriter(f, 0)
	for _, r := range ranges {
		if _, err := io.Copy(w, io.NewSectionReader(r.s.f, r.from, r.to-r.from)); err != nil {
			return fmt.Errorf("copy to quarantine: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync quarantine file: %w", err)
	}
	return nil
}

// TruncateTo removes every record at or after offset, so that the log ends
// at offset. The removed bytes are first copied to a file under quarantine/
// named by the offsets they held, and made durable there. Appends that were
// cut off before they became durable return ErrTruncated.
//
// offset must be a batch boundary (ErrNotBatchBoundary) between the log
// start and end (ErrOffsetOutOfRange). Truncating to the log end does
// nothing. An error caused by a full disk matches ErrNoSpace; if it came
// from the quarantine copy, nothing was cut.
func (l *Log) TruncateTo(ctx context.Context, offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return markNoSpace(l.truncateLocked(ctx, offset))
}

// truncateLocked is TruncateTo; the caller holds appendMu.
func (l *Log) truncateLocked(ctx context.Context, offset int64) error {
	l.mu.RLock()
	closed, next := l.mu.closed, l.mu.next
	segs := append([]*segment(nil), l.mu.segments...)
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if offset < segs[0].base || offset > next {
		return fmt.Errorf("%w: truncate to %d, log holds [%d, %d]", ErrOffsetOutOfRange, offset, segs[0].base, next)
	}
	if offset == next {
		return nil
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	s := segs[i]
	pos, epoch, lastTime, err := l.boundary(s, offset)
	if err != nil {
		return err
	}
	if epoch < 0 && i > 0 {
		if _, epoch, _, err = l.boundary(segs[i-1], offset); err != nil {
			return err
		}
	}

	// A range lent past the cut (ReadRange) is being sent: the file must
	// hold its bytes until it is given back. Lent ranges lie below the
	// durable end and the HW, so this waits only when a replica found
	// wrong is rebuilt while a range it served as leader is still written.
	if err := waitLentPast(ctx, s, pos); err != nil {
		return err
	}
	ranges := []quarantineRange{{s, pos, s.size}}
	for _, later := range segs[i+1:] {
		ranges = append(ranges, quarantineRange{later, 0, later.size})
	}
	name := fmt.Sprintf("%s-%s-%d.log", segmentName(offset), segmentName(next), l.opts.Now().UnixNano())
	if err := l.quarantine(name, ranges); err != nil {
		return err
	}

	// Cut from the newest file back, so that a crash part way leaves a
	// shorter but contiguous log.
	l.mu.Lock()
	for wait := s.lentPast(pos); wait != nil; wait = s.lentPast(pos) {
		// Lent during the copy to quarantine. Ranges are lent under mu, so
		// once none is past the cut here, none can be until the state
		// below says the log ends at offset.
		l.mu.Unlock()
		if err := waitLentPast(ctx, s, pos); err != nil {
			return err
		}
		l.mu.Lock()
	}
	l.mu.segments = segs[:i+1]
	l.mu.next = offset
	l.mu.durable = min(l.mu.durable, offset)
	l.mu.lastEpoch = epoch
	l.mu.gen++
	l.mu.cuts = append(l.mu.cuts, offset)
	s.size, s.next, s.lastTime = pos, offset, lastTime
	if pos == 0 {
		s.firstTime = 0
	}
	for len(s.index) > 0 && int64(s.index[len(s.index)-1].pos) >= pos {
		s.index = s.index[:len(s.index)-1]
	}
	s.indexedAt = -1
	if len(s.index) > 0 {
		s.indexedAt = int64(s.index[len(s.index)-1].pos)
	}
	l.notifyLocked()
	l.mu.Unlock()

	for j := len(segs) - 1; j > i; j-- {
		if err := l.removeSegment(segs[j]); err != nil {
			l.fail(err)
			return err
		}
	}
	if err := s.f.Truncate(pos); err != nil {
		err = fmt.Errorf("truncate segment %d: %w", s.base, err)
		l.fail(err)
		return err
	}
	s.alloc = pos // the cut bytes are gone, so [size, alloc) holds zeros again
	if err := s.f.Sync(); err != nil {
		err = fmt.Errorf("sync segment %d: %w", s.base, err)
		l.fail(err)
		return err
	}
	l.mu.Lock()
	l.mu.durable = offset
	l.notifyLocked() // readers waiting below offset can go on
	l.mu.Unlock()
	// The active segment's index is rebuilt on open; drop a stale one.
	if err := l.fs.Remove(indexPath(s.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	l.logger.Warn("truncated log", "offset", offset, "previous_end", next, "quarantined", name)
	return nil
}

// waitLentPast waits until no range lent from s reaches past file
// position pos.
func waitLentPast(ctx context.Context, s *segment, pos int64) error {
	for wait := s.lentPast(pos); wait != nil; wait = s.lentPast(pos) {
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// boundary finds the batch that starts at offset in s. It returns its file
// position (s.size when offset is s.next), and the epoch and append time of
// the batch before it (-1 and 0 when there is none in s).
func (l *Log) boundary(s *segment, offset int64) (pos int64, epoch int32, lastTime int64, err error) {
	if offset == s.base {
		return 0, -1, 0, nil
	}
	// Start from the index entry at or before the batch before offset.
	l.mu.RLock()
	pos, indexed := s.lookup(offset - 1)
	size := s.size
	l.mu.RUnlock()
	epoch = -1
	for first := true; pos < size; first = false {
		h, err := readHeader(s.f, pos, l.opts.MaxBatchBytes)
		if first && indexMiss(pos, h, err, indexed) {
			pos = 0 // a wrong index entry; walk from the segment's start
			continue
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		if h.base == offset {
			return pos, epoch, lastTime, nil
		}
		if h.next > offset {
			return 0, 0, 0, fmt.Errorf("%w: offset %d is inside the batch [%d, %d)", ErrNotBatchBoundary, offset, h.base, h.next)
		}
		epoch, lastTime = h.epoch, h.appendTime
		pos += h.size
	}
	return pos, epoch, lastTime, nil // offset is the segment's end
}

// removeSegment closes and deletes a segment's files and makes the deletion
// durable. A segment with ranges lent is closed when they are given back,
// its bytes readable until then (see retire).
func (l *Log) removeSegment(s *segment) error {
	s.retire()
	if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove segment %d: %w", s.base, err)
	}
	if err := l.fs.Remove(indexPath(s.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove index %d: %w", s.base, err)
	}
	return syncDir(l.fs, l.dir)
}

// Resume makes a failed log take appends again once what made it fail has
// passed (space was freed, a disk came back). After a failed write or
// fsync nothing above the last successful fsync can be trusted: the kernel
// may have dropped the pages, or marked them clean without writing them.
// So Resume cuts the log back to its durable end, the offset up to which
// group commits (or a roll) published fsync'd data: the bytes above it are
// copied to quarantine/ first, as TruncateTo does, then cut, together with
// anything a failed write left after the data. It fsyncs the active
// segment and the log's directory, and clears the failure. Appends that
// were cut get ErrTruncated from their Durable wait.
//
// On a log that has not failed it does nothing. It returns ErrClosed, the
// context's error, or the error of the step that failed (matching
// ErrNoSpace when quarantining needs space that is not there); the log
// then stays failed, and Resume may be called again.
func (l *Log) Resume(ctx context.Context) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.RLock()
	closed, failed, durable, next := l.mu.closed, l.mu.failed, l.mu.durable, l.mu.next
	l.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case failed == nil:
		return nil
	}
	if durable < next {
		if err := l.truncateLocked(ctx, durable); err != nil {
			return markNoSpace(err)
		}
	}
	l.mu.RLock()
	active := l.mu.segments[len(l.mu.segments)-1]
	l.mu.RUnlock()
	// The durable end is in the active segment: a roll publishes the old
	// segment as durable once it is fsync'd, before the new one exists.
	// Whatever follows its data now (a partial write, preallocated space)
	// goes, and the size, the data and the directory entries are synced
	// anew: the fsync that failed may have been any of them.
	if err := active.f.Truncate(active.size); err != nil {
		return markNoSpace(fmt.Errorf("truncate segment %d: %w", active.base, err))
	}
	active.alloc = active.size
	if err := active.f.Sync(); err != nil {
		return markNoSpace(fmt.Errorf("sync segment %d: %w", active.base, err))
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		return markNoSpace(err)
	}
	l.mu.Lock()
	l.mu.failed = nil
	l.notifyLocked()
	l.mu.Unlock()
	l.logger.Warn("resumed a failed log", "offset", durable, "cut", next-durable, "failure", failed)
	return nil
}
