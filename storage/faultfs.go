package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// FaultFS is an FS that passes every operation to another FS and fails the
// ones a test picks: for tests of what storage does when the disk fills up
// or an fsync fails. It is safe for concurrent use.
type FaultFS struct {
	base FS
	mu   struct {
		sync.Mutex
		space int64 // bytes of new space left; negative: no limit
		fault func(FaultOp) error
	}
}

// FaultKind names an operation of a FaultFS.
type FaultKind string

// The operations a FaultFS's fault function is asked about.
const (
	FaultCreate   FaultKind = "create" // OpenFile that may create the file
	FaultMkdir    FaultKind = "mkdir"
	FaultWrite    FaultKind = "write"
	FaultAllocate FaultKind = "allocate"
	FaultTruncate FaultKind = "truncate"
	FaultSync     FaultKind = "sync"
	FaultSyncDir  FaultKind = "syncdir"
	FaultRename   FaultKind = "rename"
	FaultRemove   FaultKind = "remove"
)

// FaultOp is an operation of a FaultFS, as its fault function sees it.
type FaultOp struct {
	Kind FaultKind
	Path string // for a rename, the old name
	// Off and Len are the range of a write or an allocation, and the size
	// of a truncation (Off).
	Off, Len int64
}

// ShortWrite, returned by a fault function for a write, makes the write
// write its first N bytes and then fail with Err, as a write cut short
// does.
type ShortWrite struct {
	N   int
	Err error
}

func (w ShortWrite) Error() string { return fmt.Sprintf("short write of %d bytes: %v", w.N, w.Err) }
func (w ShortWrite) Unwrap() error { return w.Err }

// NewFaultFS returns a FaultFS over base with no limit on space and no
// faults.
func NewFaultFS(base FS) *FaultFS {
	f := &FaultFS{base: base}
	f.mu.space = -1
	return f
}

// SetSpace leaves n bytes of new space (no limit when n is negative).
// Writing or allocating past the end of a file uses space; when there is
// not enough, a write writes what fits and then fails with ENOSPC, as a
// short write does, and an allocation allocates what fits and then fails
// with ENOSPC, as fallocate(2) may. Creating a file or a directory fails
// with ENOSPC once no space is left. Nothing gives space back but SetSpace.
func (f *FaultFS) SetSpace(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.space = n
}

// SetFault makes fn see every operation before it is done; an error it
// returns fails the operation, which is then not done (but see
// ShortWrite). nil removes the fault function.
func (f *FaultFS) SetFault(fn func(FaultOp) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.fault = fn
}

func (f *FaultFS) check(op FaultOp) error {
	f.mu.Lock()
	fn := f.mu.fault
	f.mu.Unlock()
	if fn == nil {
		return nil
	}
	if err := fn(op); err != nil {
		var short ShortWrite
		if errors.As(err, &short) {
			return err
		}
		return &fs.PathError{Op: string(op.Kind), Path: op.Path, Err: err}
	}
	return nil
}

// take uses the space needed to make file, now size bytes long, end bytes
// long, and returns how long it may become.
func (f *FaultFS) take(size, end int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	grow := end - size
	if f.mu.space < 0 || grow <= 0 {
		return end
	}
	if grow <= f.mu.space {
		f.mu.space -= grow
		return end
	}
	fit := size + f.mu.space
	f.mu.space = 0
	return fit
}

func (f *FaultFS) spaceLeft() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.space != 0
}

// OpenFile opens a file of the FS below; a create needs space.
func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.check(FaultOp{Kind: FaultCreate, Path: name}); err != nil {
			return nil, err
		}
		if _, err := f.base.Stat(name); errors.Is(err, fs.ErrNotExist) && !f.spaceLeft() {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
		}
	}
	file, err := f.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, path: name}, nil
}

// MkdirAll creates directories on the FS below; creating one needs space.
func (f *FaultFS) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.check(FaultOp{Kind: FaultMkdir, Path: name}); err != nil {
		return err
	}
	if _, err := f.base.Stat(name); errors.Is(err, fs.ErrNotExist) && !f.spaceLeft() {
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOSPC}
	}
	return f.base.MkdirAll(name, perm)
}

// ReadDir is the FS below's.
func (f *FaultFS) ReadDir(name string) ([]fs.DirEntry, error) { return f.base.ReadDir(name) }

// Stat is the FS below's.
func (f *FaultFS) Stat(name string) (fs.FileInfo, error) { return f.base.Stat(name) }

// Rename renames on the FS below.
func (f *FaultFS) Rename(oldname, newname string) error {
	if err := f.check(FaultOp{Kind: FaultRename, Path: oldname}); err != nil {
		return err
	}
	return f.base.Rename(oldname, newname)
}

// Remove removes on the FS below.
func (f *FaultFS) Remove(name string) error {
	if err := f.check(FaultOp{Kind: FaultRemove, Path: name}); err != nil {
		return err
	}
	return f.base.Remove(name)
}

// SyncDir syncs a directory of the FS below.
func (f *FaultFS) SyncDir(name string) error {
	if err := f.check(FaultOp{Kind: FaultSyncDir, Path: name}); err != nil {
		return err
	}
	return f.base.SyncDir(name)
}

type faultFile struct {
	File
	fs   *FaultFS
	path string
}

func (f *faultFile) size() (int64, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(FaultOp{Kind: FaultWrite, Path: f.path, Off: off, Len: int64(len(p))}); err != nil {
		var short ShortWrite
		if !errors.As(err, &short) {
			return 0, err
		}
		n, werr := f.File.WriteAt(p[:min(max(short.N, 0), len(p))], off)
		if werr != nil {
			return n, werr
		}
		return n, &fs.PathError{Op: "write", Path: f.path, Err: short.Err}
	}
	size, err := f.size()
	if err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if fit := f.fs.take(size, end); fit < end {
		n, err := f.File.WriteAt(p[:max(0, fit-off)], off)
		if err != nil {
			return n, err
		}
		return n, &fs.PathError{Op: "write", Path: f.path, Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.fs.check(FaultOp{Kind: FaultAllocate, Path: f.path, Off: off, Len: n}); err != nil {
		return err
	}
	size, err := f.size()
	if err != nil {
		return err
	}
	if fit := f.fs.take(size, off+n); fit < off+n {
		if fit > off {
			if err := f.File.Allocate(off, fit-off); err != nil {
				return err
			}
		}
		return &fs.PathError{Op: "fallocate", Path: f.path, Err: syscall.ENOSPC}
	}
	return f.File.Allocate(off, n)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check(FaultOp{Kind: FaultTruncate, Path: f.path, Off: size}); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check(FaultOp{Kind: FaultSync, Path: f.path}); err != nil {
		return err
	}
	return f.File.Sync()
}
