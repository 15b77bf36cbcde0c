package broker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A checkpoint written is read back for the same incarnation only, a
// replica not open keeps its entry while its topic exists, and nothing is
// written when nothing moved.
func TestHWCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := loadHWCheckpoints(dir, hclog.NewNullLogger())
	a, b := topicPartition{"a", 0}, topicPartition{"b", 1}
	require.NoError(t, c.save(map[topicPartition]hwEntry{
		a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 10},
		b: {Topic: "b", TopicID: "idb", Partition: 1, HW: 7},
	}, func(hwEntry) bool { return true }))
	c2 := loadHWCheckpoints(dir, hclog.NewNullLogger())
	assert.Equal(t, int64(10), c2.of(a, "ida"))
	assert.Equal(t, int64(0), c2.of(a, "other"), "another incarnation has no checkpoint")
	// b is not open now (offline, say): its entry stays while kept.
	require.NoError(t, c2.save(map[topicPartition]hwEntry{a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 12}},
		func(e hwEntry) bool { return e.Topic == "b" }))
	c3 := loadHWCheckpoints(dir, hclog.NewNullLogger())
	assert.Equal(t, int64(12), c3.of(a, "ida"))
	assert.Equal(t, int64(7), c3.of(b, "idb"))
	// Nothing moved: nothing is written (the file, removed, stays gone).
	require.NoError(t, os.Remove(filepath.Join(dir, hwCheckpointFile)))
	require.NoError(t, c3.save(map[topicPartition]hwEntry{a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 12}},
		func(e hwEntry) bool { return e.Topic == "b" }))
	assert.NoFileExists(t, filepath.Join(dir, hwCheckpointFile))
}

// FuzzHWCheckpointLoad loads arbitrary bytes as the checkpoint file: it
// never panics, and what it keeps is positive HWs only; a file that does
// not parse is ignored, and the next checkpoint replaces it.
func FuzzHWCheckpointLoad(f *testing.F) {
	f.Add([]byte(`{"version":1,"replicas":[{"topic":"a","topic_id":"x","partition":0,"hw":5}]}`))
	f.Add([]byte(`{"version":2,"replicas":[]}`))
	f.Add([]byte(`{"version":1,"replicas":[{"topic":"a","topic_id":"x","partition":-1,"hw":-5}]}`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, hwCheckpointFile), data, 0o644))
		c := loadHWCheckpoints(dir, hclog.NewNullLogger())
		c.mu.Lock()
		for tp, e := range c.mu.last {
			if e.HW <= 0 || tp.partition < 0 {
				t.Fatalf("kept %+v", e)
			}
		}
		c.mu.Unlock()
		require.NoError(t, c.save(map[topicPartition]hwEntry{{"t", 0}: {Topic: "t", TopicID: "i", HW: 1}}, func(hwEntry) bool { return false }))
		assert.Equal(t, int64(1), loadHWCheckpoints(dir, hclog.NewNullLogger()).of(topicPartition{"t", 0}, "i"))
	})
}
