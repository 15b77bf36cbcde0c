package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/record"
)

// Defaults for Options fields left zero.
const (
	DefaultSegmentBytes       = 128 << 20
	DefaultSegmentAge         = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes = 4096
	DefaultMaxBatchBytes      = 4 << 20
	// MaxSegmentBytes is the largest SegmentBytes: index positions are
	// 32-bit, and recovery scans the newest segment whole.
	MaxSegmentBytes = 1 << 30
)

// Options configures a Log. Zero values take the defaults above; retention
// is off unless set. SegmentBytes, SegmentAge, RetentionBytes and
// RetentionAge are the log's first Policy; SetPolicy changes them on an
// open log.
type Options struct {
	// SegmentBytes rolls the active segment when the next batch would make
	// it larger (a single larger batch still gets a segment of its own).
	SegmentBytes int64
	// SegmentAge rolls the active segment when its first batch is older
	// than this, by the append time of the batch being appended.
	SegmentAge time.Duration
	// IndexIntervalBytes is the spacing of sparse index entries.
	IndexIntervalBytes int64
	// MaxBatchBytes bounds one batch.
	MaxBatchBytes int
	// RetentionBytes deletes the oldest whole segments while the rest still
	// hold at least this many bytes. Zero or negative keeps everything.
	RetentionBytes int64
	// RetentionAge deletes whole segments whose newest batch is older. Zero
	// keeps everything.
	RetentionAge time.Duration
	// Logger receives lifecycle and recovery messages.
	Logger hclog.Logger
	// Now is the clock used for append times and ages; time.Now by default.
	Now func() time.Time
	// OnSync, if set, is told how long each group-commit fsync took.
	OnSync func(time.Duration)
	// InitialOffset is where a new, empty log starts: a replica rebuilt
	// from a leader whose log no longer starts at 0. Ignored for a log that
	// exists.
	InitialOffset int64
	// FS is the file system the log's files are on; DefaultFS() by
	// default.
	FS FS
	// DurableFloor is an offset the caller knows was durable in this log
	// (a replica's checkpointed high watermark); zero or less when it
	// knows none. Open refuses, with ErrCorrupt, to recover a log that
	// would end below it.
	DurableFloor int64
}

