package metadata_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/storage"
)

var validTopicNames = []string{"a", "orders.v1", "A_b-9", "..a", "a..", "-", "_", strings.Repeat("x", 249)}

var invalidTopicNames = []string{
	"", ".", "..", "a/b", "/a", "a/", "../x", "x/..", `a\b`, "a b", " a", "a\n", "a\x00",
	strings.Repeat("x", 250), "ünïcode", "主题", "a:b", "a*", "~",
}

func TestValidateTopicName(t *testing.T) {
	for _, name := range validTopicNames {
		t.Run("valid "+name[:min(len(name), 20)], func(t *testing.T) {
			assert.NoError(t, metadata.ValidateTopicName(name))
		})
	}
	for _, name := range invalidTopicNames {
		t.Run("invalid "+name[:min(len(name), 20)], func(t *testing.T) {
			assert.ErrorIs(t, metadata.ValidateTopicName(name), metadata.ErrInvalidTopicName)
		})
	}
}

// FuzzValidateTopicName: every name the cluster allows is one directory
// name that storage takes, its replicas' directories inside the root's
// topics/ (storage checks only that a name is one directory name; the
// naming rule is metadata's, and must never allow a name storage refuses).
func FuzzValidateTopicName(f *testing.F) {
	for _, name := range append(append([]string{}, validTopicNames...), invalidTopicNames...) {
		f.Add(name)
	}
	root, err := storage.OpenRoot(f.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(f, err)
	f.Cleanup(func() { root.Close() })
	topics := filepath.Join(root.Dir(), "topics")
	f.Fuzz(func(t *testing.T, name string) {
		if metadata.ValidateTopicName(name) != nil {
			return
		}
		dir, err := root.TopicDir(name)
		if err != nil {
			t.Fatalf("metadata allows %q, storage refuses it: %v", name, err)
		}
		if filepath.Dir(dir) != topics || filepath.Base(dir) != name {
			t.Fatalf("topic %q has directory %s, not one directory under %s", name, dir, topics)
		}
		rdir, err := root.ReplicaDir(name, 0)
		if err != nil || filepath.Dir(rdir) != dir {
			t.Fatalf("topic %q: replica directory %s (%v), not under %s", name, rdir, err, dir)
		}
	})
}
