package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gostream/metadata"
	"gostream/transport"
)

// Growing a topic (docs/reassignment.md, "More partitions"): one audited
// change appends the new partitions, placed on the brokers that answer;
// each broker opens its new replicas when the metadata reaches it, as it
// does a new topic's. A key's partition is its hash modulo the count, so
// from then on keys map to other partitions: order per key holds within
// each partition only.

// CreatePartitions grows a topic to req.Count partitions, never fewer, and
// reports one result per new partition (ActionCreatePartition: its
// replicas in NewActive, its leader in NewLeader). The new partitions'
// replicas are req.Assignments when given (one list per new partition,
// each of the topic's replication factor, of distinct brokers that
// answer), else placed by metadata.PlaceNewPartitions over the brokers
// that answer. With req.DryRun it reports what it would do and changes
// nothing.
//
// Refused, with nothing changed: a count not above the topic's
// (ErrInvalidPartitions, naming both) or above metadata.MaxPartitions
// (ErrInvalidPartitions); an unknown topic (metadata.ErrUnknownTopic); the
// topic of a Durable Streams stream, one partition by design, and the
// cluster's internal topics, whose partition count says which partition
// holds each group's offsets (ErrInvalidRequest); a sealed topic, which
// would take nothing in its new partitions (transport.ErrTopicSealed);
// assignments that cannot be used (metadata.ErrInvalidAssignment); fewer
// brokers that answer than the replication factor (ErrBrokerNotAvailable).
func (c *Controller) CreatePartitions(ctx context.Context, req transport.CreatePartitionsRequest) (transport.ChangeReport, error) {
	if req.Count < 1 || req.Count > metadata.MaxPartitions {
		return transport.ChangeReport{}, fmt.Errorf("%w: partition count %d outside [1, %d]", ErrInvalidPartitions, req.Count, metadata.MaxPartitions)
	}
	if err := c.Refusal(); err != nil {
		return transport.ChangeReport{}, err
	}
	meta := c.Metadata()
	t, err := growable(meta, req.Topic, int(req.Count))
	if err != nil {
		return transport.ChangeReport{}, err
	}
	from := len(t.Partitions)
	live, silent := c.answering(ctx, meta)
	var placed [][]int32
	if len(req.Assignments) > 0 {
		if err := meta.CheckAssignments(req.Assignments, from, int(req.Count), t.ReplicationFactor); err != nil {
			return transport.ChangeReport{}, err
		}
		for i, replicas := range req.Assignments {
			for _, b := range replicas {
				if !slices.Contains(live, b) {
					return transport.ChangeReport{}, fmt.Errorf("%w: partition %d names broker %d, which does not answer: new replicas go only to brokers that answer (%s); nothing was created",
						metadata.ErrInvalidAssignment, from+i, b, brokerList(live))
				}
			}
			placed = append(placed, slices.Clone(replicas))
		}
	} else {
		if len(live) < t.ReplicationFactor {
			return transport.ChangeReport{}, fmt.Errorf("%w: new partitions of %s need %d brokers that answer (its replication factor), and %d of the %d registered do (%s %s): start them again; nothing was created",
				ErrBrokerNotAvailable, t.Name, t.ReplicationFactor, len(live), len(meta.Brokers), brokerList(silent), doNot(silent))
		}
		existing := make([][]int32, from)
		for p, part := range t.Partitions {
			existing[p] = part.Replicas
		}
		if placed, err = metadata.PlaceNewPartitions(live, existing, int(req.Count), t.ReplicationFactor); err != nil {
			return transport.ChangeReport{}, err
		}
	}
	note := fmt.Sprintf("%s grows from %d to %d partitions", t.Name, from, req.Count)
	results := make([]transport.ChangeResult, len(placed))
	for i, replicas := range placed {
		results[i] = transport.ChangeResult{Topic: t.Name, Partition: int32(from + i), Action: transport.ActionCreatePartition,
			DryRun: req.DryRun, OldLeader: replicas[0], NewLeader: replicas[0], NewActive: slices.Clone(replicas), Note: note}
	}
	if req.DryRun {
		return transport.ChangeReport{Results: results}, nil
	}
	id := t.ID
	err = c.changeAudited(ctx, fmt.Sprintf("grow topic %s from %d to %d partitions", t.Name, from, req.Count), req.Requester,
		func(m *metadata.Cluster) ([]transport.ChangeResult, error) {
			t, err := growable(m, req.Topic, int(req.Count))
			switch {
			case err != nil:
				return nil, err
			case t.ID != id:
				return nil, fmt.Errorf("%w: topic %q was deleted and created again meanwhile; nothing was created", ErrInvalidRequest, req.Topic)
			case len(t.Partitions) != from:
				return nil, fmt.Errorf("%w: topic %q changed meanwhile: it has %d partitions now; nothing was created", ErrInvalidRequest, req.Topic, len(t.Partitions))
			}
			if err := m.AddPartitions(req.Topic, placed); err != nil {
				return nil, err
			}
			return results, nil
		})
	if err != nil {
		return transport.ChangeReport{}, err
	}
	c.logger.Info("topic grew: keys map to other partitions from now on", "topic", req.Topic, "from", from, "to", req.Count)
	return transport.ChangeReport{Results: results}, nil
}

// growable returns the named topic of m if it may grow to count
// partitions, else the refusal CreatePartitions documents.
func growable(m *metadata.Cluster, name string, count int) (*metadata.Topic, error) {
	t := m.Topic(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	case t.Stream != nil:
		return nil, fmt.Errorf("%w: topic %s holds the Durable Streams stream /v1/stream/%s, which is one partition, read in one order: it cannot have more",
			ErrInvalidRequest, name, t.Stream.Path)
	case strings.HasPrefix(name, InternalPrefix):
		return nil, fmt.Errorf("%w: %s is an internal topic of the cluster: its partition count says which of its partitions holds each group, so it never grows",
			ErrInvalidRequest, name)
	case count == len(t.Partitions):
		return nil, fmt.Errorf("%w: topic %q already has %s; nothing to add", ErrInvalidPartitions, name, partitionCount(count))
	case count < len(t.Partitions):
		return nil, fmt.Errorf("%w: topic %q has %s, and %d would be fewer: a topic's partition count only grows", ErrInvalidPartitions, name, partitionCount(len(t.Partitions)), count)
	case t.Sealed:
		return nil, fmt.Errorf("%w: topic %q is sealed: it takes no more records, so new partitions would stay empty", transport.ErrTopicSealed, name)
	}
	return t, nil
}

// partitionCount is "1 partition" or "n partitions".
func partitionCount(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