func (o *Options) setDefaults() error {
	p := o.policy()
	if err := p.setDefaults(); err != nil {
		return err
	}
	o.SegmentBytes, o.SegmentAge, o.RetentionBytes, o.RetentionAge = p.SegmentBytes, p.SegmentAge, p.RetentionBytes, p.RetentionAge
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if int64(o.MaxBatchBytes) > MaxSegmentBytes {
		return fmt.Errorf("storage: max batch bytes %d above %d", o.MaxBatchBytes, MaxSegmentBytes)
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FS == nil {
		o.FS = defaultFS
	}
	return nil
}

// Log is the append-only log of one partition replica: a directory of
// segments. It is safe for concurrent use.
//
// Appends are durable when they return: concurrent appenders share one
// fsync (group commit). Readers see only durable batches.
//
// Lock order: appendMu before mu; syncMu is never held with either.
type Log struct {
	dir    string
	opts   Options
	fs     FS
	logger hclog.Logger
	// policy is when segments roll and what retention deletes: read once
	// by each append and each retention run, replaced whole by SetPolicy,
	// so that changing it never waits for a write.
	policy atomic.Pointer[Policy]

	// appendMu serializes everything that writes the log's files: appends,
	// rolls, truncation, retention, close.
	appendMu sync.Mutex

	// prealloc is what the choice of how to preallocate the next stretch
	// of the active segment looks at (see segment.preallocate). Under
	// appendMu.
	prealloc struct {
		bytes int64  // appended since the last preallocation
		syncs uint64 // syncs at the last preallocation
	}
	// syncs counts group-commit fsyncs that succeeded.
	syncs atomic.Uint64

	// syncMu elects the one appender that runs the next fsync.
	syncMu struct {
		sync.Mutex
		syncing bool
		done    chan struct{} // closed when the running fsync finishes
		// finishing is the highest target a finisher (see finish) makes
		// durable in the background; 0 when none runs.
		finishing int64
		// closing is set by Close: no finisher starts after it.
		closing bool
	}
	// finishers are the background waits of abandoned waiters; Close
	// waits for them.
	finishers sync.WaitGroup

	mu struct {
		sync.RWMutex
		segments  []*segment // sorted by base; the last is active
		next      int64      // log end offset: after the last written batch
		durable   int64      // offsets below this are fsync'd
		lastEpoch int32      // epoch of the last batch, -1 when empty
		gen       uint64     // bumped by every truncation
		cuts      []int64    // offset of each truncation; len(cuts) == gen
		changed   chan struct{}
		closed    bool
		failed    error
	}
}

// Open opens the log in dir, creating dir and an empty first segment when
// there is none, and recovers it. Where the scan of the newest segment
// stops at a batch that does not check out:
//
//   - zeros up to the end of the file are free space, preallocated for
//     appends: nothing is cut;
//   - a torn write is cut off (its bytes, and any zeros after them, copied
//     to quarantine/ first) and logged. A crash can only leave bytes of a
//     batch missing: past the end of the file, or reading as zeros
//     (preallocated space, sectors never written). So the batch is torn
//     when its frame cannot be read whole (the file ends inside its
//     header, its length field is out of range, or the file ends inside
//     it), or when some 512-byte sector of the file, aligned to file
//     position, reads as zeros wherever it overlaps the batch; and no
//     valid batch starts anywhere after it;
//   - anything else is corruption: a batch that lies whole in the file
//     with no such sector of zeros and fails its checksum or validation, a
//     damaged batch with a valid one after it, offsets that are not
//     contiguous, epochs that go backward, a damaged older segment. So is a
//     log that would end below opts.DurableFloor, by a cut or as it is (a
//     directory with no segment included, when DurableFloor is above
//     InitialOffset). Open then returns an error matching ErrCorrupt that
//     names the file, the position and the reason, and changes nothing:
//     it does not even create dir.
//
// An error caused by a full disk matches ErrNoSpace.
func Open(dir string, opts Options) (*Log, error) {
	l, err := open(dir, opts)
	return l, markNoSpace(err)
}

func open(dir string, opts Options) (*Log, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, fs: opts.FS, logger: opts.Logger}
	p := opts.policy()
	l.policy.Store(&p)
	l.mu.changed = make(chan struct{})
	l.mu.lastEpoch = -1
	bases, err := listSegments(l.fs, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	if len(bases) == 0 {
		if opts.InitialOffset < 0 {
			return nil, fmt.Errorf("storage: negative initial offset %d", opts.InitialOffset)
		}
		if opts.DurableFloor > opts.InitialOffset {
			return nil, corruptf("%s: offsets below %d were acknowledged but the log has no segment", dir, opts.DurableFloor)
		}
		if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create log dir: %w", err)
		}
		s, err := openSegmentFile(l.fs, dir, opts.InitialOffset, true)
		if err != nil {
			return nil, err
		}
		if err := syncDir(l.fs, dir); err != nil {
			s.f.Close()
			return nil, err
		}
		l.mu.segments = []*segment{s}
		l.mu.next, l.mu.durable = opts.InitialOffset, opts.InitialOffset
		return l, nil
	}
	if err := l.recover(bases); err != nil {
		for _, s := range l.mu.segments {
			s.f.Close()
		}
		return nil, err
	}
	return l, nil
}

// recover opens and checks every segment; see Open. It changes nothing
// until every check has passed; then it cuts a torn tail.
func (l *Log) recover(bases []int64) error {
	next, epoch := bases[0], int32(-1)
	var (
		tornSeg  *segment // the newest segment, when it ends in a torn write
		tornRes  scanResult
		tornEnd  int64
		tornWhy  string
		lastPath string
	)
	for i, base := range bases {
		s, err := openSegmentFile(l.fs, l.dir, base, false)
		if err != nil {
			return err
		}
		l.mu.segments = append(l.mu.segments, s)
		if base != next {
			return corruptf("%s: segment starts at offset %d, previous segment ends at %d", s.path, base, next)
		}
		fi, err := s.f.Stat()
		if err != nil {
			return err
		}
		s.alloc = fi.Size()
		lastPath = s.path
		if i < len(bases)-1 {
			if next, epoch, err = l.checkClosedSegment(s, fi.Size(), epoch); err != nil {
				return err
			}
			continue
		}
		res, err := s.scan(0, fi.Size(), base, epoch, l.opts.MaxBatchBytes, l.opts.IndexIntervalBytes)
		if err != nil {
			return err
		}
		s.checked.Store(allChecked) // scanned whole, and appended to by this process
		if res.stopErr != nil {
			// Zeros after the last batch are space preallocated for appends,
			// not damage; only what is not zero can be a torn write.
			end, err := nonZeroEnd(s.f, res.end, fi.Size())
			if err != nil {
				return err
			}
			if end > res.end {
				why, err := tornReason(s.f, res.end, fi.Size(), l.opts.MaxBatchBytes)
				if err != nil {
					return err
				}
				if why == "" {
					return corruptf("%s: %v; the batch lies whole in the file and no sector of it reads as zeros, which no crash leaves", s.path, res.stopErr)
				}
				later, err := validBatchAfter(s.f, res.end, fi.Size(), l.opts.MaxBatchBytes)
				if err != nil {
					return err
				}
				if later {
					return corruptf("%s: %v, and valid data follows it", s.path, res.stopErr)
				}
				tornSeg, tornRes, tornEnd, tornWhy = s, res, fi.Size(), why
			}
		}
		next, epoch = res.next, res.epoch
	}
	if floor := l.opts.DurableFloor; next < floor {
		if tornSeg != nil {
			return corruptf("%s: offsets below %d were acknowledged but the batch at position %d (offset %d) is damaged (%v; %s): recovery would cut them",
				tornSeg.path, floor, tornRes.end, tornRes.next, tornRes.stopErr, tornWhy)
		}
		return corruptf("%s: offsets below %d were acknowledged but the log ends at offset %d", lastPath, floor, next)
	}
	if tornSeg != nil {
		if err := l.cutTornTail(tornSeg, tornRes, tornEnd, tornWhy); err != nil {
			return err
		}
	}
	l.mu.next, l.mu.durable, l.mu.lastEpoch = next, next, epoch
	return nil
}

