package controller

import (
	"context"
	"fmt"

	"gostream/metadata"
	"gostream/transport"
)

// CreateTopic adds a topic, its partitions placed on the registered
// brokers.
func (c *Controller) CreateTopic(ctx context.Context, req *transport.CreateTopicRequest) (*metadata.Topic, error) {
	if req.Partitions < 1 || req.Partitions > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d outside [1, %d]", ErrInvalidPartitions, req.Partitions, metadata.MaxPartitions)
	}
	if req.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d below 1", ErrInvalidReplication, req.ReplicationFactor)
	}
	var created metadata.Topic
	err := c.change(ctx, "create topic "+req.Name, func(m *metadata.Cluster) error {
		t, err := m.AddTopic(req.Name, int(req.Partitions), int(req.ReplicationFactor))
		if err != nil {
			return err
		}
		created = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &created, nil
}

// DeleteTopic removes a topic; the brokers remove its replicas.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	return c.change(ctx, "delete topic "+name, func(m *metadata.Cluster) error {
		return m.RemoveTopic(name)
	})
}

// SealTopic marks a topic sealed: it takes no more writes.
func (c *Controller) SealTopic(ctx context.Context, name string) error {
	return c.change(ctx, "seal topic "+name, func(m *metadata.Cluster) error {
		t := m.Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		t.Sealed = true
		return nil
	})
}
