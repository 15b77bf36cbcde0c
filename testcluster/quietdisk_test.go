package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// A node with many quiet partitions holds little disk for them: a topic of
// 200 partitions at RF 3 with one record in each takes under 16 KiB of
// allocated blocks per partition directory on every node (segment, index
// and the replica's own files), not a full stretch of preallocated space
// per segment.
func TestQuietPartitionsTakeLittleDisk(t *testing.T) {
	const partitions, budget = 200, 16 << 10
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "quiet", partitions, 3)
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	value := func(p int32) []byte { return []byte(fmt.Sprintf("quiet-record-of-partition-%d", p)) }
	start := time.Now()
	for part := range int32(partitions) {
		// Acknowledged once every replica has it on its own disk.
		_, err := p.Send(ctx, client.ProducerRecord{Topic: "quiet", Partition: part, ManualPartition: true, Value: value(part)})
		require.NoError(t, err, "partition %d", part)
	}
	t.Logf("one record to each of %d partitions in %s", partitions, time.Since(start))

	for _, n := range c.Nodes {
		held, err := n.Partitions("quiet")
		require.NoError(t, err)
		require.Len(t, held, partitions, "node %d holds a replica of every partition", n.ID)
		var total, most int64
		for _, part := range held {
			dir := n.ReplicaDir("quiet", part)
			seg, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log"))
			require.NoError(t, err)
			require.True(t, bytes.Contains(seg, value(part)), "node %d partition %d holds its record", n.ID, part)
			used := allocatedBytes(t, dir)
			total += used
			most = max(most, used)
		}
		t.Logf("node %d: %d partitions take %d KiB of allocated blocks, at most %d KiB each", n.ID, partitions, total>>10, most>>10)
		assert.Less(t, most, int64(budget), "node %d: the most one quiet partition takes", n.ID)
	}
}

// allocatedBytes is the disk space (st_blocks * 512) the regular files
// under dir take, preallocated space included.
func allocatedBytes(t *testing.T, dir string) int64 {
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
