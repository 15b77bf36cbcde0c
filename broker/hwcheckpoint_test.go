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
	}, 0, func(hwEntry) bool { return true }))
	c2 := loadHWCheckpoints(dir, hclog.NewNullLogger())
	assert.Equal(t, int64(10), c2.of(a, "ida"))
	assert.Equal(t, int64(0), c2.of(a, "other"), "another incarnation has no checkpoint")
	// b is not open now (offline, say): its entry stays while kept.
	require.NoError(t, c2.save(map[topicPartition]hwEntry{a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 12}}, 0,
		func(e hwEntry) bool { return e.Topic == "b" }))
	c3 := loadHWCheckpoints(dir, hclog.NewNullLogger())
	assert.Equal(t, int64(12), c3.of(a, "ida"))
	assert.Equal(t, int64(7), c3.of(b, "idb"))
	// Nothing moved: nothing is written (the file, removed, stays gone).
	require.NoError(t, os.Remove(filepath.Join(dir, hwCheckpointFile)))
	require.NoError(t, c3.save(map[topicPartition]hwEntry{a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 12}}, 0,
		func(e hwEntry) bool { return e.Topic == "b" }))
	assert.NoFileExists(t, filepath.Join(dir, hwCheckpointFile))
}

// A replica deleted because a move took it off this broker is forgotten
// at once and on disk: the next replica of that partition opened here
// starts empty, and was found corrupt when held to the old high
// watermark ("acknowledged but the log has no segment"). A checkpoint of
// replicas listed before the forget writes nothing, rather than put it
// back.
func TestHWCheckpointForget(t *testing.T) {
	dir := t.TempDir()
	c := loadHWCheckpoints(dir, hclog.NewNullLogger())
	a, b := topicPartition{"a", 0}, topicPartition{"b", 1}
	both := map[topicPartition]hwEntry{
		a: {Topic: "a", TopicID: "ida", Partition: 0, HW: 10},
		b: {Topic: "b", TopicID: "idb", Partition: 1, HW: 7},
	}
	all := func(hwEntry) bool { return true }
	require.NoError(t, c.save(both, c.forgetsSoFar(), all))
	listed := c.forgetsSoFar()
	require.NoError(t, c.forget(a))
	assert.Equal(t, int64(0), c.of(a, "ida"))
	assert.Equal(t, int64(0), loadHWCheckpoints(dir, hclog.NewNullLogger()).of(a, "ida"), "forgotten on disk")
	require.NoError(t, c.save(both, listed, all), "a save listed before the forget")
	assert.Equal(t, int64(0), loadHWCheckpoints(dir, hclog.NewNullLogger()).of(a, "ida"), "not put back")
	assert.Equal(t, int64(7), loadHWCheckpoints(dir, hclog.NewNullLogger()).of(b, "idb"))
	require.NoError(t, c.forget(a), "forgetting what is not there")
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
		require.NoError(t, c.save(map[topicPartition]hwEntry{{"t", 0}: {Topic: "t", TopicID: "i", HW: 1}}, 0, func(hwEntry) bool { return false }))
		assert.Equal(t, int64(1), loadHWCheckpoints(dir, hclog.NewNullLogger()).of(topicPartition{"t", 0}, "i"))
	})
}
