package node

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/storage"
	"gostream/transport"
)

// A push of metadata that a newer push overtook is answered
// StaleMetadata, and the controller takes that answer to mean the broker
// has the change. So the answer waits until the newer metadata's replicas
// are open: answered at once, a stream created at the older epoch was
// acknowledged to its creator while this broker, one of its replicas,
// still held no replica of it, and the stream's first write failed
// (UnknownPartition).
func TestStalePushIsAnsweredOnceTheNewerMetadataIsApplied(t *testing.T) {
	root, err := storage.OpenRoot(t.TempDir(), 2, "", hclog.NewNullLogger())
	require.NoError(t, err)
	b := newBroker(2, root, storage.Options{}, hclog.NewNullLogger(), newMetrics())
	n := &Node{broker: b, cfg: Config{ID: 2, Controllers: []ControllerAddr{{ID: 1, Addr: "127.0.0.1:1"}}}}
	h := &rpcHandler{n: n}

	meta := func(epoch int64, topics ...string) *metadata.Cluster {
		m := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: epoch}
		for id := int32(1); id <= 3; id++ {
			m.PutBroker(metadata.Broker{ID: id, Addr: "127.0.0.1:1"})
		}
		for i, name := range topics {
			m.Topics = append(m.Topics, metadata.Topic{Name: name, ID: "0123456789abcdef0123456789abcde" + string(rune('0'+i)), ReplicationFactor: 3,
				Partitions: []metadata.Partition{{Replicas: []int32{1, 2, 3}, Active: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1}}})
		}
		return m
	}
	push := func(m *metadata.Cluster) transport.Reply {
		blob, err := metadata.Marshal(m)
		require.NoError(t, err)
		body := transport.Marshal(nil, &transport.MetadataBlob{Metadata: blob})
		return h.updateMetadata(&transport.Request{Frame: transport.Frame{API: uint16(transport.APIUpdateMetadata), Body: body}, RemoteAddr: "test"})
	}

	// Epoch 7 (topics a and b) is taken, its replicas not yet opened: the
	// push that brought it is still reconciling.
	require.NoError(t, b.acceptMetadata(meta(7, "a", "b")))
	answered := make(chan error, 1)
	go func() {
		_, err := push(meta(6, "a"))(context.Background())
		answered <- err
	}()
	assert.Never(t, func() bool { return len(answered) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"the stale push is answered before the newer metadata is applied")

	require.NoError(t, b.reconcile())
	select {
	case err := <-answered:
		require.ErrorIs(t, err, transport.ErrStaleMetadata)
	case <-time.After(10 * time.Second):
		t.Fatal("the stale push is not answered after the newer metadata was applied")
	}
	for _, name := range []string{"a", "b"} {
		_, rep, err := b.lookup(name, "", 0)
		require.NoError(t, err)
		assert.NotNil(t, rep, "replica of %s open", name)
	}

	// A stale push whose answerer gives up gets an error, not a promise.
	require.NoError(t, b.acceptMetadata(meta(9, "a", "b", "c")))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = push(meta(8, "a", "b"))(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, transport.ErrStaleMetadata)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
