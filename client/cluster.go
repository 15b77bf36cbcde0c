package client

import (
	"context"
	"fmt"
	"slices"

	"gostream/metadata"
	"gostream/transport"
)

// Calls that operators make to look at one broker, or to act on one
// replica: what a node sees of the cluster, where a replica's log stands,
// and catch-up.

// Member is one gossip member as a node sees it.
type Member struct {
	BrokerID int32
	Gossip   string                // gossip address
	State    transport.GossipState // alive, suspect, dead or left
	RootID   string                // the member's storage root; several members with one broker id are several processes
}

// ClusterView is one node's view of the cluster.
type ClusterView struct {
	// NodeID is the broker id of the node that answered.
	NodeID int32
	// Metadata is the cluster metadata the node holds, in the JSON format of
	// the controller's metadata file; empty when it holds none yet.
	Metadata []byte
	// Members is every gossip member the node knows, with its state.
	Members []Member
	// ControllerRefusal, from the controller's node, says why the
	// controller refuses every change (its metadata is missing or older
	// than a broker's); empty when it accepts them.
	ControllerRefusal string
}

// ReplicaState is one replica's position as its broker reports it.
type ReplicaState struct {
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64 // as far as the replica knows it
	LastEpoch      int32 // leader epoch of its last batch, -1 when empty
	FencedEpoch    int32 // the highest leader epoch it has seen
	// Problem is why the replica cannot be trusted, in its own broker's
	// words (damaged, its storage failed, a full disk, behind an active
	// follower); empty when it is healthy.
	Problem string
}

// CatchUpResult is what catch-up copied: the follower's log end before and
// after.
type CatchUpResult struct {
	FromOffset int64
	ToOffset   int64
}

// DescribeCluster asks the node at addr (an RPC address) for its view of
// the cluster. It is one request, not retried: a caller that surveys the
// cluster wants to know which nodes answer. An unreachable node gives an
// error matching transport.ErrBrokerNotAvailable, a slow one
// transport.ErrTimeout.
func (c *Client) DescribeCluster(ctx context.Context, addr string) (ClusterView, error) {
	if c.closed() {
		return ClusterView{}, ErrClosed
	}
	var resp transport.DescribeClusterResponse
	if err := c.call(ctx, addr, 0, transport.APIDescribeCluster, &transport.Empty{}, &resp); err != nil {
		return ClusterView{}, fmt.Errorf("describe cluster at %s: %w", addr, err)
	}
	v := ClusterView{NodeID: resp.NodeID, Metadata: resp.Metadata, Members: make([]Member, 0, len(resp.Members)), ControllerRefusal: resp.Controller}
	for _, m := range resp.Members {
		v.Members = append(v.Members, Member{BrokerID: m.BrokerID, Gossip: m.Gossip, State: transport.GossipState(m.State), RootID: m.RootID})
	}
	return v, nil
}

// ReplicaState asks broker for the position of its replica of a partition.
// It only observes: it sends no leader epoch, so it never fences the
// replica. It is one request, not retried. It returns an error matching
// transport.ErrBrokerNotAvailable when the broker is not registered or
// cannot be reached, and transport.ErrUnknownPartition when the broker
// holds no replica of the partition.
func (c *Client) ReplicaState(ctx context.Context, broker int32, topic string, partition int32) (ReplicaState, error) {
	addr, err := c.brokerAddr(ctx, broker)
	if err != nil {
		return ReplicaState{}, err
	}
	req := &transport.ReplicaStateRequest{Topic: topic, Partition: partition}
	var resp transport.ReplicaStateResponse
	if err := c.call(ctx, addr, 0, transport.APIReplicaState, req, &resp); err != nil {
		return ReplicaState{}, fmt.Errorf("replica state of %s/%d on broker %d: %w", topic, partition, broker, err)
	}
	return ReplicaState{
		LogStartOffset: resp.LogStartOffset, LogEndOffset: resp.LogEndOffset, HighWatermark: resp.HighWatermark,
		LastEpoch: resp.LastEpoch, FencedEpoch: resp.FencedEpoch, Problem: resp.Problem,
	}, nil
}

// CatchUp asks a partition's leader to bring broker, one of its active
// followers, up to the leader's log end now, and returns the follower's
// log end before and after. The request follows the leader like a read:
// repeating it does no harm, so it is sent again after a stale route.
//
// It returns an error matching transport.ErrInvalidRequest, without asking
// the leader, when the metadata shows that broker is the leader or not an
// active replica; transport.ErrReplicaDivergence when the follower's log is
// not a prefix of the leader's (recovery, not catch-up, repairs that); and
// transport.ErrBrokerNotAvailable or transport.ErrTimeout when the leader,
// or the follower as the leader sees it, cannot be reached.
func (c *Client) CatchUp(ctx context.Context, topic string, partition, broker int32) (CatchUpResult, error) {
	wrap := func(err error) error {
		return fmt.Errorf("catch up broker %d on %s/%d: %w", broker, topic, partition, err)
	}
	// Judge the request against fresh metadata: a cached copy may predate
	// the broker's return to the active set.
	if err := c.refreshRetrying(ctx, topic); err != nil {
		return CatchUpResult{}, wrap(err)
	}
	t, err := c.topic(ctx, topic)
	if err != nil {
		return CatchUpResult{}, wrap(err)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return CatchUpResult{}, wrap(fmt.Errorf("%w: %s", transport.ErrUnknownPartition, metadata.NoSuchPartition(topic, len(t.Partitions), partition)))
	}
	switch p := t.Partitions[partition]; {
	case p.Leader == broker:
		return CatchUpResult{}, wrap(fmt.Errorf("%w: broker %d leads the partition; catch-up brings a follower up to its leader", transport.ErrInvalidRequest, broker))
	case !slices.Contains(p.Active, broker):
		return CatchUpResult{}, wrap(fmt.Errorf("%w: broker %d is not an active replica (replicas %v, active %v); a replica outside the active set comes back with recovery",
			transport.ErrInvalidRequest, broker, p.Replicas, p.Active))
	}
	var resp transport.CatchUpResponse
	err = c.withLeader(ctx, topic, partition, func(ctx context.Context, r route) error {
		req := &transport.CatchUpRequest{Topic: topic, Partition: partition, Broker: broker}
		return c.call(ctx, r.addr, 0, transport.APICatchUp, req, &resp)
	})
	if err != nil {
		return CatchUpResult{}, wrap(err)
	}
	return CatchUpResult{FromOffset: resp.FromOffset, ToOffset: resp.ToOffset}, nil
}

// brokerAddr returns a registered broker's RPC address, asking the cluster
// when the cache does not know the broker.
func (c *Client) brokerAddr(ctx context.Context, id int32) (string, error) {
	if st := c.state(); st != nil {
		if b, ok := st.brokers[id]; ok && b.Addr != "" {
			return b.Addr, nil
		}
	}
	if err := c.RefreshMetadata(ctx); err != nil {
		return "", err
	}
	if b, ok := c.state().brokers[id]; ok && b.Addr != "" {
		return b.Addr, nil
	}
	return "", fmt.Errorf("%w: broker %d is not registered", transport.ErrBrokerNotAvailable, id)
}
