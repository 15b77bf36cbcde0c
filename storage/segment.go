package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"gostream/record"
)

const (
	logSuffix      = ".log"
	indexSuffix    = ".index"
	nameDigits     = 20
	indexEntrySize = 8 // u32 relative offset, u32 position
)

// segment is one file of a log, holding the batches from base up to next.
// Its mutable fields are guarded by the owning Log's mu; f is only written
// under the Log's appendMu and read with ReadAt by anyone holding a
// reference.
type segment struct {
	base int64
	path string
	f    File

	size      int64        // bytes of whole batches in the file
	alloc     int64        // bytes in the file: size, then zeros preallocated for appends (see preallocate)
	next      int64        // offset after the last batch
	index     []indexEntry // sparse: relative offset -> file position
	indexedAt int64        // position of the last indexed batch, -1 for none
	firstTime int64        // append time of the first batch, ms; 0 when empty
	lastTime  int64        // append time of the last batch, ms

	// checked is the file position below which every batch has been
	// checked (framing and checksum) since the log was opened: allChecked
	// for a segment this process writes or whose file recovery scanned
	// whole, else what reads have checked from the start (ReadRange lends
	// only checked batches).
	checked atomic.Int64
	// lent is the ranges of the file lent by ReadRange and not yet given
	// back.
	lent lentRanges
}

type indexEntry struct {
	rel uint32
	pos uint32
}

func segmentName(base int64) string {
	return fmt.Sprintf("%0*d", nameDigits, base)
}

// listSegments returns the base offsets of the segment files in dir, sorted.
func listSegments(fsys FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, logSuffix) || len(name) != nameDigits+len(logSuffix) {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
		if err != nil || base < 0 {
			continue
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// noteBatch records a batch written at pos in the segment's summary and
// sparse index. Callers hold the Log's mu (or own the segment exclusively).
func (s *segment) noteBatch(pos int64, b record.Batch, interval int64) {
	if s.indexedAt < 0 || pos-s.indexedAt >= interval {
		s.index = append(s.index, indexEntry{rel: uint32(b.BaseOffset() - s.base), pos: uint32(pos)})
		s.indexedAt = pos
	}
	if s.firstTime == 0 {
		s.firstTime = b.AppendTime()
	}
	s.lastTime = b.AppendTime()
	s.size = pos + int64(len(b))
	s.next = b.NextOffset()
}

// lookup returns the position of the last indexed batch whose base offset is
// at most offset, and the base offset the index claims for it. Callers check
// that claim against the batch header they read there: a loaded index is a
// cache that can be wrong (see indexMiss).
func (s *segment) lookup(offset int64) (pos, base int64) {
	rel := offset - s.base
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].rel) > rel })
	if i == 0 {
		return 0, s.base
	}
	return int64(s.index[i-1].pos), s.base + int64(s.index[i-1].rel)
}

// indexMiss reports whether the header read (h, err) at an index position
// pos does not hold the batch with base offset want that the index claims.
// Position 0 always holds the segment's first batch, which Open checked.
func indexMiss(pos int64, h batchHeader, err error, want int64) bool {
	return pos > 0 && (err != nil || h.base != want)
}

// The active segment is preallocated ahead of its data, a stretch at a
// time, and the stretches grow with the segment: the file ends at the
// smallest power of two from minPreallocBytes up that holds its data, and
// past preallocBytes at the next multiple of preallocBytes (never past the
// segment size, unless one batch is larger). So a segment that holds one
// small batch takes one filesystem block (a node with many quiet
// partitions does not hold 256 KiB for each), while a busy one
// preallocates seven times on its way to 256 KiB (4, 8, ... 256 KiB), then
// once per 256 KiB as before. Each preallocation costs the next fsync a
// size change to commit; the fsyncs in between commit none.
//
// Writing into blocks the file already has needs no change to the file's
// size, so the fsync that follows has less metadata to commit. On ext4, a
// 1 KiB write+fsync measured: append 0.17-0.22 ms, into fallocate'd
// blocks 0.15-0.17 ms, over written zeros 0.11-0.15 ms. Written zeros
// cost a second write of every byte (10-20% of the throughput of 256 KiB
// appends with fsync), fallocate nothing measurable: the Log chooses
// between them by the size of its group commits (Log.zeroFill), once per
// stretch. A log's first stretch is fallocate'd; the shorter the first
// stretches, the sooner a synchronous producer writes over zeros (one
// producer's p50 over 2,000 1 KiB records: 0.346/0.340 ms with 256 KiB
// stretches from the first write, 0.373/0.354 ms with 1 MiB). With 4 KiB
// first stretches it does once its first 4 KiB are written.
const (
	minPreallocBytes = 4 << 10   // one block of ext4 and most filesystems
	preallocBytes    = 256 << 10 // the largest stretch
)

