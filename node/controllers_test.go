package node

import (
	"context"
	"gostream/broker"
	"gostream/storage"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// TestControllerRequestsFindTheActiveCandidate: a controller request goes
// first to the candidate the newest metadata names, then to the others;
// a candidate that cannot be reached or answers NotController is passed
// over, and any other answer is final.
func TestControllerRequestsFindTheActiveCandidate(t *testing.T) {
	var asked [4]atomic.Int32
	serve := func(id int32, answer error) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := transport.NewServer(transport.ServerConfig{}, transport.HandlerFunc(func(_ context.Context, req *transport.Request) transport.Reply {
			asked[id].Add(1)
			return transport.Immediate(&transport.MetadataBlob{}, answer)
		}))
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := dead.Addr().String()
	dead.Close()

	cands := []ControllerAddr{
		{ID: 1, Addr: deadAddr},
		{ID: 2, Addr: serve(2, transport.ErrNotController)},
		{ID: 3, Addr: serve(3, nil)},
	}
	root, err := storage.OpenRoot(t.TempDir(), 9, "", hclog.NewNullLogger())
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	n := &Node{cfg: Config{ID: 9, Controllers: cands}, pool: transport.NewPool(transport.ConnConfig{}), broker: broker.NewReplicas(broker.ReplicasConfig{Broker: 9, Root: root})}
	defer n.pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	assert.Equal(t, cands, n.controllerOrder(), "no metadata: the list's order")
	got, err := n.callController(ctx, transport.APIFetchMetadata, &transport.FetchMetadataRequest{}, &transport.MetadataBlob{})
	require.NoError(t, err)
	assert.Equal(t, int32(3), got.ID)
	assert.Equal(t, int32(1), asked[2].Load(), "candidate 2 was asked and refused")

	require.NoError(t, n.broker.AcceptMetadata(&metadata.Cluster{ClusterID: "0123456789abcdef", ControllerID: 3, Epoch: 5}))
	assert.Equal(t, []ControllerAddr{cands[2], cands[0], cands[1]}, n.controllerOrder(), "the named candidate first")
	_, err = n.callController(ctx, transport.APIFetchMetadata, &transport.FetchMetadataRequest{}, &transport.MetadataBlob{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), asked[2].Load(), "the named active one answered: nobody else was asked")

	// Any other refusal is the controller's answer, not a reason to ask
	// the next (the change may have been judged and refused).
	n.cfg.Controllers = []ControllerAddr{{ID: 4, Addr: serve(0, transport.ErrInvalidRequest)}, cands[2]}
	require.NoError(t, n.broker.AcceptMetadata(&metadata.Cluster{ClusterID: "0123456789abcdef", ControllerID: 4, Epoch: 6}))
	got, err = n.callController(ctx, transport.APIRegisterBroker, &transport.RegisterBrokerRequest{}, &transport.MetadataBlob{})
	require.ErrorIs(t, err, transport.ErrInvalidRequest)
	assert.Equal(t, int32(4), got.ID)
	assert.Equal(t, int32(2), asked[3].Load())
}

// TestAuditEventWaitsForTheNextActiveController: just after a transfer of
// the controller group, every candidate may still answer NotController
// (the new leader catches up before it calls itself active). The audit
// event of the transfer is sent again until one takes it, not dropped
// after one round (the event went missing from cluster history).
func TestAuditEventWaitsForTheNextActiveController(t *testing.T) {
	var asked, recorded atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := transport.NewServer(transport.ServerConfig{}, transport.HandlerFunc(func(_ context.Context, req *transport.Request) transport.Reply {
		if asked.Add(1) <= 6 {
			return transport.Immediate(nil, transport.ErrNotController)
		}
		recorded.Add(1)
		return transport.Immediate(nil, nil)
	}))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	n := &Node{cfg: Config{ID: 9, Controllers: []ControllerAddr{{ID: 2, Addr: ln.Addr().String()}}},
		pool: transport.NewPool(transport.ConnConfig{}), broker: broker.NewReplicas(broker.ReplicasConfig{Broker: 9}), logger: hclog.NewNullLogger()}
	defer n.pool.Close()
	n.audit(context.Background(), transport.HistoryEvent{ChangeResult: transport.ChangeResult{Partition: -1, Action: transport.ActionControllerTransfer}})
	assert.Equal(t, int32(1), recorded.Load(), "the event was recorded once, after %d refusals", asked.Load()-1)
}
