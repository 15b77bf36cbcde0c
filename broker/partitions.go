package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/metadata"
	"gostream/transport"
)

// CreatePartitions grows a topic for principal (alter on the topic, as
// Kafka asks of CreatePartitions) on this node's controller, when it is
// the active one (controller.CreatePartitions).
func (b *Broker) CreatePartitions(ctx context.Context, principal string, req transport.CreatePartitionsRequest) (transport.ChangeReport, error) {
	if err := b.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, req.Topic); err != nil {
		return transport.ChangeReport{}, err
	}
	c, err := b.active()
	if err != nil {
		return transport.ChangeReport{}, err
	}
	return c.CreatePartitions(ctx, req)
}

// GrowTopic is CreatePartitions from any node: on one that is not the
// active controller the request, authorized here for principal, is
// forwarded to the active controller as this node (as Kafka's brokers
// forward it, KIP-590).
func (b *Broker) GrowTopic(ctx context.Context, principal string, req transport.CreatePartitionsRequest) (transport.ChangeReport, error) {
	if err := b.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, req.Topic); err != nil {
		return transport.ChangeReport{}, err
	}
	if _, err := b.active(); err == nil || b.cfg.CallController == nil {
		return b.CreatePartitions(ctx, principal, req)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return transport.ChangeReport{}, err
	}
	var resp transport.JSONMessage
	if err := b.cfg.CallController(ctx, transport.APICreatePartitions, &transport.JSONMessage{Data: data}, &resp); err != nil {
		return transport.ChangeReport{}, err
	}
	var rep transport.ChangeReport
	if err := json.Unmarshal(resp.Data, &rep); err != nil {
		return transport.ChangeReport{}, fmt.Errorf("decode the controller's answer: %w", err)
	}
	return rep, nil
}
