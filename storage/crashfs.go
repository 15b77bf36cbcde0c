package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// DiskFullEnv names the environment variable that, in a binary built with
// the crashfs tag, makes the disk full: when it names a path and a file
// exists there, every operation that needs new space fails with ENOSPC
// (see NewCrashFS); removing the file makes space come back.
const DiskFullEnv = "GOSTREAM_TEST_DISK_FULL"

// CrashFS is an FS that keeps what is written to a file in the process's
// memory, as the kernel's page cache does, until the file is fsync'd: only
// then are the file's new bytes and size written to the FS below, and
// synced there. Reads, Stat and sizes see the unsynced writes over the
// file below. So the files below hold exactly what was fsync'd, as decided
// by the calls of the program itself: a process killed with kill -9 loses
// exactly its unsynced bytes (a test build's substitute for pulling the
// power, which kill -9 is not on a real file system, whose page cache
// outlives the process), and Crash drops them in a running process.
//
// What it simulates: the loss, on a crash, of every write, truncation and
// allocation of a file since that file's last successful Sync, all of it
// and nothing else; files are independent of each other. A file is
// written below only by its own Sync: its new size first, then its changed
// 4 KiB pages in file order, then an fsync below. Crash waits for a Sync
// under way, so in a process each file is as of its last Sync. A process
// killed while a Sync writes the file below leaves that Sync's new size
// and its first pages, never part of a page: unacknowledged bytes, some
// of which read as zeros, a torn write.
//
// What it does not simulate:
//   - the loss of directory entries. Creating, renaming and removing files
//     and making directories are done at once on the FS below, where they
//     survive a crash of the process (and usually of the machine, before
//     the directory is synced). Storage fsyncs a directory wherever it
//     depends on an entry, and a lost entry is a different fault from a
//     lost write, so CrashFS leaves it to the file system below.
//   - torn sectors, or a disk that keeps later writes and loses earlier
//     ones: apart from a process killed inside a Sync, a crash keeps
//     exactly the synced state (the harness's disk faults,
//     testcluster/diskfault.go, make torn tails).
//   - write errors from the page cache after a failed fsync: an fsync
//     that fails below keeps the bytes in memory, and the next Sync tries
//     them again.
//   - sharing with other processes: another process reading the files
//     below sees only what was synced.
//
// An fsync holds up reads and writes of the same file while it writes the
// file below. A CrashFS is safe for concurrent use.
type CrashFS struct {
	base     FS
	diskFull func() bool

	// crash is held shared by every operation on an open file for its
	// whole length, and exclusively by Crash: an fsync reached the FS
	// below before a crash, or not at all.
	crash sync.RWMutex
	// epoch is bumped by Crash, under crash; older handles are dead.
	epoch atomic.Uint64
	// mu guards the table of files. Lock order: crash, mu, a file's mu.
	mu struct {
		sync.Mutex
		files map[string]*crashInode // by clean path
	}
}

// errCrashed is what the handles opened before a Crash return.
var errCrashed = errors.New("storage: the file system crashed; this file handle is gone")

// NewCrashFS returns a CrashFS over base. If diskFull is not nil and
// returns true, every operation that needs new space fails with ENOSPC:
// Allocate past the end of a file, a write past the end of a file (which
// writes what fits before the end, then fails, as a short write does),
// creating a file or a directory.
func NewCrashFS(base FS, diskFull func() bool) *CrashFS {
	c := &CrashFS{base: base, diskFull: diskFull}
	c.mu.files = map[string]*crashInode{}
	return c
}

// Crash drops every write, truncation and allocation not yet synced, as a
// power loss does. Files opened before it fail every call but Close with
// an error; the FS itself goes on working, for a reopen.
func (c *CrashFS) Crash() {
	c.crash.Lock()
	defer c.crash.Unlock()
	c.epoch.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.files = map[string]*crashInode{}
}

// Lock locks through the FS below, when it can (see Locker).
func (c *CrashFS) Lock(path string) (io.Closer, error) {
	if l, ok := c.base.(Locker); ok {
		return l.Lock(path)
	}
	return io.NopCloser(nil), nil
}

func (c *CrashFS) full() bool { return c.diskFull != nil && c.diskFull() }

func noSpace(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
}

// crashPageSize is the unit in which unsynced bytes are kept.
const crashPageSize = 4096

type crashPage [crashPageSize]byte

