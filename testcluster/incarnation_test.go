package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// A topic deleted and created again while a producer writes to it: the
// producer's records never land in the new topic (they fail, naming the
// recreation), and a consumer of the old topic is told the same instead of
// reading the new one's offsets.
func TestRecreatedTopicNeverGetsTheOldProducersRecords(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "d", 1, 3)

	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 3 * time.Second, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	cons, err := client.NewConsumer(cl, "d", 0, client.ConsumerConfig{})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sent, okBefore atomic.Int64
	var recreated atomic.Bool
	var mu sync.Mutex
	var firstErr error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := p.Send(ctx, client.ProducerRecord{Topic: "d", Value: []byte(fmt.Sprintf("old-%d", i))})
			sent.Add(1)
			switch {
			case err == nil && !recreated.Load():
				okBefore.Add(1)
			case err != nil:
				mu.Lock()
				if firstErr == nil && errors.Is(err, client.ErrTopicRecreated) {
					firstErr = err
				}
				mu.Unlock()
			}
		}
	}()
	require.Eventually(t, func() bool { return okBefore.Load() >= 50 }, 30*time.Second, 10*time.Millisecond)
	// The consumer has read the old topic before the delete.
	recs, err := cons.Poll(ctx, time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, recs)

	require.NoError(t, cl.DeleteTopic(ctx, "d"))
	createTopic(t, cl, "d", 1, 3)
	recreated.Store(true)
	// Let the old producer keep trying for a while against the new topic.
	before := sent.Load()
	require.Eventually(t, func() bool { return sent.Load() >= before+20 }, 30*time.Second, 10*time.Millisecond)
	close(stop)
	<-done

	mu.Lock()
	require.Error(t, firstErr, "the old producer is told the topic was recreated")
	assert.Contains(t, firstErr.Error(), "was deleted")
	mu.Unlock()

	// The new topic holds only what was written to it.
	p2, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 3 * time.Second, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p2.Close() })
	for i := range 5 {
		_, err := p2.Send(ctx, client.ProducerRecord{Topic: "d", Value: []byte(fmt.Sprintf("new-%d", i))})
		require.NoError(t, err)
	}
	got := consumeAll(t, cl, "d", 0)
	require.Len(t, got, 5, "the new topic holds only the new producer's records: %v", got)
	for off, v := range got {
		assert.True(t, strings.HasPrefix(v, "new-"), "offset %d holds %q", off, v)
	}

	// The old consumer is not moved onto the new topic's offsets.
	_, err = cons.Poll(ctx, 200*time.Millisecond)
	require.ErrorIs(t, err, client.ErrTopicRecreated)
}

// A broker comes back with a deleted topic's replica on disk where the
// topic created again under the same name has one (its disk restored from
// a backup taken before the delete): it removes it and rejoins the new
// topic as an empty follower, never mixing the two. (A broker down while
// the topic is created again gets no replica of it: placement goes to the
// brokers that answer.)
func TestReplicaOfDeletedIncarnationIsRemoved(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "e", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 3 * time.Second, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	for i := range 20 {
		_, err := p.Send(ctx, client.ProducerRecord{Topic: "e", Value: []byte(fmt.Sprintf("old-%d", i))})
		require.NoError(t, err)
	}
	oldID, err := os.ReadFile(filepath.Join(c.Node(3).ReplicaDir("e", 0), "topic-id"))
	require.NoError(t, err)

	// The backup of broker 3's replica, taken while it was stopped.
	backup := filepath.Join(t.TempDir(), "e-0")
	require.NoError(t, c.Node(3).Stop(10*time.Second))
	require.NoError(t, copyTree(c.Node(3).ReplicaDir("e", 0), backup))
	require.NoError(t, c.StartNode(3))
	require.NoError(t, cl.DeleteTopic(ctx, "e"))
	tm := createTopic(t, cl, "e", 1, 3)
	require.NotEqual(t, strings.TrimSpace(string(oldID)), tm.ID)
	require.Contains(t, tm.Partitions[0].Replicas, int32(3))
	// Restored: the old incarnation's replica where the new one's is.
	require.NoError(t, c.Node(3).Stop(10*time.Second))
	require.NoError(t, os.RemoveAll(c.Node(3).ReplicaDir("e", 0)))
	require.NoError(t, copyTree(backup, c.Node(3).ReplicaDir("e", 0)))
	require.NoError(t, c.StartNode(3))
	require.NoError(t, c.Node(3).WaitHealthy(30*time.Second))

	// Broker 3 is an active follower of the new topic; the leader catches
	// it up from empty with the new records.
	p2, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 3 * time.Second, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p2.Close() })
	// A write fails (its outcome unknown) while broker 3 has not yet heard
	// of the new topic; each attempt has its own value.
	attempt := 0
	require.Eventually(t, func() bool {
		attempt++
		_, err := p2.Send(ctx, client.ProducerRecord{Topic: "e", Value: []byte(fmt.Sprintf("new-%d", attempt))})
		if err != nil {
			t.Logf("produce to the new topic: %v", err)
		}
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	id, err := os.ReadFile(filepath.Join(c.Node(3).ReplicaDir("e", 0), "topic-id"))
	require.NoError(t, err)
	assert.Equal(t, tm.ID, strings.TrimSpace(string(id)))
	leader, err := ReadReplica(c.Node(1).ReplicaDir("e", 0))
	require.NoError(t, err)
	infos, err := ReadReplica(c.Node(3).ReplicaDir("e", 0))
	require.NoError(t, err)
	assert.Equal(t, leader, infos, "broker 3 holds exactly the new topic's batches")
	require.NotEmpty(t, infos)
	assert.Equal(t, int64(0), infos[0].Base)
	for _, b := range infos {
		for _, v := range b.Values {
			assert.True(t, strings.HasPrefix(v, "new-"), "broker 3 holds %q", v)
		}
	}
}