// preallocEnd is where the active segment's file ends once it is
// preallocated to hold need bytes: see minPreallocBytes. It is never
// below need, nor past limit (the segment size) unless need is.
func preallocEnd(need, limit int64) int64 {
	end := int64(minPreallocBytes)
	for end < need && end < preallocBytes {
		end *= 2
	}
	if end < need {
		end = (need + preallocBytes - 1) / preallocBytes * preallocBytes
	}
	return max(min(end, limit), need)
}

// zeroChunk is the source of written zeros; it is never written to.
var zeroChunk [preallocBytes]byte

// preallocate makes sure the file holds at least need bytes, extending it
// from alloc up to preallocEnd(need, limit) with space that reads as
// zeros: written zeros if zeros() says so or the filesystem cannot
// fallocate, else fallocate'd space. zeros is asked only when space is
// added. It does not fsync: the next group commit makes the new size (and
// any zeros) durable with the data written into it. The caller holds the
// Log's appendMu. When it fails for want of space (an error matching
// ENOSPC), the file is as it was: it ends at alloc.
// Invariant: bytes [size, alloc) of the active segment read as zeros,
// which is what recovery relies on to tell free space from a torn write.
func (s *segment) preallocate(need, limit int64, zeros func() bool) error {
	if need <= s.alloc {
		return nil
	}
	err := s.extend(need, limit, zeros)
	if err == nil || !isNoSpace(err) {
		return err
	}
	// Out of space part way, the file may have grown (fallocate can
	// allocate some blocks before it fails, and some zeros may have been
	// written): give the space back so that the file ends at alloc again,
	// and the next append tries afresh. A truncation needs no space. Should
	// it fail, the file's size is unknown, and so the error must fail the
	// log: it no longer matches ENOSPC.
	if terr := s.f.Truncate(s.alloc); terr != nil {
		return fmt.Errorf("%v; cutting it back to %d bytes: %w", err, s.alloc, terr)
	}
	return err
}

// extend is preallocate's work; it leaves alloc as it was when it fails.
func (s *segment) extend(need, limit int64, zeros func() bool) error {
	target := preallocEnd(need, limit)
	if !zeros() {
		err := s.f.Allocate(s.alloc, target-s.alloc)
		if err == nil {
			s.alloc = target
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("preallocate segment %d: %w", s.base, err)
		}
	}
	for pos := s.alloc; pos < target; {
		n := min(target-pos, preallocBytes)
		if _, err := s.f.WriteAt(zeroChunk[:n], pos); err != nil {
			return fmt.Errorf("preallocate segment %d: %w", s.base, err)
		}
		pos += n
	}
	s.alloc = target
	return nil
}

// trimToData cuts the zeros preallocated after the data, so that a segment
// that is closed or rolled ends exactly at its last batch. It does not
// fsync.
func (s *segment) trimToData() error {
	if s.alloc == s.size {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("trim segment %d to its data: %w", s.base, err)
	}
	s.alloc = s.size
	return nil
}

// nonZeroEnd returns the position just after the last byte in [from, to)
// of f that is not zero, or from if they all are.
func nonZeroEnd(f File, from, to int64) (int64, error) {
	buf := make([]byte, min(to-from, 64<<10))
	end := from
	for pos := from; pos < to; {
		n := min(int64(len(buf)), to-pos)
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				end = pos + i + 1
				break
			}
		}
		pos += n
	}
	return end, nil
}

