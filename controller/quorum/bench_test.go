package quorum

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// benchMeta is metadata of a middling cluster: three brokers, 200 topics
// of three partitions.
func benchMeta(b *testing.B) *metadata.Cluster {
	m := testMeta(1)
	for id := int32(1); id <= 3; id++ {
		m.PutBroker(metadata.Broker{ID: id, Addr: fmt.Sprintf("10.0.0.%d:9400", id)})
	}
	for i := range 200 {
		_, err := m.AddTopic(fmt.Sprintf("topic-%03d", i), 3, 3)
		require.NoError(b, err)
	}
	m.AssignTopicIDs()
	return m
}

// BenchmarkCommitFile is one metadata change as the single controller
// persists it: the whole document written, fsync'd and renamed.
func BenchmarkCommitFile(b *testing.B) {
	m := benchMeta(b)
	store := metadata.NewStore(filepath.Join(b.TempDir(), "metadata.json"))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Epoch++
		if err := store.Save(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitRaft is one metadata change committed by three
// candidates on loopback TCP, each with its bolt store fsync'd.
func BenchmarkCommitRaft(b *testing.B) {
	cs := startNetCandidates(b, []string{"c", "c", "c"})
	var l *Group
	deadline := time.Now().Add(10 * time.Second)
	for l == nil && time.Now().Before(deadline) {
		for _, c := range cs {
			if c.group.IsLeader() {
				l = c.group
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NotNil(b, l, "no leader")
	m := benchMeta(b)
	ctx := context.Background()
	require.NoError(b, l.Propose(ctx, NoMetadata, m, nil))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base := m.Epoch
		m.Epoch++
		if err := l.Propose(ctx, base, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