// checkClosedSegment checks a segment that was fsync'd whole before the next
// one was created: its index, its last batches, and that it ends exactly at
// the end of the file. Any flaw is corruption, since no crash explains it.
func (l *Log) checkClosedSegment(s *segment, fileSize int64, epoch int32) (int64, int32, error) {
	s.size = fileSize
	if fileSize == 0 {
		return 0, 0, corruptf("%s: closed segment is empty", s.path)
	}
	from, next, prevEpoch := int64(0), s.base, epoch
	if s.loadIndex(l.fs) {
		last := s.index[len(s.index)-1]
		from, next = int64(last.pos), s.base+int64(last.rel)
		s.index = s.index[:len(s.index)-1] // re-noted by the scan below
		if len(s.index) > 0 {
			s.indexedAt = int64(s.index[len(s.index)-1].pos)
		} else {
			s.indexedAt = -1
		}
		h, err := readHeader(s.f, 0, l.opts.MaxBatchBytes)
		if err != nil {
			return 0, 0, corruptf("%s: first batch: %v", s.path, err)
		}
		if h.base != s.base {
			return 0, 0, corruptf("%s: first batch has base offset %d, want %d", s.path, h.base, s.base)
		}
		s.firstTime = h.appendTime
		epoch = max(epoch, h.epoch) // the epochs of the skipped middle are not rechecked
	} else {
		s.index, s.indexedAt = nil, -1
	}
	res, err := s.scan(from, fileSize, next, epoch, l.opts.MaxBatchBytes, l.opts.IndexIntervalBytes)
	if from > 0 && (err != nil || res.stopErr != nil || res.end != fileSize) {
		// The index is a cache, and a wrong last entry sends the scan into
		// the middle of a batch: only a scan of the whole segment can tell
		// a damaged index from a damaged segment.
		l.logger.Warn("index does not match its segment; checking the whole segment", "segment", filepath.Base(s.path))
		s.index, s.indexedAt, s.firstTime, from = nil, -1, 0, 0
		res, err = s.scan(0, fileSize, s.base, prevEpoch, l.opts.MaxBatchBytes, l.opts.IndexIntervalBytes)
	}
	if err != nil {
		return 0, 0, err
	}
	if res.stopErr != nil || res.end != fileSize {
		return 0, 0, corruptf("%s: closed segment damaged at position %d: %v", s.path, res.end, res.stopErr)
	}
	if from == 0 {
		s.checked.Store(allChecked) // scanned whole
	}
	return res.next, res.epoch, nil
}

// cutTornTail quarantines and removes the bytes after the last valid batch
// of the newest segment, up to end, the end of the file; why says what
// makes it a torn write. Zeros preallocated after a torn write go with it:
// they cannot be told from zeros it wrote.
func (l *Log) cutTornTail(s *segment, res scanResult, end int64, why string) error {
	torn := end - res.end
	name := fmt.Sprintf("torn-%s-%d.bin", segmentName(res.next), l.opts.Now().UnixNano())
	if err := l.quarantine(name, []quarantineRange{{s, res.end, end}}); err != nil {
		return err
	}
	if err := s.f.Truncate(res.end); err != nil {
		return fmt.Errorf("truncate torn tail: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync after torn tail: %w", err)
	}
	s.size, s.alloc = res.end, res.end
	l.logger.Warn("cut a torn write off the end of the log", "segment", filepath.Base(s.path),
		"offset", res.next, "position", res.end, "bytes", torn, "reason", res.stopErr, "torn", why, "quarantined", name)
	return nil
}