// batchHeader is the part of a batch header that reads need.
type batchHeader struct {
	base, next int64
	size       int64
	epoch      int32
	appendTime int64
}

// headerBufs holds buffers for one batch header. A buffer passed to a
// File's ReadAt, an interface method, escapes to the heap: reads of
// headers take one from here rather than allocating one each.
var headerBufs = sync.Pool{New: func() any { return new([record.HeaderSize]byte) }}

func getHeaderBuf() *[record.HeaderSize]byte  { return headerBufs.Get().(*[record.HeaderSize]byte) }
func putHeaderBuf(b *[record.HeaderSize]byte) { headerBufs.Put(b) }

// readHeader reads the batch header at pos without checking the checksum.
func readHeader(f File, pos int64, maxSize int) (batchHeader, error) {
	buf := getHeaderBuf()
	defer putHeaderBuf(buf)
	if _, err := f.ReadAt(buf[:], pos); err != nil {
		return batchHeader{}, err
	}
	n, err := record.FrameSize(buf[:], maxSize)
	if err != nil {
		return batchHeader{}, err
	}
	b := record.Batch(buf[:])
	return batchHeader{
		base: b.BaseOffset(), next: b.NextOffset(), size: int64(n),
		epoch: b.LeaderEpoch(), appendTime: b.AppendTime(),
	}, nil
}

// writeIndex persists the sparse index of s next to its log file. The index
// is a cache: a missing or damaged index is rebuilt from the log.
func (s *segment) writeIndex(fsys FS) error {
	buf := make([]byte, len(s.index)*indexEntrySize)
	for i, e := range s.index {
		binary.BigEndian.PutUint32(buf[i*indexEntrySize:], e.rel)
		binary.BigEndian.PutUint32(buf[i*indexEntrySize+4:], e.pos)
	}
	return writeFileAtomic(fsys, indexPath(s.path), buf)
}

func indexPath(logPath string) string {
	return strings.TrimSuffix(logPath, logSuffix) + indexSuffix
}

// loadIndex reads the persisted index of a closed segment and checks that
// it is plausible: sorted, inside the file, first entry at the start.
func (s *segment) loadIndex(fsys FS) bool {
	buf, err := readFile(fsys, indexPath(s.path))
	if err != nil || len(buf) == 0 || len(buf)%indexEntrySize != 0 {
		return false
	}
	idx := make([]indexEntry, len(buf)/indexEntrySize)
	for i := range idx {
		idx[i] = indexEntry{
			rel: binary.BigEndian.Uint32(buf[i*indexEntrySize:]),
			pos: binary.BigEndian.Uint32(buf[i*indexEntrySize+4:]),
		}
		if i == 0 && (idx[0].rel != 0 || idx[0].pos != 0) {
			return false
		}
		if i > 0 && (idx[i].rel <= idx[i-1].rel || idx[i].pos <= idx[i-1].pos) {
			return false
		}
		if int64(idx[i].pos) >= s.size {
			return false
		}
	}
	s.index = idx
	s.indexedAt = int64(idx[len(idx)-1].pos)
	return true
}

// scanResult says how a scan of a segment ended.
type scanResult struct {
	end     int64 // position after the last valid batch
	next    int64 // offset after the last valid batch
	epoch   int32 // epoch of the last valid batch, or the starting epoch
	stopErr error // nil at a clean end of file; otherwise why the scan stopped
}

