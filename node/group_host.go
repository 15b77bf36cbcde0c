package node

import (
	"context"
	"time"

	"gostream/groups"
	"gostream/metadata"
	"gostream/replication"
	"gostream/transport"
)

// newGroupHost makes the host of this node's group coordinators
// (docs/groups.md), over the broker's replicas of __consumer_offsets.
func (n *Node) newGroupHost() *groups.Host {
	return groups.NewHost(groups.HostConfig{
		Broker:   n.cfg.ID,
		Metadata: func() *metadata.Cluster { return n.broker.Metadata() },
		Lookup: func(topic, id string, partition int32) (*metadata.Topic, *replication.Partition, error) {
			t, rep, err := n.broker.Lookup(topic, id, partition)
			if rep == nil {
				return t, nil, err
			}
			return t, rep.Part, err
		},
		ListOffsets: func(ctx context.Context, addr string, req *transport.ListOffsetsRequest) (*transport.ListOffsetsResponse, error) {
			var resp transport.ListOffsetsResponse
			if err := n.pool.Call(ctx, addr, transport.APIListOffsets, req, &resp); err != nil {
				return nil, err
			}
			return &resp, nil
		},
		MaxBatchBytes:   n.cfg.MaxBatchBytes,
		SnapshotEvery:   n.cfg.GroupSnapshotEvery,
		InitialDelay:    n.cfg.GroupInitialDelay,
		MaxMemberBytes:  n.cfg.GroupMaxMemberBytes,
		ConsumerSession: n.cfg.GroupConsumerSession,
		LagPartitions:   groups.MaxLagSeries,
		OnRebalance:     n.metrics.rebalances.Inc,
		OnRebuilt:       func(took time.Duration) { n.metrics.groupRebuild.Observe(took.Seconds()) },
		Logger:          n.logger,
	})
}
