package broker

import (
	"context"

	"gostream/metadata"
	"gostream/transport"
)

// Reassign starts or cancels moves for principal (operate on the cluster),
// on this node's controller, which must be the active one
// (docs/reassignment.md). The Kafka front end's reassignments come here.
func (b *Broker) Reassign(ctx context.Context, principal string, req transport.ReassignRequest) (transport.ChangeReport, error) {
	if err := b.Authorize(principal, metadata.OpOperate, metadata.ResourceCluster, ""); err != nil {
		return transport.ChangeReport{}, err
	}
	c, err := b.active()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	return c.Reassign(ctx, req)
}

// ReassignStatus lists the moves under way (of topic, or all) for
// principal (describe on the cluster), from the active controller here.
func (b *Broker) ReassignStatus(ctx context.Context, principal, topic string) (transport.ReassignStatus, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceCluster, ""); err != nil {
		return transport.ReassignStatus{}, err
	}
	c, err := b.active()
	if err != nil {
		return transport.ReassignStatus{}, err
	}
	return c.ReassignStatus(ctx, transport.ReassignStatusRequest{Topic: topic})
}
