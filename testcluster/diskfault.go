package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gostream/record"
)

// A node's disk after kill -9 holds everything its process wrote: the page
// cache survives the process. A machine crash does not, and these faults
// make the newest segment of a stopped node's replica look the way a
// machine crash can leave it, before the node restarts. They work on the
// files alone, in the batch format of package record (the format clients
// see too); the node's storage package is not imported.
//
// A crash only ever leaves bytes of a write missing: the file ends before
// them, or they read as zeros (space the file system had allocated, or
// sectors never written). A disk writes a 512-byte sector, aligned to file
// position, whole or not at all. So these faults never write anything but
// zeros, zero whole sectors only, and put zeros after a cut only where the
// cut ends at a sector or batch boundary or the sectors before it are
// zeroed: a batch whose bytes are all still there but damaged is
// corruption, which storage rightly refuses, not a crash.

// DiskFault is a kind of damage a machine crash can do to the newest
// segment of a replica: the only one that can hold bytes never fsync'd.
type DiskFault int

const (
	// LoseUnsynced cuts the newest segment back to a random length no
	// shorter than the durable bound, sometimes zeroes the sectors before
	// the cut from a random sector boundary above the bound on (written
	// data that never reached the disk), and appends 1 to 8 KiB of zeros
	// where a crash can leave them (blocks the file system had allocated
	// but never filled).
	LoseUnsynced DiskFault = iota
	// TornTail tears the last batch of the newest segment, a partial write
	// of it: either the file is cut inside the batch, or, from a sector
	// boundary inside the batch on, the file's sectors read as zeros. It
	// does nothing when any of that batch is at or below the durable bound.
	TornTail
)

// KeepAll, given as keep, keeps every record the replica holds.
const KeepAll int64 = math.MaxInt64

// maxAppended bounds the zeros LoseUnsynced appends.
const maxAppended = 8 << 10

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// ErrNodeRunning means disk damage was asked for on a node whose process
// runs (or is paused): its files may change under the damage.
var ErrNodeRunning = errors.New("testcluster: node is running")

func (f DiskFault) String() string {
	switch f {
	case LoseUnsynced:
		return "lose-unsynced"
	case TornTail:
		return "torn-tail"
	}
	return "disk-fault(" + strconv.Itoa(int(f)) + ")"
}

// DiskDamage describes what was done to one replica, for the harness log.
type DiskDamage struct {
	Dir     string // the replica's log directory
	Segment string // the file name of the damaged (newest) segment
	Kind    DiskFault
	OldSize int64 // the segment's size before
	CutTo   int64 // the length it was cut to (OldSize if not cut)
	// ZeroFrom, when below CutTo, is the sector boundary from which the
	// bytes up to CutTo were zeroed; CutTo when none were.
	ZeroFrom int64
	// Appended is the number of zero bytes written after the cut.
	Appended int64
	// Keep is the offset below which every record was kept, or KeepAll.
	Keep int64
	// Skipped, if not empty, says why nothing was done.
	Skipped string
}

// String describes the damage in one line.
func (d DiskDamage) String() string {
	keep := "keep all"
	if d.Keep != KeepAll {
		keep = fmt.Sprintf("keep offsets < %d", d.Keep)
	}
	head := fmt.Sprintf("%s %s (%s)", d.Kind, filepath.Join(d.Dir, d.Segment), keep)
	if d.Skipped != "" {
		return head + ": skipped: " + d.Skipped
	}
	s := fmt.Sprintf("%s: cut %d -> %d bytes", head, d.OldSize, d.CutTo)
	if d.ZeroFrom < d.CutTo {
		s += fmt.Sprintf(", zeroed [%d, %d)", d.ZeroFrom, d.CutTo)
	}
	if d.Appended > 0 {
		s += fmt.Sprintf(", appended %d zero bytes", d.Appended)
	}
	return s
}

