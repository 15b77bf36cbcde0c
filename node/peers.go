package node

import (
	"context"
	"fmt"

	"gostream/metadata"
	"gostream/replication"
	"gostream/transport"
)

// peers reaches other brokers by id, at the address the metadata gives.
type peers struct {
	pool     *transport.Pool
	metadata func() *metadata.Cluster
}

func (ps *peers) addr(id int32) (string, error) {
	meta := ps.metadata()
	if meta == nil {
		return "", fmt.Errorf("%w: no metadata", transport.ErrBrokerNotAvailable)
	}
	b, ok := meta.Broker(id)
	if !ok {
		return "", fmt.Errorf("%w: broker %d is not registered", transport.ErrBrokerNotAvailable, id)
	}
	return b.Addr, nil
}

// peer implements replication.Peers.
func (ps *peers) peer(id int32) (replication.Peer, error) {
	addr, err := ps.addr(id)
	if err != nil {
		return nil, err
	}
	return &peer{pool: ps.pool, addr: addr}, nil
}

type peer struct {
	pool *transport.Pool
	addr string
}

func (p *peer) SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error) {
	c, err := p.pool.Get(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	pend, err := c.Send(ctx, transport.APIReplicate, req)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (int64, error) {
		var resp transport.ReplicateResponse
		err := pend.Wait(ctx, &resp)
		return resp.LogEndOffset, err
	}, nil
}

func (p *peer) ReplicaState(ctx context.Context, req *transport.ReplicaStateRequest) (*transport.ReplicaStateResponse, error) {
	var resp transport.ReplicaStateResponse
	if err := p.pool.Call(ctx, p.addr, transport.APIReplicaState, req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (p *peer) ReplicaBatches(ctx context.Context, req *transport.ReplicaBatchesRequest) ([]transport.BatchID, error) {
	var resp transport.ReplicaBatchesResponse
	if err := p.pool.Call(ctx, p.addr, transport.APIReplicaBatches, req, &resp); err != nil {
		return nil, err
	}
	return resp.Batches, nil
}

func (p *peer) ReplicaDigest(ctx context.Context, req *transport.ReplicaDigestRequest) ([]byte, error) {
	var resp transport.ReplicaDigestResponse
	if err := p.pool.Call(ctx, p.addr, transport.APIReplicaDigest, req, &resp); err != nil {
		return nil, err
	}
	return resp.Digest, nil
}

func (p *peer) TruncateReplica(ctx context.Context, req *transport.TruncateReplicaRequest) error {
	return p.pool.Call(ctx, p.addr, transport.APITruncateReplica, req, nil)
}

func (p *peer) ResetReplica(ctx context.Context, req *transport.TruncateReplicaRequest) error {
	return p.pool.Call(ctx, p.addr, transport.APIResetReplica, req, nil)
}
