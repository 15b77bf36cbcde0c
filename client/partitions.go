package client

import (
	"context"
	"errors"
	"fmt"

	"gostream/transport"
)

// CreatePartitionsRequest grows a topic: Topic to Count partitions, with
// Assignments (one replica list per new partition, preferred leader
// first) or, without them, the replicas placed by the controller.
type CreatePartitionsRequest = transport.CreatePartitionsRequest

// ActionCreatePartition is the action of each result of CreatePartitions.
const ActionCreatePartition = transport.ActionCreatePartition

// CreatePartitions asks the controller to grow a topic to req.Count
// partitions (never fewer) and returns one result per new partition: its
// replicas in NewActive, its leader in NewLeader. With req.DryRun it says
// what it would do. Once a topic grew, a record's key maps to its
// partition by the new count (Partition), so records of one key go to
// another partition from then on: order per key holds within each
// partition, not across the change. A Producer routes by the new count
// once it asks for the topic's metadata again (Config.MetadataMaxAge); a
// GroupConsumer's coordinator hands out the new partitions at the next
// heartbeat.
//
// The controller refuses (nothing changes) with
// transport.ErrInvalidPartitions a count not above the topic's,
// transport.ErrUnknownTopic, transport.ErrInvalidRequest the topic of a
// Durable Streams stream, an internal topic or assignments it cannot use,
// transport.ErrTopicSealed a sealed topic, and
// transport.ErrBrokerNotAvailable when fewer brokers answer than the
// replication factor. After the change it refreshes the topic's metadata
// and, as CreateTopic does, waits until each new partition's leader
// answers: when one does not in time, it returns the report and an error
// matching ErrNotServing that names those partitions. It is sent as
// Failover is: again only when it provably did nothing, and a dry run as
// reads are.
func (c *Client) CreatePartitions(ctx context.Context, req CreatePartitionsRequest) (ChangeReport, error) {
	if req.Count < 1 {
		return ChangeReport{}, fmt.Errorf("%w: %d partitions", transport.ErrInvalidPartitions, req.Count)
	}
	var rep ChangeReport
	if err := c.operatorJSON(ctx, transport.APICreatePartitions, req.DryRun, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("grow topic %q to %d partitions: %w", req.Topic, req.Count, err)
	}
	if req.DryRun || len(rep.Results) == 0 {
		return rep, nil
	}
	grown := TopicMetadata{Name: req.Topic}
	for _, r := range rep.Results {
		grown.Partitions = append(grown.Partitions, PartitionMetadata{Partition: r.Partition, Leader: r.NewLeader, Replicas: r.NewActive, Active: r.NewActive})
	}
	if err := c.RefreshMetadata(ctx, req.Topic); err != nil {
		c.log.Debug("metadata refresh failed", "topic", req.Topic, "err", err)
	}
	if err := c.waitServing(ctx, grown); err != nil {
		var ns *notServingError
		if errors.As(err, &ns) {
			ns.grown = true
		}
		return rep, err
	}
	return rep, nil
}