// DamageReplica applies fault to the newest segment of the replica in dir
// (a replica log directory). keep is the offset below which every record
// must survive; KeepAll keeps every record there is, and a keep past the
// replica's last record means the same. rng (not nil) chooses lengths and
// junk, so a harness seed replays the same damage.
//
// The cut never goes below the end of the batch that holds offset keep-1
// when that batch is in the newest segment; when keep-1 lies in an older
// segment (or keep is 0) the newest segment may be cut to nothing. Older
// segments, index files and quarantine/ are never touched.
func DamageReplica(dir string, keep int64, fault DiskFault, rng *rand.Rand) (DiskDamage, error) {
	d := DiskDamage{Dir: dir, Kind: fault, Keep: keep}
	if keep < 0 {
		return d, fmt.Errorf("testcluster: negative keep %d", keep)
	}
	if fault != LoseUnsynced && fault != TornTail {
		return d, fmt.Errorf("testcluster: unknown disk fault %d", int(fault))
	}
	base, err := newestSegment(dir)
	if err != nil {
		return d, err
	}
	d.Segment = fmt.Sprintf("%020d.log", base)
	path := filepath.Join(dir, d.Segment)
	seg, err := scanSegment(path)
	if err != nil {
		return d, fmt.Errorf("scan %s: %w", path, err)
	}
	d.OldSize, d.CutTo, d.ZeroFrom = seg.size, seg.size, seg.size
	bound := seg.bound(keep)

	switch fault {
	case LoseUnsynced:
		d.CutTo = bound + rng.Int63n(seg.size-bound+1)
		if rng.Intn(3) == 0 {
			// A crash often loses whole writes: end on a batch boundary.
			ends := []int64{bound}
			for _, b := range seg.batches {
				if b.end > bound {
					ends = append(ends, b.end)
				}
			}
			d.CutTo = ends[rng.Intn(len(ends))]
		}
		d.ZeroFrom = d.CutTo
		if first := roundUp(bound); first < d.CutTo && rng.Intn(2) == 0 {
			d.ZeroFrom = first + rng.Int63n((d.CutTo-first)/sectorSize+1)*sectorSize
		}
		// Zeros after the cut need the write it ends to have lost whole
		// sectors: else a batch could read whole, with zeros in place of
		// part of a sector, which no crash leaves.
		if d.ZeroFrom < d.CutTo || d.CutTo%sectorSize == 0 || seg.batchBoundary(d.CutTo, bound) {
			d.Appended = 1 + rng.Int63n(maxAppended)
		}
	case TornTail:
		if len(seg.batches) == 0 {
			d.Skipped = "no whole batch in the segment"
			return d, nil
		}
		last := seg.batches[len(seg.batches)-1]
		if last.start < bound {
			d.Skipped = fmt.Sprintf("the last batch, offsets [%d, %d), is not wholly above the kept records", last.base, last.next)
			return d, nil
		}
		if inside := roundUp(last.start + 1); inside < last.end && rng.Intn(2) == 0 {
			// Its first sectors reached the disk, the rest read as zeros,
			// to the end of the file.
			d.ZeroFrom = inside + rng.Int63n((last.end-1-inside)/sectorSize+1)*sectorSize
			break
		}
		// At least one byte of the batch stays and at least one goes.
		d.CutTo = last.start + 1 + rng.Int63n(last.end-last.start-1)
		d.ZeroFrom = d.CutTo
	}

	if err := rewriteTail(path, d.CutTo, d.ZeroFrom, d.Appended); err != nil {
		return d, err
	}
	return d, nil
}

// roundUp is the first sector boundary at or after pos.
func roundUp(pos int64) int64 { return (pos + sectorSize - 1) / sectorSize * sectorSize }

// DamageNode applies fault to every replica of topic on node n, which must
// not be running (ErrNodeRunning): kill or stop it first. keep[partition]
// is the offset below which every record of that partition must survive; a
// partition missing from keep keeps every whole batch it holds (LoseUnsynced
// then cuts at most a tail that was already torn before it appends, and
// TornTail skips it). A node that holds no
// replica of topic gets no damage. On an error it returns the damage done
// so far.
func DamageNode(n *Node, topic string, keep map[int32]int64, fault DiskFault, rng *rand.Rand) ([]DiskDamage, error) {
	if n.Running() {
		return nil, fmt.Errorf("damage node %d: %w", n.ID, ErrNodeRunning)
	}
	if n.DataDir == "" {
		return nil, fmt.Errorf("testcluster: node %d has no data directory", n.ID)
	}
	parts, err := n.Partitions(topic)
	if err != nil {
		return nil, fmt.Errorf("damage node %d: %w", n.ID, err)
	}
	var done []DiskDamage
	for _, p := range parts {
		k, ok := keep[p]
		if !ok {
			k = KeepAll
		}
		d, err := DamageReplica(n.ReplicaDir(topic, p), k, fault, rng)
		if err != nil {
			return done, fmt.Errorf("damage node %d partition %d: %w", n.ID, p, err)
		}
		done = append(done, d)
	}
	return done, nil
}

