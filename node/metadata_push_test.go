package node

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"gostream/broker"
	"gostream/security/guard"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/rpcapi"
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
	b := broker.NewReplicas(broker.ReplicasConfig{Broker: 2, Root: root})
	n := &Node{broker: b, cfg: Config{ID: 2, Controllers: []ControllerAddr{{ID: 1, Addr: "127.0.0.1:1"}}}}
	n.sec = &guard.Guard{}
	h := rpcapi.New(rpcapi.Config{ID: 2, Replicas: b, Security: n.sec, Controller: n.activeController, ApplyMetadata: n.applyParsed})

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
		return h.Handle(context.Background(), &transport.Request{Frame: transport.Frame{API: uint16(transport.APIUpdateMetadata), Version: transport.Version1, Body: body}, RemoteAddr: "test"})
	}

	// Epoch 7 (topics a and b) is taken, its replicas not yet opened: the
	// push that brought it is still reconciling.
	require.NoError(t, b.AcceptMetadata(meta(7, "a", "b")))
	answered := make(chan error, 1)
	go func() {
		_, err := push(meta(6, "a"))(context.Background())
		answered <- err
	}()
	assert.Never(t, func() bool { return len(answered) > 0 }, 200*time.Millisecond, 10*time.Millisecond,
		"the stale push is answered before the newer metadata is applied")

	require.NoError(t, b.ApplyMetadata(meta(7, "a", "b")))
	select {
	case err := <-answered:
		require.ErrorIs(t, err, transport.ErrStaleMetadata)
	case <-time.After(10 * time.Second):
		t.Fatal("the stale push is not answered after the newer metadata was applied")
	}
	for _, name := range []string{"a", "b"} {
		_, rep, err := b.Lookup(name, "", 0)
		require.NoError(t, err)
		assert.NotNil(t, rep, "replica of %s open", name)
	}

	// A stale push whose answerer gives up gets an error, not a promise.
	require.NoError(t, b.AcceptMetadata(meta(9, "a", "b", "c")))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = push(meta(8, "a", "b"))(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, transport.ErrStaleMetadata)
	assert.ErrorIs(t, err, transport.ErrTimeout, "the wait's deadline, as the protocol says it")
}

// A burst of changes costs each broker a few pushes, not one each: the
// changes made while a push is in flight go together in the next. With
// a push per change, queued one behind the other at a broker that takes
// 50 ms for each (an fsync and replicas to open), the last of 40 changes
// waited two seconds, past the push timeout, and the broker was taken
// for lagging.
func TestPushesOfABurstAreCoalesced(t *testing.T) {
	var mu sync.Mutex
	var pushes []int64
	handler := transport.HandlerFunc(func(ctx context.Context, req *transport.Request) transport.Reply {
		var r transport.MetadataBlob
		if err := transport.Unmarshal(req.Body, &r); err != nil {
			return transport.Immediate(nil, err)
		}
		return func(context.Context) (transport.Message, error) {
			m, err := metadata.Parse(r.Metadata, "test")
			if err != nil {
				return nil, err
			}
			mu.Lock() // one at a time, as a broker applies them
			defer mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the broker's work on each push
			pushes = append(pushes, m.Epoch)
			return nil, nil
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := transport.NewServer(transport.ServerConfig{}, handler)
	go srv.Serve(ln)
	defer srv.Close()

	n := &Node{cfg: Config{ID: 1}, pool: transport.NewPool(transport.ConnConfig{}), logger: hclog.NewNullLogger()}
	defer n.pool.Close()
	n.pushes = newPushers(1, n.pool, n.activeController, n.logger)
	meta := func(epoch int64) *metadata.Cluster {
		m := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: epoch}
		m.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:1"})
		m.PutBroker(metadata.Broker{ID: 2, Addr: ln.Addr().String()})
		return m
	}
	const changes = 40
	start := time.Now()
	var wg sync.WaitGroup
	for e := int64(1); e <= changes; e++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.pushMetadata(ctx, meta(e))
		}()
	}
	wg.Wait()
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, pushes)
	assert.Equal(t, int64(changes), pushes[len(pushes)-1], "the newest metadata is the last pushed")
	assert.LessOrEqual(t, len(pushes), 6, "pushes of %d changes: %v", changes, pushes)
	assert.Less(t, took, time.Second, "every change's push answered")
	p := n.pushes.get(2)
	assert.False(t, p.lagging)
	assert.Equal(t, int64(changes), p.acked)
}
