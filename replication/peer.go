package replication

import (
	"context"

	"gostream/transport"
)

// Peer is how a leader reaches one follower. Replicate requests sent with
// SendReplicate on one Peer reach the follower in the order they were sent.
type Peer interface {
	// SendReplicate writes a Replicate request and returns a function that
	// waits for the follower's log end once the batch is durable there. An
	// error from SendReplicate means the request was not sent. It keeps
	// nothing of req once it returns: the caller may reuse req.Batch.
	SendReplicate(ctx context.Context, req *transport.ReplicateRequest) (func(context.Context) (int64, error), error)
	// ReplicaState asks the follower for its position (and fences it at the
	// request's epoch).
	ReplicaState(ctx context.Context, req *transport.ReplicaStateRequest) (*transport.ReplicaStateResponse, error)
}

// Peers resolves a broker id to a Peer.
type Peers func(brokerID int32) (Peer, error)
