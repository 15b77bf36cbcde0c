package broker

import (
	"context"
	"errors"

	"gostream/controller"
	"gostream/metadata"
	"gostream/transport"
)

// Topic administration is the controller's: the core authorizes it and
// hands it to the active controller when this node runs it, and answers
// NotController (naming the active one as this node knows it) otherwise,
// so the client asks there.

// active is this node's controller when it is the active one.
func (b *Broker) active() (*controller.Controller, error) {
	if b.cfg.ActiveController == nil {
		return nil, transport.ErrNotController
	}
	return b.cfg.ActiveController()
}

// CreateTopic creates a topic for principal: create on the cluster allows
// any name, create on the topic that one.
func (b *Broker) CreateTopic(ctx context.Context, principal string, req *transport.CreateTopicRequest) (TopicView, error) {
	if !b.CanDo(principal, metadata.OpCreate, metadata.ResourceCluster, "") {
		if err := b.Authorize(principal, metadata.OpCreate, metadata.ResourceTopic, req.Name); err != nil {
			return TopicView{}, err
		}
	}
	c, err := b.active()
	if err != nil {
		return TopicView{}, err
	}
	t, err := c.CreateTopic(ctx, req)
	if err != nil {
		return TopicView{}, err
	}
	return b.view(t), nil
}

// DeleteTopic deletes a topic for principal: delete on the topic and
// operate on the cluster.
func (b *Broker) DeleteTopic(ctx context.Context, principal, name string) error {
	if err := b.Authorize(principal, metadata.OpDelete, metadata.ResourceTopic, name); err != nil {
		return err
	}
	if err := b.Authorize(principal, metadata.OpOperate, metadata.ResourceCluster, ""); err != nil {
		return err
	}
	c, err := b.active()
	if err != nil {
		return err
	}
	return c.DeleteTopic(ctx, name)
}

// SealTopic seals a topic for principal (alter on the topic).
func (b *Broker) SealTopic(ctx context.Context, principal, name string) error {
	if err := b.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, name); err != nil {
		return err
	}
	c, err := b.active()
	if err != nil {
		return err
	}
	return c.SealTopic(ctx, name)
}

// AlterTopicConfig changes a topic's configuration for principal (alter
// on the topic).
func (b *Broker) AlterTopicConfig(ctx context.Context, principal string, req *transport.AlterTopicConfigRequest) (TopicView, error) {
	if err := b.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, req.Name); err != nil {
		return TopicView{}, err
	}
	c, err := b.active()
	if err != nil {
		return TopicView{}, err
	}
	t, err := c.AlterTopicConfig(ctx, req)
	if err != nil {
		return TopicView{}, err
	}
	return b.view(t), nil
}

// ChangeTopicConfig is AlterTopicConfig from any node: on one that is not
// the active controller the change, authorized here for principal, is
// forwarded to the active controller as this node, as Kafka clients expect
// of any broker (KIP-590); only its outcome is returned.
func (b *Broker) ChangeTopicConfig(ctx context.Context, principal string, req *transport.AlterTopicConfigRequest) error {
	if err := b.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, req.Name); err != nil {
		return err
	}
	if _, err := b.active(); err == nil || b.cfg.CallController == nil {
		_, err := b.AlterTopicConfig(ctx, principal, req)
		return err
	}
	var resp transport.TopicInfo
	return b.cfg.CallController(ctx, transport.APIAlterTopicConfig, req, &resp)
}

// AutoCreateTopic creates topic name for principal as Kafka's
// auto-creation does (a client asks for the metadata of a topic that does
// not exist): partitions partitions of rf replicas (0: min(3, the
// brokers)), from any node, the creation forwarded to the active
// controller as this node once principal's create (on the cluster or the
// topic) is checked here. A topic that exists by then is no error.
func (b *Broker) AutoCreateTopic(ctx context.Context, principal, name string, partitions, rf int) error {
	if !b.CanDo(principal, metadata.OpCreate, metadata.ResourceCluster, "") {
		if err := b.Authorize(principal, metadata.OpCreate, metadata.ResourceTopic, name); err != nil {
			return err
		}
	}
	if rf <= 0 {
		rf = 3
		if m := b.cfg.Replicas.Metadata(); m != nil {
			rf = max(1, min(rf, len(m.Brokers)))
		}
	}
	req := &transport.CreateTopicRequest{Name: name, Partitions: int32(partitions), ReplicationFactor: int16(rf)}
	var err error
	if c, aerr := b.active(); aerr == nil {
		_, err = c.CreateTopic(ctx, req)
	} else if b.cfg.CallController != nil {
		err = b.cfg.CallController(ctx, transport.APICreateTopic, req, &transport.TopicInfo{})
	} else {
		err = aerr
	}
	if errors.Is(err, transport.ErrTopicExists) || errors.Is(err, metadata.ErrTopicExists) {
		return nil
	}
	return err
}
