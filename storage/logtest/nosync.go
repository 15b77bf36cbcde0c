package logtest

import (
	"io/fs"

	"gostream/storage"
)

// NoSyncFS is the operating system's file system with fsync made a no-op:
// a benchmark on it measures the CPU's part of an append, not the disk's.
type NoSyncFS struct{ storage.OSFS }

// OpenFile opens the file as storage.OSFS does; its Sync does nothing.
func (NoSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (storage.File, error) {
	f, err := storage.OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// SyncDir does nothing.
func (NoSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ storage.File }

func (noSyncFile) Sync() error { return nil }