// Append stamps batch with the next offset, epoch and the current time, and
// appends it. It returns once the batch is durable. The batch's header is
// rewritten in place.
//
// It returns ErrInvalidBatch, ErrBatchTooLarge, ErrEpochRegression,
// ErrClosed, ErrFailed, ErrTruncated, or the context's error (in which case
// the batch may still become durable). When the disk is full it returns an
// error matching ErrNoSpace: if it does not match ErrFailed too, the append
// did not happen, the log goes on, and the append may be tried again.
func (l *Log) Append(ctx context.Context, batch record.Batch, epoch int32) (AppendResult, error) {
	res, durable, err := l.Write(batch, epoch)
	if err != nil {
		return AppendResult{}, err
	}
	return res, durable(ctx)
}

// Durable waits until an append is durable. It returns nil once it is,
// ErrTruncated if the append was cut off first, ErrFailed or ErrClosed, or
// the context's error.
type Durable func(ctx context.Context) error

// Write is Append without the wait: it writes the batch in log order and
// returns before the fsync, with a Durable to wait on. A server that
// pipelines appends writes them in order with Write and waits for them
// concurrently; they still share fsyncs.
func (l *Log) Write(batch record.Batch, epoch int32) (AppendResult, Durable, error) {
	sum, err := l.checkBatch(batch)
	if err != nil {
		return AppendResult{}, nil, err
	}
	if epoch < 0 {
		return AppendResult{}, nil, fmt.Errorf("%w: negative epoch %d", ErrInvalidBatch, epoch)
	}
	l.appendMu.Lock()
	res, gen, err := l.writeLocked(batch, func(next int64, lastEpoch int32) error {
		if epoch < lastEpoch {
			return fmt.Errorf("%w: %d < %d", ErrEpochRegression, epoch, lastEpoch)
		}
		// The checksum of the records, from the check, makes the new
		// CRC without reading them again.
		batch.StampSum(next, epoch, l.opts.Now().UnixMilli(), sum)
		return nil
	})
	l.appendMu.Unlock()
	if err != nil {
		return AppendResult{}, nil, err
	}
	return res, l.durable(res.NextOffset, gen), nil
}

// AppendExact appends a batch exactly as a leader stamped it: its base
// offset must be the log end offset (ErrOffsetMismatch otherwise) and its
// epoch no lower than the log's last epoch (ErrEpochRegression). It returns
// once the batch is durable, and the other errors of Append.
func (l *Log) AppendExact(ctx context.Context, batch record.Batch) (AppendResult, error) {
	res, durable, err := l.WriteExact(batch)
	if err != nil {
		return AppendResult{}, err
	}
	return res, durable(ctx)
}

// WriteExact is AppendExact without the wait, as Write is to Append.
func (l *Log) WriteExact(batch record.Batch) (AppendResult, Durable, error) {
	if _, err := l.checkBatch(batch); err != nil {
		return AppendResult{}, nil, err
	}
	l.appendMu.Lock()
	res, gen, err := l.writeLocked(batch, func(next int64, lastEpoch int32) error {
		if batch.BaseOffset() != next {
			return fmt.Errorf("%w: batch at %d, log ends at %d", ErrOffsetMismatch, batch.BaseOffset(), next)
		}
		if batch.LeaderEpoch() < lastEpoch {
			return fmt.Errorf("%w: %d < %d", ErrEpochRegression, batch.LeaderEpoch(), lastEpoch)
		}
		return nil
	})
	l.appendMu.Unlock()
	if err != nil {
		return AppendResult{}, nil, err
	}
	return res, l.durable(res.NextOffset, gen), nil
}

func (l *Log) durable(target int64, gen uint64) Durable {
	return func(ctx context.Context) error { return l.waitDurable(ctx, target, gen) }
}

// AppendResult says where an appended batch landed.
type AppendResult struct {
	BaseOffset  int64
	NextOffset  int64 // offset after the batch's last record
	LeaderEpoch int32
	AppendTime  int64 // Unix milliseconds
}