// segmentFile is one segment file of a replica directory.
type segmentFile struct {
	base int64 // the offset it starts at, from its name
	path string
}

// segmentFiles lists the segment files in dir, oldest first, naming files
// as the storage engine does: twenty digits and ".log".
func segmentFiles(dir string) ([]segmentFile, error) {
	entries, err := os.ReadDir(dir) // sorted by name: by base offset
	if err != nil {
		return nil, err
	}
	var out []segmentFile
	for _, e := range entries {
		num, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(num) != 20 || !e.Type().IsRegular() {
			continue
		}
		base, err := strconv.ParseInt(num, 10, 64)
		if err != nil || base < 0 {
			continue
		}
		out = append(out, segmentFile{base, filepath.Join(dir, e.Name())})
	}
	return out, nil
}

// newestSegment returns the base offset of the newest segment file in dir.
func newestSegment(dir string) (int64, error) {
	segs, err := segmentFiles(dir)
	if err != nil {
		return 0, err
	}
	if len(segs) == 0 {
		return 0, fmt.Errorf("testcluster: no segment file in %s", dir)
	}
	return segs[len(segs)-1].base, nil
}

// batchSpan is where one batch lies in a segment file, and its offsets.
type batchSpan struct {
	start, end int64 // file positions
	base, next int64 // offsets
}

// segmentScan is what a segment file holds: its whole, valid batches from
// the start, and its size (which may run past them, into a torn tail).
type segmentScan struct {
	batches []batchSpan
	size    int64
}

// bound is the lowest file position a cut may go to so that every record
// below keep survives: the end of the last batch that holds an offset
// below keep, or 0 when no batch of this segment does.
func (s segmentScan) bound(keep int64) int64 {
	var pos int64
	for _, b := range s.batches {
		if b.base >= keep {
			break
		}
		pos = b.end
	}
	return pos
}

// batchBoundary reports whether pos is where a batch of s ends, or the
// bound (which is 0 or the end of a batch).
func (s segmentScan) batchBoundary(pos, bound int64) bool {
	if pos == bound {
		return true
	}
	for _, b := range s.batches {
		if b.end == pos {
			return true
		}
	}
	return false
}

// scanSegment reads the batches of the segment file at path, from the
// start up to the first one that is incomplete or not valid.
func scanSegment(path string) (segmentScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return segmentScan{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segmentScan{}, err
	}
	s := segmentScan{size: fi.Size()}
	r := bufio.NewReaderSize(f, 1<<20)
	var pos int64
	var buf []byte
	for {
		prefix, err := r.Peek(record.LengthPrefix)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return s, nil // the end, or a header cut short
			}
			return s, err
		}
		n, err := record.FrameSize(prefix, record.MaxBatchSize)
		if err != nil {
			return s, nil
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return s, nil
			}
			return s, err
		}
		b := record.Batch(buf)
		if b.Validate() != nil {
			return s, nil
		}
		s.batches = append(s.batches, batchSpan{start: pos, end: pos + int64(n), base: b.BaseOffset(), next: b.NextOffset()})
		pos += int64(n)
	}
}

// rewriteTail cuts the file at path to size bytes, zeroes its bytes from
// zeroFrom up to size, writes appended zero bytes after them and makes it
// durable.
func rewriteTail(path string, size, zeroFrom, appended int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("cut %s to %d bytes: %w", path, size, err)
	}
	if zeroFrom < size {
		if _, err := f.WriteAt(make([]byte, size-zeroFrom), zeroFrom); err != nil {
			f.Close()
			return fmt.Errorf("zero %s from %d: %w", path, zeroFrom, err)
		}
	}
	if _, err := f.WriteAt(make([]byte, appended), size); err != nil {
		f.Close()
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}
