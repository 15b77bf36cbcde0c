package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FS is the file system under a Log or a Root. Every file-system operation
// of package storage goes through one: segments, indexes, quarantine files,
// the root's stamp, WriteFileAtomic, directory syncs. Paths are the
// operating system's paths. OSFS is the real file system; CrashFS keeps
// unsynced writes in memory, so that a crash loses exactly them; FaultFS
// fails the operations a test picks.
type FS interface {
	// OpenFile opens or creates a file as os.OpenFile does. Storage only
	// passes os.O_RDONLY, os.O_WRONLY or os.O_RDWR, with os.O_CREATE and
	// os.O_EXCL.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// MkdirAll creates a directory and any parents it lacks, as
	// os.MkdirAll does.
	MkdirAll(name string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name, as os.ReadDir does.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes a file, as os.Stat does.
	Stat(name string) (fs.FileInfo, error)
	// Rename renames a file, replacing newname, as os.Rename does.
	Rename(oldname, newname string) error
	// Remove removes a file or an empty directory, as os.Remove does.
	Remove(name string) error
	// SyncDir makes the entries of a directory durable: the files created,
	// renamed and removed in it.
	SyncDir(name string) error
}

// File is an open file of an FS. Storage reads and writes at explicit
// positions only; it never uses a file offset.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Truncate sets the file's size, cutting it or extending it with
	// zeros.
	Truncate(size int64) error
	// Allocate extends the file, if needed, to hold [off, off+n) with space
	// that reads as zeros and is allocated now, without writing it
	// (fallocate(2) with mode 0). It returns an error matching
	// errors.ErrUnsupported where the file system cannot do that.
	Allocate(off, n int64) error
	// Sync makes the file's content and size durable (fsync(2)).
	Sync() error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	// Close releases the file. It does not sync.
	Close() error
}

// Locker is an FS that can lock a file for this process alone, as long as
// the returned Closer is open (and no longer than the process lives). A
// root on an FS that is not a Locker is not protected from a second
// process.
type Locker interface {
	Lock(path string) (io.Closer, error)
}

// OSFS is the operating system's file system.
type OSFS struct{}

// OpenFile is os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// MkdirAll is os.MkdirAll.
func (OSFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// ReadDir is os.ReadDir.
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat is os.Stat.
func (OSFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Rename is os.Rename.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove is os.Remove.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// SyncDir opens the directory and fsyncs it.
func (OSFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lock takes an exclusive flock on the file at path, created if needed,
// without waiting, and writes this process's pid into it (for the error
// another process gets). The lock goes with the process, also on kill -9.
func (OSFS) Lock(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if pid := strings.TrimSpace(string(holder)); pid != "" {
			return nil, fmt.Errorf("in use by another process (pid %s): %w", pid, err)
		}
		return nil, fmt.Errorf("in use by another process: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// osFile is an *os.File with Allocate (fallocate_linux.go).
type osFile struct{ *os.File }

// Allocate is fallocate(2) with mode 0 where there is one.
func (f osFile) Allocate(off, n int64) error { return fallocate(f.File, off, n) }

// defaultFS is the FS of the logs and roots that name none, and of
// WriteFileAtomic: the operating system's, except in binaries built with
// the crashfs tag, where defaultfs_crashfs.go makes it a CrashFS.
var defaultFS FS = OSFS{}

// DefaultFS returns the FS that logs and roots use when their options name
// none: OSFS, or in a binary built with the build tag crashfs a CrashFS
// over OSFS (see CrashFS).
func DefaultFS() FS { return defaultFS }

// readFile returns the content of a file of fsys.
func readFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// createTemp creates a new file in dir whose name is pattern with a random
// string in place of its last "*", as os.CreateTemp does.
func createTemp(fsys FS, dir, pattern string) (File, string, error) {
	prefix, suffix := pattern, ""
	for i := len(pattern) - 1; i >= 0; i-- {
		if pattern[i] == '*' {
			prefix, suffix = pattern[:i], pattern[i+1:]
			break
		}
	}
	var random [8]byte
	for try := 0; ; try++ {
		rand.Read(random[:])
		name := filepath.Join(dir, prefix+hex.EncodeToString(random[:])+suffix)
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, name, err
	}
}

// syncDir makes the entries of dir durable.
func syncDir(fsys FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