func (l *Log) checkBatch(batch record.Batch) (record.Sum, error) {
	if len(batch) > l.opts.MaxBatchBytes {
		return record.Sum{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(batch), l.opts.MaxBatchBytes)
	}
	sum, err := batch.ValidateSum()
	if err != nil {
		return record.Sum{}, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return sum, nil
}

// zeroFillBelow is the size of the average group commit below which the
// active segment is preallocated with written zeros rather than fallocate.
const zeroFillBelow = 32 << 10

// zeroFill reports whether the next stretch of the active segment (see
// preallocEnd) should be preallocated by writing zeros, and starts
// measuring the stretch after it. An fsync of data written into
// fallocate'd space also commits the conversion of those blocks from
// unwritten to written, an inode update; over zeros that are on disk
// already it has no metadata to commit. On the disk of docs/benchmarks.md,
// three logs syncing 6 KiB each at once took 0.27-0.29 ms per fsync over
// written zeros, 0.39-0.44 ms over fallocate'd space. The zeros cost a
// second write of every byte, which pays when fsyncs are many and small
// (synchronous producers) and not when they are few and large (pipelined
// producers, bound by the disk's bandwidth). So the choice follows the
// bytes per fsync of the stretch just filled; the log's first stretch is
// fallocate'd. A stretch no longer than zeroFillBelow (a new segment's
// first five, 4 to 32 KiB long) cannot show more bytes per fsync than it
// holds, unless one batch is larger: pipelined producers may get written
// zeros for the stretch after each, at most 124 KiB of them per segment.
// The caller holds appendMu.
func (l *Log) zeroFill() bool {
	syncs := l.syncs.Load()
	n := syncs - l.prealloc.syncs
	zeros := n > 0 && l.prealloc.bytes/int64(n) < zeroFillBelow
	l.prealloc.bytes, l.prealloc.syncs = 0, syncs
	if preallocHook != nil {
		preallocHook(zeros)
	}
	return zeros
}

// preallocHook, when set by a test, is told each choice zeroFill makes.
var preallocHook func(zeros bool)

// writeLocked checks and stamps the batch through prepare, rolls the segment
// if needed, and writes the batch. The caller holds appendMu.
func (l *Log) writeLocked(batch record.Batch, prepare func(next int64, lastEpoch int32) error) (AppendResult, uint64, error) {
	l.mu.RLock()
	closed, failed := l.mu.closed, l.mu.failed
	next, lastEpoch, gen := l.mu.next, l.mu.lastEpoch, l.mu.gen
	active := l.mu.segments[len(l.mu.segments)-1]
	size, firstTime := active.size, active.firstTime
	l.mu.RUnlock()
	switch {
	case closed:
		return AppendResult{}, 0, ErrClosed
	case failed != nil:
		return AppendResult{}, 0, fmt.Errorf("%w: %w", ErrFailed, failed)
	}
	if err := prepare(next, lastEpoch); err != nil {
		return AppendResult{}, 0, err
	}
	// Age is measured in append times, not by the local clock: a replica
	// copying batches its leader appended long ago must not roll a segment
	// for every batch. For the leader's own Append both are its clock.
	//
	// A roll, a preallocation or a write that fails for want of space
	// leaves the files as they were (or as a crash could leave them, which
	// recovery handles) and the log taking appends: the append fails with
	// ErrNoSpace, and the next one does the same work again. Any other
	// failure fails the log.
	policy := l.policy.Load()
	if size > 0 && (size+int64(len(batch)) > policy.SegmentBytes ||
		batch.AppendTime()-firstTime >= policy.SegmentAge.Milliseconds()) {
		var err error
		if active, err = l.rollLocked(active, next); err != nil {
			return AppendResult{}, 0, err
		}
		size = 0
	}
	if err := active.preallocate(size+int64(len(batch)), policy.SegmentBytes, l.zeroFill); err != nil {
		return AppendResult{}, 0, l.failUnlessNoSpace(err)
	}
	if _, err := active.f.WriteAt(batch, size); err != nil {
		err = fmt.Errorf("write segment %d: %w", active.base, err)
		if !isNoSpace(err) {
			return AppendResult{}, 0, l.failWith(err)
		}
		// A write cut short leaves part of the batch after the data.
		// Cutting the file back to its data (preallocated space and all)
		// makes [size, alloc) empty, so the invariant holds again and the
		// next append preallocates afresh. Until the cut, a crash would
		// find the partial batch after the data: a torn write (a kernel
		// cuts a write short at a block boundary, so the rest of the batch
		// reads as zeros or lies past the end of the file), never
		// acknowledged, which recovery cuts.
		if terr := active.f.Truncate(size); terr != nil {
			return AppendResult{}, 0, l.failWith(fmt.Errorf("%v; cutting the partial write: %w", err, terr))
		}
		active.alloc = size
		return AppendResult{}, 0, markNoSpace(err)
	}
	l.prealloc.bytes += int64(len(batch))
	l.mu.Lock()
	active.noteBatch(size, batch, l.opts.IndexIntervalBytes)
	l.mu.next = batch.NextOffset()
	l.mu.lastEpoch = batch.LeaderEpoch()
	l.mu.Unlock()
	return AppendResult{
		BaseOffset: batch.BaseOffset(), NextOffset: batch.NextOffset(),
		LeaderEpoch: batch.LeaderEpoch(), AppendTime: batch.AppendTime(),
	}, gen, nil
}

// rollLocked makes the active segment durable and whole, persists its index,
// and starts a new segment at next. Because the old segment is fsync'd before
// the new file exists, only the newest segment can ever hold a torn write.
//
// Every step leaves a state that a crash, or the retry of the next append,
// goes on from; a step that fails for want of space leaves the log taking
// appends (ErrNoSpace), with the old segment still active, and the next
// append rolls again:
//   - cutting the old segment's preallocated zeros is a truncation: it
//     needs no space, and if it fails nothing changed;
//   - the old segment's fsync: a failure fails the log. Once it succeeds,
//     everything in the old segment is durable, and published as such;
//   - the index is written to a temporary file renamed over the index
//     file. A failure leaves no index, or the last one, and the index is a
//     cache: a missing one is rebuilt, and the newest segment's is never
//     read. The retry writes it again;
//   - creating the new file: a failure creates nothing;
//   - the directory's fsync: a failure fails the log, with the new segment
//     in it (recovery, or Resume, takes it as an empty newest segment).
func (l *Log) rollLocked(old *segment, next int64) (*segment, error) {
	if err := old.trimToData(); err != nil {
		return nil, l.failUnlessNoSpace(err)
	}
	if err := old.f.Sync(); err != nil {
		return nil, l.failWith(fmt.Errorf("sync segment %d before roll: %w", old.base, err))
	}
	l.mu.Lock()
	if next > l.mu.durable {
		l.mu.durable = next
		l.notifyLocked()
	}
	l.mu.Unlock()
	if err := old.writeIndex(l.fs); err != nil {
		return nil, l.failUnlessNoSpace(err)
	}
	s, err := openSegmentFile(l.fs, l.dir, next, true)
	if err != nil {
		return nil, l.failUnlessNoSpace(err)
	}
	l.mu.Lock()
	l.mu.segments = append(l.mu.segments, s)
	l.mu.Unlock()
	if err := syncDir(l.fs, l.dir); err != nil {
		return nil, l.failWith(err)
	}
	l.logger.Debug("rolled segment", "offset", next, "previous", old.base)
	return s, nil
}

// fail makes the log refuse further appends: after a failed write or fsync
// nothing can be promised about what reached the disk.
func (l *Log) fail(err error) {
	err = markNoSpace(err)
	l.mu.Lock()
	if l.mu.failed == nil {
		l.mu.failed = err
		l.logger.Error("log failed; it refuses appends until resumed or reopened", "err", err)
	}
	l.notifyLocked()
	l.mu.Unlock()
}

// failWith fails the log for err and returns the error the append that
// met it gets.
func (l *Log) failWith(err error) error {
	l.fail(err)
	return fmt.Errorf("%w: %w", ErrFailed, markNoSpace(err))
}

// failUnlessNoSpace fails the log for err, unless err is for want of
// space: the caller left the files as they were, and the log goes on.
func (l *Log) failUnlessNoSpace(err error) error {
	if isNoSpace(err) {
		return markNoSpace(err)
	}
	return l.failWith(err)
}

// Failed returns why the log refuses appends (the write or fsync that
// failed, an error that matches ErrNoSpace if a full disk caused it), or
// nil while it takes them.
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.failed
}

