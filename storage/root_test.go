package storage_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
)

func readStamp(t *testing.T, dir string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, storage.StampFile))
	require.NoError(t, err)
	return data
}

func TestOpenRootStamps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	r, err := storage.OpenRoot(dir, 3, "cluster-a", testLogger(t))
	require.NoError(t, err)
	rootID := r.Stamp().RootID
	assert.Regexp(t, `^[0-9a-f]{32}$`, rootID, "a new root gets a unique id")
	assert.Equal(t, storage.Stamp{Version: 1, BrokerID: 3, ClusterID: "cluster-a", RootID: rootID}, r.Stamp())
	assert.True(t, filepath.IsAbs(r.Dir()))
	var st storage.Stamp
	require.NoError(t, json.Unmarshal(readStamp(t, dir), &st))
	assert.Equal(t, r.Stamp(), st, "the stamp is on disk")
	require.NoError(t, r.Close())

	r, err = storage.OpenRoot(dir, 3, "cluster-a", testLogger(t))
	require.NoError(t, err, "the owner reopens its root")
	assert.Equal(t, int32(3), r.Stamp().BrokerID)
	assert.Equal(t, rootID, r.Stamp().RootID, "the root id stays")
	require.NoError(t, r.Close())
	r, err = storage.OpenRoot(dir, 3, "", testLogger(t))
	require.NoError(t, err, "a node that does not know the cluster id yet may open its root")
	assert.Equal(t, "cluster-a", r.Stamp().ClusterID)
	require.NoError(t, r.Close())

	other, err := storage.OpenRoot(filepath.Join(t.TempDir(), "root"), 3, "cluster-a", testLogger(t))
	require.NoError(t, err)
	defer other.Close()
	assert.NotEqual(t, rootID, other.Stamp().RootID, "another root of the same broker id is another root")
}

// A root stamped before roots had ids gets one when it is opened, and
// keeps it.
func TestOpenRootGivesAnOldStampARootID(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, storage.StampFile), []byte(`{"version":1,"broker_id":2,"cluster_id":"c"}`), 0o644))
	r, err := storage.OpenRoot(dir, 2, "c", testLogger(t))
	require.NoError(t, err)
	id := r.Stamp().RootID
	assert.Regexp(t, `^[0-9a-f]{32}$`, id)
	require.NoError(t, r.Close())
	var st storage.Stamp
	require.NoError(t, json.Unmarshal(readStamp(t, dir), &st))
	assert.Equal(t, id, st.RootID, "written to the stamp")
}

// Two processes never use one root: the second open fails while the first
// holds it, naming the holder, and succeeds once it is closed.
func TestOpenRootRefusesASecondUser(t *testing.T) {
	dir := t.TempDir()
	r, err := storage.OpenRoot(dir, 2, "c", testLogger(t))
	require.NoError(t, err)
	_, err = storage.OpenRoot(dir, 2, "c", testLogger(t))
	require.ErrorIs(t, err, storage.ErrRootInUse)
	assert.Contains(t, err.Error(), fmt.Sprintf("pid %d", os.Getpid()))
	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "Close is idempotent")
	r, err = storage.OpenRoot(dir, 2, "c", testLogger(t))
	require.NoError(t, err)
	require.NoError(t, r.Close())
}

func TestOpenRootRefusesAnotherOwner(t *testing.T) {
	dir := t.TempDir()
	r, err := storage.OpenRoot(dir, 3, "cluster-a", testLogger(t))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	stamp := readStamp(t, dir)
	for _, tc := range []struct {
		name    string
		broker  int32
		cluster string
	}{
		{"another broker", 4, "cluster-a"},
		{"another broker, cluster unknown", 4, ""},
		{"another cluster", 3, "cluster-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := storage.OpenRoot(dir, tc.broker, tc.cluster, testLogger(t))
			assert.ErrorIs(t, err, storage.ErrStampMismatch)
			assert.Equal(t, stamp, readStamp(t, dir), "the stamp is unchanged")
		})
	}
	r, err = storage.OpenRoot(dir, 3, "cluster-a", testLogger(t))
	require.NoError(t, err, "a refused open leaves the root unlocked")
	require.NoError(t, r.Close())
}

func TestOpenRootLearnsClusterID(t *testing.T) {
	dir := t.TempDir()
	r, err := storage.OpenRoot(dir, 2, "", testLogger(t))
	require.NoError(t, err)
	assert.Empty(t, r.Stamp().ClusterID)
	require.NoError(t, r.Close())
	r, err = storage.OpenRoot(dir, 2, "c1", testLogger(t))
	require.NoError(t, err)
	assert.Equal(t, "c1", r.Stamp().ClusterID)
	require.NoError(t, r.Close())
	_, err = storage.OpenRoot(dir, 2, "c2", testLogger(t))
	assert.ErrorIs(t, err, storage.ErrStampMismatch, "once learned, the cluster id is enforced")
	assert.ErrorIs(t, r.SetClusterID("c2"), storage.ErrStampMismatch)
	assert.NoError(t, r.SetClusterID("c1"))
}