// crashInode is one file as seen through the CrashFS: the file below, and
// what was done to it since its last Sync.
type crashInode struct {
	id   fs.FileInfo            // of the file below, to notice a file replaced behind the FS's back
	path atomic.Pointer[string] // its name now; changed under CrashFS.mu
	open int                    // open handles; under CrashFS.mu

	mu       sync.RWMutex
	size     int64 // the file's size
	valid    int64 // bytes [0, valid) of the file below are the file's; after them, zeros
	baseSize int64 // the size of the file below
	pages    map[int64]*crashPage
}

func (n *crashInode) dirtyLocked() bool {
	return len(n.pages) > 0 || n.size != n.baseSize || n.valid != n.baseSize
}

// sameFile reports whether fi is the file n was opened on. File systems
// whose FileInfo cannot tell are taken at their word.
func (n *crashInode) sameFile(fi fs.FileInfo) bool {
	if n.id.Sys() == nil || fi.Sys() == nil {
		return true
	}
	return os.SameFile(n.id, fi)
}

// inodeLocked returns the file at name, opened below as fi, and forgets a
// file that was there before if it is no longer the same.
func (c *CrashFS) inodeLocked(name string, fi fs.FileInfo) *crashInode {
	if n := c.mu.files[name]; n != nil && n.sameFile(fi) {
		return n
	}
	n := &crashInode{id: fi, size: fi.Size(), valid: fi.Size(), baseSize: fi.Size(), pages: map[int64]*crashPage{}}
	n.path.Store(&name)
	c.mu.files[name] = n
	return n
}

const crashFlags = os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL

// OpenFile opens a file; O_CREATE creates it on the FS below at once.
// Flags other than the access mode, O_CREATE and O_EXCL are refused.
func (c *CrashFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&^crashFlags != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("crashfs: flags %#x not supported", flag&^crashFlags)}
	}
	name = filepath.Clean(name)
	if flag&os.O_CREATE != 0 && c.full() {
		if _, err := c.base.Stat(name); errors.Is(err, fs.ErrNotExist) {
			return nil, noSpace("open", name)
		}
	}
	// The file below is opened for reading too, if it may be: a write
	// into part of a page reads the rest of it.
	f, err := c.base.OpenFile(name, flag&^(os.O_WRONLY|os.O_RDWR)|os.O_RDWR, perm)
	if errors.Is(err, fs.ErrPermission) && flag&(os.O_WRONLY|os.O_RDWR) != os.O_RDWR {
		f, err = c.base.OpenFile(name, flag, perm)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.inodeLocked(name, fi)
	n.open++
	return &crashFile{
		fs: c, base: f, ino: n, epoch: c.epoch.Load(),
		readable: flag&(os.O_WRONLY|os.O_RDWR) != os.O_WRONLY,
		writable: flag&(os.O_WRONLY|os.O_RDWR) != 0,
	}, nil
}

// MkdirAll creates directories at once on the FS below.
func (c *CrashFS) MkdirAll(name string, perm fs.FileMode) error {
	if c.full() {
		if _, err := c.base.Stat(name); errors.Is(err, fs.ErrNotExist) {
			return noSpace("mkdir", name)
		}
	}
	return c.base.MkdirAll(name, perm)
}

// ReadDir lists a directory of the FS below; the sizes of its files are
// the sizes seen through the CrashFS.
func (c *CrashFS) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := c.base.ReadDir(name)
	if err != nil {
		return nil, err
	}
	dir := filepath.Clean(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range entries {
		if n := c.mu.files[filepath.Join(dir, e.Name())]; n != nil {
			entries[i] = crashDirEntry{e, n}
		}
	}
	return entries, nil
}

// Stat describes a file, with the size seen through the CrashFS.
func (c *CrashFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := c.base.Stat(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	n := c.mu.files[filepath.Clean(name)]
	c.mu.Unlock()
	if n == nil || !n.sameFile(fi) {
		return fi, nil
	}
	return n.info(fi), nil
}

// Rename renames at once on the FS below; unsynced writes go with the
// file.
func (c *CrashFS) Rename(oldname, newname string) error {
	if err := c.base.Rename(oldname, newname); err != nil {
		return err
	}
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.files, newname)
	for name, n := range c.mu.files {
		rest, ok := strings.CutPrefix(name, oldname)
		if !ok || (rest != "" && rest[0] != filepath.Separator) {
			continue
		}
		delete(c.mu.files, name)
		moved := newname + rest
		n.path.Store(&moved)
		c.mu.files[moved] = n
	}
	return nil
}

// Remove removes at once on the FS below; unsynced writes go with the
// file.
func (c *CrashFS) Remove(name string) error {
	if err := c.base.Remove(name); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.mu.files, filepath.Clean(name))
	c.mu.Unlock()
	return nil
}