func (l *Log) notifyLocked() {
	close(l.mu.changed)
	l.mu.changed = make(chan struct{})
}

// waitDurable returns once offsets below target are fsync'd. The first
// waiter that finds no fsync running runs one for everyone written so far.
func (l *Log) waitDurable(ctx context.Context, target int64, gen uint64) error {
	for {
		l.mu.RLock()
		durable, failed, closed := l.mu.durable, l.mu.failed, l.mu.closed
		// Truncations since the write cut it off only if one went below it.
		cut := l.mu.gen != gen && target > slices.Min(l.mu.cuts[gen:])
		l.mu.RUnlock()
		switch {
		case cut:
			return ErrTruncated
		case durable >= target:
			return nil
		case failed != nil:
			return fmt.Errorf("%w: %w", ErrFailed, failed)
		case closed:
			return ErrClosed
		}
		l.syncMu.Lock()
		if !l.syncMu.syncing {
			l.syncMu.syncing = true
			l.syncMu.done = make(chan struct{})
			done := l.syncMu.done
			l.syncMu.Unlock()
			l.syncOnce()
			l.syncMu.Lock()
			l.syncMu.syncing = false
			close(done)
			l.syncMu.Unlock()
			continue
		}
		done := l.syncMu.done
		l.syncMu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			l.finish(target, gen)
			return ctx.Err()
		}
	}
}