func TestOpenRootGarbledStamp(t *testing.T) {
	for name, content := range map[string]string{
		"not json":         "broker 3\n",
		"empty":            "",
		"truncated json":   `{"version": 1, "broker_id": 3`,
		"unknown version":  `{"version": 2, "broker_id": 3}`,
		"no broker id":     `{"version": 1}`,
		"negative broker":  `{"version": 1, "broker_id": -3}`,
		"broker id string": `{"version": 1, "broker_id": "3"}`,
		"bad root id":      `{"version": 1, "broker_id": 3, "root_id": "xyz"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, storage.StampFile)
			require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
			_, err := storage.OpenRoot(dir, 3, "c", testLogger(t))
			assert.ErrorIs(t, err, storage.ErrCorrupt)
			assert.NotErrorIs(t, err, storage.ErrStampMismatch)
			assert.Equal(t, content, string(readStamp(t, dir)), "a garbled stamp is never rewritten")
		})
	}
}

func TestOpenRootRejectsBadBrokerID(t *testing.T) {
	for _, id := range []int32{0, -1} {
		dir := filepath.Join(t.TempDir(), "root")
		_, err := storage.OpenRoot(dir, id, "c", testLogger(t))
		assert.Error(t, err)
		_, statErr := os.Stat(filepath.Join(dir, storage.StampFile))
		assert.True(t, os.IsNotExist(statErr), "no stamp for broker id %d", id)
	}
}

func TestReplicaDirStaysInsideRoot(t *testing.T) {
	r, err := storage.OpenRoot(t.TempDir(), 1, "c", testLogger(t))
	require.NoError(t, err)
	inside := func(p string) bool {
		rel, err := filepath.Rel(r.Dir(), p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	}
	for _, tc := range []struct {
		topic     string
		partition int32
		ok        bool
	}{
		{"orders", 0, true},
		{"orders", 7, true},
		{"..a", 1, true},
		{"..", 0, false},
		{".", 0, false},
		{"../../etc", 0, false},
		{"a/../../b", 0, false},
		{"/abs", 0, false},
		{`..\..\x`, 0, false},
		{"a\x00", 0, false},
		{"", 0, false},
		{"orders", -1, false},
	} {
		dir, err := r.ReplicaDir(tc.topic, tc.partition)
		if !tc.ok {
			assert.Error(t, err, "%q/%d", tc.topic, tc.partition)
			assert.Empty(t, dir)
			continue
		}
		require.NoError(t, err)
		assert.True(t, inside(dir), "%s is outside %s", dir, r.Dir())
		assert.Equal(t, filepath.Clean(dir), dir)
		assert.NotEqual(t, r.Dir(), dir)
	}
	_, err = r.ReplicaDir("orders", -1)
	assert.ErrorIs(t, err, storage.ErrInvalidPartition)
	_, err = r.ReplicaDir("a/b", 0)
	assert.ErrorIs(t, err, storage.ErrInvalidName)

	// Distinct replicas get distinct directories.
	a, _ := r.ReplicaDir("t", 1)
	b, _ := r.ReplicaDir("t", 11)
	c, _ := r.ReplicaDir("t1", 1)
	assert.NotEqual(t, a, b)
	assert.NotEqual(t, a, c)
}

func TestRootOpenLog(t *testing.T) {
	root := t.TempDir()
	r, err := storage.OpenRoot(root, 1, "c", testLogger(t))
	require.NoError(t, err)
	l, err := r.OpenLog("orders", 2, storage.Options{Logger: testLogger(t)})
	require.NoError(t, err)
	defer l.Close()
	mustAppend(t, l, sizedBatch(t, 100, 'x'), 0)
	want, _ := r.ReplicaDir("orders", 2)
	assert.Equal(t, want, l.Dir())
	assert.FileExists(t, filepath.Join(want, segName(0)))
	_, err = r.OpenLog("../escape", 0, storage.Options{})
	assert.ErrorIs(t, err, storage.ErrInvalidName)
	_, statErr := os.Stat(filepath.Join(filepath.Dir(root), "escape"))
	assert.True(t, os.IsNotExist(statErr))
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, storage.WriteFileAtomic(path, []byte("one")))
	require.NoError(t, storage.WriteFileAtomic(path, []byte("two")))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files are left behind")
}

// The cluster id is learned from the controller's metadata while other
// goroutines read the stamp (registration does): both are safe at once
// (the race detector checks).
func TestRootStampReadWhileClusterIDIsLearned(t *testing.T) {
	r, err := storage.OpenRoot(t.TempDir(), 1, "", testLogger(t))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = r.Stamp().ClusterID
		}
	}()
	require.NoError(t, r.SetClusterID("c-1"))
	<-done
	assert.Equal(t, "c-1", r.Stamp().ClusterID)
}
