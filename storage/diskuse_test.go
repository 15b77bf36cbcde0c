//go:build unix

package storage_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
)

// quietLogBudget is what a partition that holds little data may take on
// disk, in allocated blocks, for every file in its directory.
const quietLogBudget = 16 << 10

// allocatedBytes is the disk space (st_blocks * 512) the regular files
// under dir take, preallocated space included.
func allocatedBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	}))
	return total
}

// TestQuietLogsTakeLittleDisk: many open logs holding one small durable
// batch each take a block or so each, not a full stretch of preallocated
// space: a node with a thousand quiet partitions does not hold a quarter
// of a gigabyte for them.
func TestQuietLogsTakeLittleDisk(t *testing.T) {
	const logs = 200
	root := t.TempDir()
	var total, most int64
	for i := range logs {
		dir := filepath.Join(root, fmt.Sprintf("partition-%d", i))
		l := openLog(t, dir, storage.Options{})
		mustAppend(t, l, sizedBatch(t, 200, byte(i)), 0) // waits for its fsync
		n := allocatedBytes(t, dir)
		total += n
		most = max(most, n)
	}
	t.Logf("%d logs of one 200-byte batch: %d KiB allocated, at most %d KiB each", logs, total>>10, most>>10)
	assert.Less(t, most, int64(quietLogBudget), "the most one quiet log takes")
}
