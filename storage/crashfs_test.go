package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
)

// crashModel is what a file of a CrashFS must hold: cur as seen through
// the FS, durable on the FS below.
type crashModel struct {
	cur, durable []byte
}

func (m *crashModel) grow(n int) {
	if n > len(m.cur) {
		m.cur = append(m.cur, make([]byte, n-len(m.cur))...)
	}
}

// TestCrashFSAgainstAModel runs random writes, truncations, allocations,
// syncs, reopens and crashes on a few files of a CrashFS and checks after
// each step that the FS reads as the model's current content and that the
// files below hold exactly the model's synced content.
func TestCrashFSAgainstAModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	c := storage.NewCrashFS(storage.OSFS{}, nil)
	const files = 3
	models := make([]*crashModel, files)
	handles := make([]storage.File, files)
	paths := make([]string, files)
	open := func(i int) {
		f, err := c.OpenFile(paths[i], os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		handles[i] = f
	}
	for i := range files {
		paths[i] = filepath.Join(dir, fmt.Sprint("f", i))
		models[i] = &crashModel{}
		open(i)
	}
	ops := map[string]int{}
	for step := range 3000 {
		i := rng.IntN(files)
		f, m := handles[i], models[i]
		op := []string{"write", "write", "write", "truncate", "allocate", "sync", "reopen", "crash"}[rng.IntN(8)]
		if op == "crash" && rng.IntN(4) > 0 {
			op = "read"
		}
		ops[op]++
		switch op {
		case "write":
			off := rng.IntN(len(m.cur) + 6000)
			p := make([]byte, 1+rng.IntN(10000))
			for j := range p {
				p[j] = byte(rng.Uint32()) | 1
			}
			n, err := f.WriteAt(p, int64(off))
			require.NoError(t, err)
			require.Equal(t, len(p), n)
			m.grow(off + len(p))
			copy(m.cur[off:], p)
		case "truncate":
			size := rng.IntN(len(m.cur) + 6000)
			require.NoError(t, f.Truncate(int64(size)))
			if size < len(m.cur) {
				m.cur = m.cur[:size]
			}
			m.grow(size)
		case "allocate":
			off, n := rng.IntN(len(m.cur)+6000), 1+rng.IntN(9000)
			require.NoError(t, f.Allocate(int64(off), int64(n)))
			m.grow(off + n)
		case "sync":
			require.NoError(t, f.Sync())
			m.durable = bytes.Clone(m.cur)
		case "reopen":
			// Closing keeps what is unsynced, as a page cache does.
			require.NoError(t, f.Close())
			open(i)
		case "crash":
			c.Crash()
			for j := range files {
				_, err := handles[j].WriteAt([]byte{1}, 0)
				require.Error(t, err, "a handle from before the crash still writes")
				require.NoError(t, handles[j].Close())
				models[j].cur = bytes.Clone(models[j].durable)
				open(j)
			}
		}
		for j := range files {
			below, err := os.ReadFile(paths[j])
			require.NoError(t, err)
			require.True(t, bytes.Equal(models[j].durable, below), "step %d (%s): file %d below holds %d bytes, not its %d synced ones", step, op, j, len(below), len(models[j].durable))
			cur := models[j].cur
			fi, err := handles[j].Stat()
			require.NoError(t, err)
			require.Equal(t, int64(len(cur)), fi.Size(), "step %d (%s): size of file %d", step, op, j)
			fi, err = c.Stat(paths[j])
			require.NoError(t, err)
			require.Equal(t, int64(len(cur)), fi.Size(), "step %d (%s): size of file %d by name", step, op, j)
			got := make([]byte, len(cur)+10)
			n, err := handles[j].ReadAt(got, 0)
			require.ErrorIs(t, err, io.EOF)
			require.True(t, bytes.Equal(cur, got[:n]), "step %d (%s): file %d reads back otherwise", step, op, j)
			if len(cur) > 0 {
				off := rng.IntN(len(cur))
				part := make([]byte, rng.IntN(len(cur)-off)+1)
				_, err := handles[j].ReadAt(part, int64(off))
				require.NoError(t, err)
				require.True(t, bytes.Equal(cur[off:off+len(part)], part), "step %d: a read at %d", step, off)
			}
		}
	}
	t.Logf("operations: %v", ops)
	entries, err := c.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		i := slices.Index(paths, filepath.Join(dir, e.Name()))
		assert.Equal(t, int64(len(models[i].cur)), fi.Size(), "ReadDir's size of %s", e.Name())
	}
}

