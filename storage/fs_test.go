package storage_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
)

// movedFS is an FS whose paths under from are the paths under to of the
// operating system: a log opened under from works only if every file
// operation goes through the FS.
type movedFS struct {
	from, to string
	mu       sync.Mutex
	ops      map[string]int
}

func (m *movedFS) path(op, name string) (string, error) {
	m.mu.Lock()
	m.ops[op]++
	m.mu.Unlock()
	rel, err := filepath.Rel(m.from, name)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s %s: outside %s", op, name, m.from)
	}
	return filepath.Join(m.to, rel), nil
}

func (m *movedFS) OpenFile(name string, flag int, perm fs.FileMode) (storage.File, error) {
	p, err := m.path("open"+filepath.Ext(name), name)
	if err != nil {
		return nil, err
	}
	return storage.OSFS{}.OpenFile(p, flag, perm)
}

func (m *movedFS) MkdirAll(name string, perm fs.FileMode) error {
	p, err := m.path("mkdir", name)
	if err != nil {
		return err
	}
	return os.MkdirAll(p, perm)
}

func (m *movedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := m.path("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

func (m *movedFS) Stat(name string) (fs.FileInfo, error) {
	p, err := m.path("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (m *movedFS) Rename(oldname, newname string) error {
	po, err := m.path("rename", oldname)
	if err != nil {
		return err
	}
	pn, err := m.path("rename", newname)
	if err != nil {
		return err
	}
	return os.Rename(po, pn)
}

func (m *movedFS) Remove(name string) error {
	p, err := m.path("remove", name)
	if err != nil {
		return err
	}
	return os.Remove(p)
}

func (m *movedFS) SyncDir(name string) error {
	p, err := m.path("syncdir", name)
	if err != nil {
		return err
	}
	return storage.OSFS{}.SyncDir(p)
}

// TestEveryFileOperationGoesThroughTheFS runs a root and a log through
// everything that touches files (stamp, segments, rolls, indexes,
// truncation and quarantine, retention, a torn tail cut on open) on an FS
// that moves every path elsewhere: nothing may appear at the paths the
// root and log were given.
func TestEveryFileOperationGoesThroughTheFS(t *testing.T) {
	tmp := t.TempDir()
	virtual, real := filepath.Join(tmp, "virtual"), filepath.Join(tmp, "real")
	m := &movedFS{from: virtual, to: real, ops: map[string]int{}}

	root, err := storage.OpenRootWith(virtual, storage.RootOptions{BrokerID: 1, FS: m, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, root.SetClusterID("c1"))
	opts := storage.Options{SegmentBytes: 4096, IndexIntervalBytes: 256, RetentionBytes: 8000}
	l, err := root.OpenLog("t", 0, opts)
	require.NoError(t, err)
	batches := appendSized(t, l, 14, 1000, 0)
	require.Equal(t, 4, l.SegmentCount())
	require.NoError(t, l.TruncateTo(ctxFor(t), 13))
	n, err := l.ApplyRetention(ctxFor(t), noLimit)
	require.NoError(t, err)
	require.Positive(t, n)
	require.NoError(t, l.Close())

	dir, err := root.ReplicaDir("t", 0)
	require.NoError(t, err)
	realDir := filepath.Join(real, strings.TrimPrefix(dir, virtual))
	segs := segmentFiles(t, realDir)
	newest := filepath.Join(realDir, segs[len(segs)-1])
	fi, err := os.Stat(newest)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(newest, fi.Size()-10)) // a torn last batch

	l, err = root.OpenLog("t", 0, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(4), l.LogStartOffset())
	assert.Equal(t, int64(12), l.LogEndOffset())
	assertSameBytes(t, concat(batches[4:12]), concat(readAll(t, l)))
	require.NoError(t, l.Close())

	reopened, err := storage.OpenRootWith(virtual, storage.RootOptions{BrokerID: 1, FS: m})
	require.NoError(t, err)
	assert.Equal(t, "c1", reopened.Stamp().ClusterID)

	_, err = os.Lstat(virtual)
	assert.True(t, os.IsNotExist(err), "something was created at the path the root was given: %v", err)
	q, err := filepath.Glob(filepath.Join(realDir, storage.QuarantineDir, "*"))
	require.NoError(t, err)
	assert.Len(t, q, 2, "the truncation and the torn tail were quarantined through the FS")
	for _, op := range []string{"open.log", "open.index", "open.stamp", "mkdir", "readdir", "rename", "remove", "syncdir"} {
		assert.Positive(t, m.ops[op], "no %s went through the FS", op)
	}
}