// syncHook, when set by a test, is called at the start of every group
// commit fsync.
var syncHook func()

// groupCommitSync is how syncOnce fsyncs the active segment: File.Sync.
// Only a test replaces it, to show that the crash tests notice a group
// commit that does not fsync.
var groupCommitSync = File.Sync

// syncOnce fsyncs the active segment and publishes everything written
// before it started as durable. Older segments were fsync'd when they rolled.
// finish makes target durable in the background, for a waiter that gave
// up while an fsync it may not be covered by ran: group commit is driven
// by waiters, so without it a write whose waiter went away (a client that
// hung up) could stay unsynced until the next write, and a leader's high
// watermark, which waits for the leader's durable end, would stop below
// it. One finisher runs for the highest target at a time.
func (l *Log) finish(target int64, gen uint64) {
	l.syncMu.Lock()
	if l.syncMu.finishing >= target || l.syncMu.closing {
		l.syncMu.Unlock()
		return
	}
	l.syncMu.finishing = target
	l.finishers.Add(1)
	l.syncMu.Unlock()
	go func() {
		defer l.finishers.Done()
		l.waitDurable(context.Background(), target, gen)
		l.syncMu.Lock()
		if l.syncMu.finishing == target {
			l.syncMu.finishing = 0
		}
		l.syncMu.Unlock()
	}()
}

func (l *Log) syncOnce() {
	if syncHook != nil {
		syncHook()
	}
	l.mu.RLock()
	active := l.mu.segments[len(l.mu.segments)-1]
	upTo, gen := l.mu.next, l.mu.gen
	l.mu.RUnlock()
	start := time.Now()
	err := groupCommitSync(active.f)
	if l.opts.OnSync != nil && err == nil {
		l.opts.OnSync(time.Since(start))
	}
	if err != nil && errors.Is(err, os.ErrClosed) {
		return // closed, rolled away or truncated meanwhile; the waiter rechecks
	}
	if err != nil {
		l.fail(fmt.Errorf("fsync segment %d: %w", active.base, err))
		return
	}
	l.syncs.Add(1)
	l.mu.Lock()
	if l.mu.gen == gen && upTo > l.mu.durable {
		l.mu.durable = upTo
		l.notifyLocked()
	}
	l.mu.Unlock()
}

// Read returns whole batches starting with the one that holds offset, up to
// about maxBytes (at least one batch, however large), from one segment, and
// only batches whose base offset is below limit and that are durable. The
// first batch may begin before offset; readers skip those records. At the
// end of the readable log it returns no bytes and no error. buf, if not nil,
// is used for the result when it is large enough.
//
// It returns ErrOffsetOutOfRange for an offset below the log start or above
// the log end, and ErrClosed.
func (l *Log) Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		out, err := l.readOnce(offset, maxBytes, limit, buf)
		if errors.Is(err, os.ErrClosed) && attempt < 3 {
			continue // the segment was deleted or truncated under us; look again
		}
		return out, err
	}
}

// readSpot is where a read at an offset starts, as the log held it when
// it looked (locateLocked).
type readSpot struct {
	s       *segment
	pos     int64 // the index entry at or below the offset, in s
	indexed int64 // the base offset the index claims for pos (see indexMiss)
	size    int64 // s's size
	end     int64 // the read stops below it: the limit, or the durable end
}

// locateLocked finds the segment of a read at offset that stops below
// limit, for a caller that holds l.mu for reading. ok is false when
// there is nothing to read (offset at or past the end); an offset outside
// the log is ErrOffsetOutOfRange.
func (l *Log) locateLocked(offset, limit int64) (at readSpot, ok bool, err error) {
	if l.mu.closed {
		return readSpot{}, false, ErrClosed
	}
	start, end := l.mu.segments[0].base, min(limit, l.mu.durable)
	if offset < start || offset > l.mu.next {
		return readSpot{}, false, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, start, l.mu.next)
	}
	if offset >= end {
		return readSpot{}, false, nil
	}
	i := sort.Search(len(l.mu.segments), func(i int) bool { return l.mu.segments[i].base > offset }) - 1
	s := l.mu.segments[i]
	pos, indexed := s.lookup(offset)
	return readSpot{s: s, pos: pos, indexed: indexed, size: s.size, end: end}, true, nil
}

