package storage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/storage"
)

func TestRootQuarantinesAndRemovesReplicas(t *testing.T) {
	root, err := storage.OpenRoot(t.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(t, err)
	defer root.Close()
	l, err := root.OpenLog("orders", 0, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	dir, err := root.ReplicaDir("orders", 0)
	require.NoError(t, err)
	before, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, before)

	// Quarantine keeps every file whole, under quarantine/, and leaves the
	// replica directory empty but for it.
	dest, err := root.QuarantineReplica("orders", 0)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, storage.QuarantineDir), filepath.Dir(dest))
	kept, err := os.ReadDir(dest)
	require.NoError(t, err)
	assert.Len(t, kept, len(before))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, storage.QuarantineDir, left[0].Name())

	// A replica, then the topic, removed; removing what is gone is no error.
	require.NoError(t, root.RemoveReplica("orders", 0))
	assert.NoDirExists(t, dir)
	require.NoError(t, root.RemoveReplica("orders", 0))
	require.NoError(t, root.RemoveTopic("orders"))
	topicDir, err := root.TopicDir("orders")
	require.NoError(t, err)
	assert.NoDirExists(t, topicDir)
	require.NoError(t, root.RemoveTopic("never-was"))

	// Names that would leave the root are refused before anything moves.
	assert.ErrorIs(t, root.RemoveTopic("../x"), storage.ErrInvalidName)
	_, err = root.QuarantineReplica("../x", 0)
	assert.ErrorIs(t, err, storage.ErrInvalidName)
}

// A topic of the longest name a topic may have (249 bytes) is removed,
// replica by replica and whole: its place under deleted/ keeps only a
// part of the name (the whole name and MkdirTemp's suffix took more than
// the 255 bytes of a file name, and the delete failed).
func TestRootRemovesATopicOfTheLongestName(t *testing.T) {
	root, err := storage.OpenRoot(t.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(t, err)
	defer root.Close()
	name := strings.Repeat("t", 249)
	for p := range int32(2) {
		l, err := root.OpenLog(name, p, storage.Options{})
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
	require.NoError(t, root.RemoveReplica(name, 1))
	dir, err := root.ReplicaDir(name, 1)
	require.NoError(t, err)
	assert.NoDirExists(t, dir)
	require.NoError(t, root.RemoveTopic(name))
	dir, err = root.TopicDir(name)
	require.NoError(t, err)
	assert.NoDirExists(t, dir)
}