// SyncDir syncs the directory on the FS below, where its entries already
// are.
func (c *CrashFS) SyncDir(name string) error { return c.base.SyncDir(name) }

// crashFile is an open file of a CrashFS.
type crashFile struct {
	fs                 *CrashFS
	base               File
	ino                *crashInode
	epoch              uint64
	readable, writable bool
	closed             atomic.Bool
}

// begin starts an operation on f; the caller calls f.fs.crash.RUnlock
// when it ends, error or not.
func (f *crashFile) begin(op string) error {
	f.fs.crash.RLock()
	switch {
	case f.closed.Load():
		return &fs.PathError{Op: op, Path: f.name(), Err: fs.ErrClosed}
	case f.fs.epoch.Load() != f.epoch:
		return &fs.PathError{Op: op, Path: f.name(), Err: errCrashed}
	}
	return nil
}

func (f *crashFile) name() string { return *f.ino.path.Load() }

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	defer f.fs.crash.RUnlock()
	if err := f.begin("read"); err != nil {
		return 0, err
	}
	if !f.readable {
		return 0, &fs.PathError{Op: "read", Path: f.name(), Err: syscall.EBADF}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name(), Err: fs.ErrInvalid}
	}
	n := f.ino
	n.mu.RLock()
	defer n.mu.RUnlock()
	if off >= n.size {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), n.size-off))
	if err := n.readLocked(f.base, p[:k], off); err != nil {
		return 0, err
	}
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

// readLocked fills p with the file's bytes at off, all below its size.
func (n *crashInode) readLocked(base File, p []byte, off int64) error {
	below := 0
	if off < n.valid {
		below = int(min(int64(len(p)), n.valid-off))
		got, err := base.ReadAt(p[:below], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		clear(p[got:below]) // the file below is shorter than it was: cut behind the FS's back
	}
	clear(p[below:])
	if len(n.pages) == 0 {
		return nil
	}
	end := off + int64(len(p))
	for i := off / crashPageSize; i*crashPageSize < end; i++ {
		pg := n.pages[i]
		if pg == nil {
			continue
		}
		start := i * crashPageSize
		from, to := max(start, off), min(start+crashPageSize, end)
		copy(p[from-off:to-off], pg[from-start:to-start])
	}
	return nil
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.fs.crash.RUnlock()
	if err := f.begin("write"); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &fs.PathError{Op: "write", Path: f.name(), Err: syscall.EBADF}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name(), Err: fs.ErrInvalid}
	}
	n := f.ino
	n.mu.Lock()
	defer n.mu.Unlock()
	var err error
	if end := off + int64(len(p)); end > n.size && f.fs.full() {
		p = p[:max(0, n.size-off)]
		err = noSpace("write", f.name())
	}
	for done := 0; done < len(p); {
		pos := off + int64(done)
		i, in := pos/crashPageSize, int(pos%crashPageSize)
		pg := n.pages[i]
		if pg == nil {
			pg = new(crashPage)
			if in > 0 || len(p)-done < crashPageSize {
				// Partly written: keep the rest of the page as it is.
				if rerr := n.readLocked(f.base, pg[:min(crashPageSize, max(0, n.size-i*crashPageSize))], i*crashPageSize); rerr != nil {
					return done, rerr
				}
			}
			n.pages[i] = pg
		}
		done += copy(pg[in:], p[done:])
	}
	n.size = max(n.size, off+int64(len(p)))
	return len(p), err
}

func (f *crashFile) Truncate(size int64) error {
	defer f.fs.crash.RUnlock()
	if err := f.begin("truncate"); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: "truncate", Path: f.name(), Err: syscall.EBADF}
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name(), Err: fs.ErrInvalid}
	}
	n := f.ino
	n.mu.Lock()
	defer n.mu.Unlock()
	if size < n.size {
		for i := range n.pages {
			if i*crashPageSize >= size {
				delete(n.pages, i)
			}
		}
		if pg := n.pages[size/crashPageSize]; pg != nil {
			clear(pg[size%crashPageSize:]) // bytes past the end read as zeros if it grows again
		}
		n.valid = min(n.valid, size)
	}
	n.size = size
	return nil
}