func (l *Log) readOnce(offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error) {
	l.mu.RLock()
	at, ok, err := l.locateLocked(offset, limit)
	l.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if !ok {
		return buf[:0], nil
	}
	s, pos, indexed, size, end := at.s, at.pos, at.indexed, at.size, at.end

	// Walk batch headers from the index entry to the batch holding offset.
	for first := true; ; first = false {
		h, err := readHeader(s.f, pos, l.opts.MaxBatchBytes)
		if first && indexMiss(pos, h, err, indexed) {
			pos = 0 // a wrong index entry; walk from the segment's start
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
		}
		if h.next > offset {
			break
		}
		pos += h.size
		if pos >= size {
			return buf[:0], nil
		}
	}
	n := min(int64(max(maxBytes, record.HeaderSize)), size-pos)
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := s.f.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
	}
	// Keep whole batches below end; read the first one whole if it is larger.
	// The header walk above framed the first batch, so keep only grows.
	var keep int
	for keep < len(buf) {
		fs, err := record.FrameSize(buf[keep:], l.opts.MaxBatchBytes)
		if err != nil || record.Batch(buf[keep:]).BaseOffset() >= end {
			break // a header cut by the read size, or not readable yet
		}
		if keep+fs > len(buf) {
			if keep == 0 {
				big := make([]byte, fs)
				if _, err := s.f.ReadAt(big, pos); err != nil {
					return nil, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
				}
				if !record.Batch(big).ChecksumOK() {
					return nil, corruptf("%s: batch at position %d fails its checksum on read", s.path, pos)
				}
				s.noteChecked(pos, pos+int64(fs))
				return big, nil
			}
			break
		}
		// Older segments are not rescanned on open, so reads check what they
		// serve: a damaged batch never reaches a consumer or a follower.
		if !record.Batch(buf[keep : keep+fs]).ChecksumOK() {
			if keep > 0 {
				break // serve the good batches before it; the next read reports it
			}
			return nil, corruptf("%s: batch at position %d fails its checksum on read", s.path, pos)
		}
		keep += fs
	}
	s.noteChecked(pos, pos+int64(keep))
	return buf[:keep], nil
}

// Wait blocks until the log holds a durable record at offset, the context
// ends, or the log is closed (ErrClosed). Long-polling readers use it.
func (l *Log) Wait(ctx context.Context, offset int64) error {
	for {
		l.mu.RLock()
		durable, closed, ch := l.mu.durable, l.mu.closed, l.mu.changed
		l.mu.RUnlock()
		if closed {
			return ErrClosed
		}
		if durable > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Changed returns a channel that is closed the next time the durable end of
// the log moves, the log is truncated, fails or closes.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.changed
}

// LogStartOffset is the first offset the log holds. It only moves forward,
// by retention.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.segments[0].base
}

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.next
}

// DurableEndOffset is the offset below which every record is fsync'd.
func (l *Log) DurableEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.durable
}

// LastEpoch is the leader epoch of the last batch, or -1 for an empty log.
func (l *Log) LastEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.lastEpoch
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Size is the number of bytes in the log's segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.mu.segments {
		n += s.size
	}
	return n
}

// SegmentCount is the number of segment files.
func (l *Log) SegmentCount() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.segments)
}

// Close fsyncs what was written and closes the files. Appends already
// written become durable and succeed; waiters on new data return ErrClosed.
// Close is idempotent.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	segs := l.mu.segments
	failed := l.mu.failed
	l.mu.Unlock()
	var errs []error
	if failed == nil {
		// A closed log's files end at their data, as if never preallocated.
		if err := segs[len(segs)-1].trimToData(); err != nil {
			errs = append(errs, err)
		} else if err := segs[len(segs)-1].f.Sync(); err != nil {
			errs = append(errs, err)
		} else {
			l.mu.Lock()
			l.mu.durable = l.mu.next
			l.mu.Unlock()
		}
	}
	l.mu.Lock()
	l.mu.closed = true
	l.notifyLocked()
	l.mu.Unlock()
	for _, s := range segs {
		if err := s.retire(); err != nil {
			errs = append(errs, err)
		}
	}
	l.syncMu.Lock()
	l.syncMu.closing = true
	l.syncMu.Unlock()
	l.finishers.Wait() // they see the log closed and return
	return markNoSpace(errors.Join(errs...))
}