// TestCrashFSNamesAreImmediate: creating, renaming and removing a file
// happen on the FS below at once, and unsynced bytes go with the file.
func TestCrashFSNamesAreImmediate(t *testing.T) {
	dir := t.TempDir()
	c := storage.NewCrashFS(storage.OSFS{}, nil)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	f, err := c.OpenFile(a, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(t, err)
	_, err = os.Stat(a)
	require.NoError(t, err, "created below at once")
	_, err = f.WriteAt([]byte("unsynced"), 0)
	require.NoError(t, err)

	require.NoError(t, c.Rename(a, b))
	_, err = os.Stat(a)
	assert.True(t, os.IsNotExist(err))
	fi, err := c.Stat(b)
	require.NoError(t, err)
	assert.Equal(t, int64(8), fi.Size(), "the unsynced bytes moved with the file")
	below, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Empty(t, below)
	require.NoError(t, f.Sync())
	below, err = os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, "unsynced", string(below), "a sync after the rename writes the renamed file")
	require.NoError(t, f.Close())

	g, err := c.OpenFile(b, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = g.WriteAt([]byte("more"), 8)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	require.NoError(t, c.Remove(b))
	_, err = os.Stat(b)
	assert.True(t, os.IsNotExist(err))
	// A new file under the old name starts empty: the unsynced bytes went
	// with the one removed.
	h, err := c.OpenFile(b, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(t, err)
	fi, err = h.Stat()
	require.NoError(t, err)
	assert.Zero(t, fi.Size())
	require.NoError(t, h.Close())
}

// TestCrashFSDiskFull: while the disk is full, what needs new space fails
// with ENOSPC, a write past the end writes what fits first, and what needs
// none goes on; when space is back, everything works again.
func TestCrashFSDiskFull(t *testing.T) {
	dir := t.TempDir()
	full := false
	c := storage.NewCrashFS(storage.OSFS{}, func() bool { return full })
	f, err := c.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Allocate(0, 100))

	full = true
	err = f.Allocate(50, 100)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	n, err := f.WriteAt(bytes.Repeat([]byte{'x'}, 60), 0)
	assert.NoError(t, err, "a write into allocated space needs no new space")
	assert.Equal(t, 60, n)
	n, err = f.WriteAt(bytes.Repeat([]byte{'y'}, 60), 80)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, 20, n, "a write past the end writes what fits before the end")
	fi, err := f.Stat()
	require.NoError(t, err)
	assert.Equal(t, int64(100), fi.Size())
	require.NoError(t, f.Truncate(10), "cutting needs no space")
	require.NoError(t, f.Sync(), "syncing needs no new space from the FS")
	_, err = c.OpenFile(filepath.Join(dir, "new"), os.O_RDWR|os.O_CREATE, 0o644)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	_, err = os.Stat(filepath.Join(dir, "new"))
	assert.True(t, os.IsNotExist(err), "the failed create created nothing")
	g, err := c.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err, "opening a file that exists needs no space")
	require.NoError(t, g.Close())
	assert.ErrorIs(t, c.MkdirAll(filepath.Join(dir, "d"), 0o755), syscall.ENOSPC)

	full = false
	require.NoError(t, f.Allocate(0, 200))
	_, err = f.WriteAt([]byte("z"), 300)
	require.NoError(t, err)
	require.NoError(t, c.MkdirAll(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, f.Close())
}

// TestCrashFSDiskFullFromEnv: the default FS of a crashfs build has a full
// disk while the file named by GOSTREAM_TEST_DISK_FULL exists.
func TestCrashFSDiskFullFromEnv(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "full")
	t.Setenv(storage.DiskFullEnv, flag)
	c := storage.CrashFSFromEnv()
	f, err := c.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Allocate(0, 10))
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	assert.ErrorIs(t, f.Allocate(0, 20), syscall.ENOSPC)
	require.NoError(t, os.Remove(flag))
	assert.NoError(t, f.Allocate(0, 20), "space is back once the file is gone")
}

// TestCrashFSHandlesDieInACrash: after Crash, files opened before it fail
// every call but Close, and the FS opens them again as synced.
func TestCrashFSHandlesDieInACrash(t *testing.T) {
	dir := t.TempDir()
	c := storage.NewCrashFS(storage.OSFS{}, nil)
	path := filepath.Join(dir, "f")
	f, err := c.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("synced"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.WriteAt([]byte(" and not"), 6)
	require.NoError(t, err)
	c.Crash()
	for name, call := range map[string]func() error{
		"read":     func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err },
		"write":    func() error { _, err := f.WriteAt([]byte("x"), 0); return err },
		"sync":     f.Sync,
		"truncate": func() error { return f.Truncate(0) },
		"allocate": func() error { return f.Allocate(0, 100) },
		"stat":     func() error { _, err := f.Stat(); return err },
	} {
		err := call()
		assert.Error(t, err, name)
		assert.False(t, errors.Is(err, fs.ErrClosed), "%s: a crashed handle is not merely closed: %v", name, err)
	}
	require.NoError(t, f.Close())
	g, err := c.OpenFile(path, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer g.Close()
	buf := make([]byte, 20)
	n, _ := g.ReadAt(buf, 0)
	assert.Equal(t, "synced", string(buf[:n]))
}
