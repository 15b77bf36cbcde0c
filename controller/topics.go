package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"gostream/metadata"
	"gostream/transport"
)

// CreateTopic adds a topic, its partitions placed on the registered
// brokers that answer (placement.go); with fewer of them than its
// replication factor it is refused (ErrNotEnoughBrokers) and nothing is
// created.
func (c *Controller) CreateTopic(ctx context.Context, req *transport.CreateTopicRequest) (*metadata.Topic, error) {
	if strings.HasPrefix(req.Name, InternalPrefix) {
		return nil, fmt.Errorf("%w: %q: names that begin with %q are kept for the cluster's internal topics", metadata.ErrInvalidTopicName, req.Name, InternalPrefix)
	}
	if req.Partitions < 1 || req.Partitions > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: partition count %d outside [1, %d]", ErrInvalidPartitions, req.Partitions, metadata.MaxPartitions)
	}
	if req.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d below 1", ErrInvalidReplication, req.ReplicationFactor)
	}
	config, err := topicConfigFromWire(req.Config)
	if err != nil {
		return nil, err
	}
	if err := c.Refusal(); err != nil {
		return nil, err
	}
	if c.Metadata().Topic(req.Name) != nil {
		return nil, fmt.Errorf("%w: %q", metadata.ErrTopicExists, req.Name)
	}
	brokers, err := c.placeable(ctx, fmt.Sprintf("topic %s with replication factor %d", req.Name, req.ReplicationFactor), int(req.ReplicationFactor), metadata.ErrNotEnoughBrokers)
	if err != nil {
		return nil, err
	}
	var created metadata.Topic
	err = c.change(ctx, "create topic "+req.Name, func(m *metadata.Cluster) error {
		t, err := m.AddTopicOn(req.Name, int(req.Partitions), int(req.ReplicationFactor), brokers)
		if err != nil {
			return err
		}
		t.Config = config
		created = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &created, nil
}

// InternalPrefix begins the names of the cluster's internal topics; see
// metadata.InternalPrefix.
const InternalPrefix = metadata.InternalPrefix

func refuseInternal(name, what string) error {
	if strings.HasPrefix(name, InternalPrefix) {
		return fmt.Errorf("%w: %s is an internal topic of the cluster; it cannot be %s", ErrInvalidRequest, name, what)
	}
	return nil
}

// OffsetsSegmentBytes is the segment size of __consumer_offsets when the
// controller creates it (a variable only so that tests can make it small).
var OffsetsSegmentBytes int64 = 16 << 20

// EnsureOffsetsTopic creates __consumer_offsets, with partitions
// partitions and a replication factor of min(3, registered brokers),
// unless it exists. Its records are kept for ever: what bounds its log is
// the coordinators' snapshots, not age (segments below a replica's newest
// complete snapshot are deleted).
func (c *Controller) EnsureOffsetsTopic(ctx context.Context, partitions int) (*metadata.Topic, error) {
	if t := c.Metadata().Topic(transport.OffsetsTopic); t != nil {
		return t, nil
	}
	if err := c.Refusal(); err != nil {
		return nil, err
	}
	rf := min(3, len(c.Metadata().Brokers))
	brokers, err := c.placeable(ctx, transport.OffsetsTopic, rf, notAnswering)
	if err != nil {
		return nil, err
	}
	var created metadata.Topic
	err = c.change(ctx, "create topic "+transport.OffsetsTopic, func(m *metadata.Cluster) error {
		if t := m.Topic(transport.OffsetsTopic); t != nil {
			created = *t
			return errNoChange
		}
		t, err := m.AddTopicOn(transport.OffsetsTopic, partitions, rf, brokers)
		if err != nil {
			return err
		}
		// Segments small enough that the ones below the newest snapshot
		// are deleted soon, which bounds a coordinator's rebuild.
		t.Config = metadata.TopicConfig{metadata.ConfigRetentionMs: -1, metadata.ConfigRetentionBytes: -1, metadata.ConfigSegmentBytes: OffsetsSegmentBytes}
		created = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t := c.Metadata().Topic(transport.OffsetsTopic); t != nil {
		return t, nil
	}
	return &created, nil
}

// DeleteTopic removes a topic; the brokers remove its replicas.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	if err := refuseInternal(name, "deleted"); err != nil {
		return err
	}
	return c.change(ctx, "delete topic "+name, func(m *metadata.Cluster) error {
		return m.RemoveTopic(name)
	})
}

// SealTopic marks a topic sealed: it takes no more writes.
func (c *Controller) SealTopic(ctx context.Context, name string) error {
	if err := refuseInternal(name, "sealed"); err != nil {
		return err
	}
	return c.change(ctx, "seal topic "+name, func(m *metadata.Cluster) error {
		t := m.Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		t.Sealed = true
		return nil
	})
}

// topicConfigFromWire checks the entries of a request (every key known,
// every value valid, no key twice) and returns them as a TopicConfig. Its
// errors match metadata.ErrInvalidConfig and name the key.
func topicConfigFromWire(entries []transport.ConfigEntry) (metadata.TopicConfig, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	c := make(metadata.TopicConfig, len(entries))
	for _, e := range entries {
		if err := metadata.CheckConfig(e.Key, e.Value); err != nil {
			return nil, err
		}
		if _, dup := c[e.Key]; dup {
			return nil, fmt.Errorf("%w: %s given twice", metadata.ErrInvalidConfig, e.Key)
		}
		c[e.Key] = e.Value
	}
	return c, nil
}

// AlterTopicConfig sets the keys of set and removes those of del from a
// topic's configuration, as one metadata change, and returns the topic as
// changed. Nothing changes unless every key and value is valid (errors
// matching metadata.ErrInvalidConfig name the key) and the topic exists.
// A change that changes nothing is not made.
func (c *Controller) AlterTopicConfig(ctx context.Context, req *transport.AlterTopicConfigRequest) (*metadata.Topic, error) {
	if err := refuseInternal(req.Name, "altered"); err != nil {
		return nil, err
	}
	set, err := topicConfigFromWire(req.Set)
	if err != nil {
		return nil, err
	}
	if len(set) == 0 && len(req.Delete) == 0 {
		return nil, fmt.Errorf("%w: nothing to change: give a key to set or to remove", metadata.ErrInvalidConfig)
	}
	for _, k := range req.Delete {
		if err := metadata.CheckConfigKey(k); err != nil {
			return nil, err
		}
		if _, both := set[k]; both {
			return nil, fmt.Errorf("%w: %s both set and removed", metadata.ErrInvalidConfig, k)
		}
	}
	var altered metadata.Topic
	err = c.change(ctx, "alter config of topic "+req.Name, func(m *metadata.Cluster) error {
		t := m.Topic(req.Name)
		if t == nil {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, req.Name)
		}
		next := t.Config.Clone()
		if next == nil {
			next = metadata.TopicConfig{}
		}
		maps.Copy(next, set)
		for _, k := range req.Delete {
			delete(next, k)
		}
		if len(next) == 0 {
			next = nil
		}
		if maps.Equal(next, t.Config) {
			altered = *t
			return errNoChange
		}
		t.Config = next
		altered = *t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &altered, nil
}