// scan reads and fully validates the batches of s from position pos, where
// a batch with base offset next is expected, noting each in the segment.
// It stops at end, the end of the file, or at the first batch that is not
// valid.
func (s *segment) scan(pos, end, next int64, epoch int32, maxSize int, interval int64) (scanResult, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, pos, max(end-pos, 0)), 1<<20)
	var buf []byte
	res := scanResult{end: pos, next: next, epoch: epoch}
	for {
		prefix, err := r.Peek(record.LengthPrefix)
		if errors.Is(err, io.EOF) && len(prefix) == 0 {
			return res, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return res, err
		}
		n, ferr := record.FrameSize(prefix, maxSize)
		if ferr != nil {
			res.stopErr = fmt.Errorf("batch at position %d: %w", res.end, ferr)
			return res, nil
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				res.stopErr = fmt.Errorf("batch at position %d: %w", res.end, record.ErrShort)
				return res, nil
			}
			return res, err
		}
		b := record.Batch(buf)
		if verr := b.Validate(); verr != nil {
			res.stopErr = fmt.Errorf("batch at position %d: %w", res.end, verr)
			return res, nil
		}
		if b.BaseOffset() != res.next {
			return res, corruptf("%s: batch at position %d has base offset %d, want %d", s.path, res.end, b.BaseOffset(), res.next)
		}
		if b.LeaderEpoch() < res.epoch {
			return res, corruptf("%s: batch at position %d has leader epoch %d after epoch %d", s.path, res.end, b.LeaderEpoch(), res.epoch)
		}
		s.noteBatch(res.end, b, interval)
		res.end += int64(n)
		res.next = b.NextOffset()
		res.epoch = b.LeaderEpoch()
	}
}

// sectorSize is the unit a disk writes whole or not at all, aligned to file
// position: a crash can leave a sector of a write unwritten (reading as
// zeros in preallocated space), never part of one. 512 bytes is the
// smallest sector of any disk; a larger one is a run of them.
const sectorSize = 512

// tornReason says why the batch that does not check out at position pos of
// f, a file of end bytes, is what a crash can leave, or returns "" when it
// is not: when the batch lies whole in the file and no sector of it reads
// as zeros, so that it holds every byte it was written with and no crash
// explains its damage. A crash leaves bytes of a write missing (past the
// end of the file) or reading as zeros (space preallocated or allocated
// but never written), a sector at a time.
func tornReason(f File, pos, end int64, maxSize int) (string, error) {
	var hdr [record.HeaderSize]byte
	n := min(end-pos, record.HeaderSize)
	if _, err := f.ReadAt(hdr[:n], pos); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if n < record.HeaderSize {
		return "the file ends inside its header", nil
	}
	size, err := record.FrameSize(hdr[:], maxSize)
	if err != nil {
		return fmt.Sprintf("its frame cannot be read: %v", err), nil
	}
	if pos+int64(size) > end {
		return fmt.Sprintf("its %d bytes run past the end of the file", size), nil
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, pos); err != nil {
		return "", err
	}
	for from := pos; from < pos+int64(size); {
		to := min((from/sectorSize+1)*sectorSize, pos+int64(size))
		if allZero(buf[from-pos : to-pos]) {
			return fmt.Sprintf("its bytes in the sector at position %d read as zeros", from/sectorSize*sectorSize), nil
		}
		from = to
	}
	return "", nil
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// validBatchAfter reports whether any valid batch starts anywhere in
// [from, end) of f after position from. A crash can only damage bytes that
// were never fsync'd, which form a suffix of the file; a valid batch after
// a damaged one means the damage is not such a suffix.
func validBatchAfter(f File, from, end int64, maxSize int) (bool, error) {
	rest := make([]byte, end-from)
	if _, err := f.ReadAt(rest, from); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	for i := 1; i+record.HeaderSize <= len(rest); i++ {
		if m := rest[i+20]; m != record.Magic && m != record.MagicKafka || rest[i+21] != 0 { // cheap filter before framing
			continue
		}
		if _, _, err := record.Frame(rest[i:], maxSize); err == nil {
			return true, nil
		}
	}
	return false, nil
}

func openSegmentFile(fsys FS, dir string, base int64, create bool) (*segment, error) {
	path := filepath.Join(dir, segmentName(base)+logSuffix)
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	f, err := fsys.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	s := &segment{base: base, path: path, f: f, next: base, indexedAt: -1}
	if create {
		s.checked.Store(allChecked)
	}
	return s, nil
}