func (f *crashFile) Allocate(off, length int64) error {
	defer f.fs.crash.RUnlock()
	if err := f.begin("fallocate"); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: "fallocate", Path: f.name(), Err: syscall.EBADF}
	}
	if off < 0 || length <= 0 {
		return &fs.PathError{Op: "fallocate", Path: f.name(), Err: fs.ErrInvalid}
	}
	n := f.ino
	n.mu.Lock()
	defer n.mu.Unlock()
	if off+length > n.size {
		if f.fs.full() {
			return noSpace("fallocate", f.name())
		}
		n.size = off + length
	}
	return nil
}

// Sync writes the file's new size and bytes to the file below and syncs
// it there.
func (f *crashFile) Sync() error {
	defer f.fs.crash.RUnlock()
	if err := f.begin("sync"); err != nil {
		return err
	}
	n := f.ino
	n.mu.Lock()
	defer n.mu.Unlock()
	w := f.base
	if !f.writable && n.dirtyLocked() {
		// fsync(2) of a read-only descriptor syncs what others wrote.
		bw, err := f.fs.base.OpenFile(f.name(), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer bw.Close()
		w = bw
	}
	if err := n.flushLocked(w); err != nil {
		if fi, serr := w.Stat(); serr == nil {
			n.baseSize = fi.Size()
		}
		return err
	}
	n.valid, n.baseSize = n.size, n.size
	n.pages = map[int64]*crashPage{}
	return nil
}

// flushLocked writes the file as seen to w, the file below, and syncs it.
func (n *crashInode) flushLocked(w File) error {
	if n.baseSize > n.valid {
		if err := w.Truncate(n.valid); err != nil {
			return err
		}
		n.baseSize = n.valid
	}
	if n.size > n.baseSize {
		err := w.Allocate(n.baseSize, n.size-n.baseSize)
		if errors.Is(err, errors.ErrUnsupported) {
			err = w.Truncate(n.size)
		}
		if err != nil {
			return err
		}
	}
	// Runs of consecutive pages, each in one write, none past the end.
	idx := make([]int64, 0, len(n.pages))
	for i := range n.pages {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var buf []byte
	for len(idx) > 0 {
		run := 1
		for run < len(idx) && idx[run] == idx[0]+int64(run) {
			run++
		}
		start := idx[0] * crashPageSize
		buf = buf[:0]
		for _, i := range idx[:run] {
			buf = append(buf, n.pages[i][:]...)
		}
		buf = buf[:min(int64(len(buf)), n.size-start)]
		if _, err := w.WriteAt(buf, start); err != nil {
			return err
		}
		idx = idx[run:]
	}
	return w.Sync()
}

func (f *crashFile) Stat() (fs.FileInfo, error) {
	defer f.fs.crash.RUnlock()
	if err := f.begin("stat"); err != nil {
		return nil, err
	}
	fi, err := f.base.Stat()
	if err != nil {
		return nil, err
	}
	return f.ino.info(fi), nil
}

// Close closes the file below. What was not synced stays in memory, as in
// a page cache, for the next handle on the file.
func (f *crashFile) Close() error {
	if f.closed.Swap(true) {
		return &fs.PathError{Op: "close", Path: f.name(), Err: fs.ErrClosed}
	}
	c, n := f.fs, f.ino
	c.mu.Lock()
	n.open--
	n.mu.RLock()
	clean := !n.dirtyLocked()
	n.mu.RUnlock()
	if name := f.name(); n.open == 0 && clean && c.mu.files[name] == n {
		delete(c.mu.files, name) // nothing to remember
	}
	c.mu.Unlock()
	return f.base.Close()
}

// info is fi, from the file below, with the size seen through the FS.
func (n *crashInode) info(fi fs.FileInfo) fs.FileInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return crashFileInfo{fi, n.size}
}

type crashFileInfo struct {
	fs.FileInfo
	size int64
}

func (i crashFileInfo) Size() int64 { return i.size }

type crashDirEntry struct {
	fs.DirEntry
	ino *crashInode
}

func (e crashDirEntry) Info() (fs.FileInfo, error) {
	fi, err := e.DirEntry.Info()
	if err != nil || !e.ino.sameFile(fi) {
		return fi, err
	}
	return e.ino.info(fi), nil
}

// fileExists returns a function that reports whether a file exists at
// path, or nil for an empty path.
func fileExists(path string) func() bool {
	if path == "" {
		return nil
	}
	return func() bool {
		_, err := os.Stat(path)
		return err == nil
	}
}

// crashFSFromEnv is the default FS of a crashfs build: a CrashFS over the
// operating system's, whose disk is full while the file named by
// DiskFullEnv exists.
func crashFSFromEnv() FS { return NewCrashFS(OSFS{}, fileExists(os.Getenv(DiskFullEnv))) }
