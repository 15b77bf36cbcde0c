package broker

import (
	"context"
	"fmt"
	"sync"

	"gostream/metadata"
	"gostream/transport"
)

// ProducerIDBlock is how many producer ids a broker asks its controller
// for at a time.
const ProducerIDBlock = 1000

// producerIDs is the block of producer ids a broker hands out.
type producerIDs struct {
	mu        sync.Mutex
	next, end int64
}

// InitProducerID gives principal a producer id no other producer in the
// cluster has, at epoch 0, for an idempotent producer. The principal must
// be allowed to write to the cluster or to some topic (as Kafka asks, KIP-679).
// The ids come from a block the active controller allocated to this
// broker (AllocateProducerIDs), asked for when the last one runs out.
func (b *Broker) InitProducerID(ctx context.Context, principal string) (int64, int16, error) {
	if !b.mayProduce(principal) {
		return 0, 0, fmt.Errorf("%w: principal %q may write to no topic, so it needs no producer id", transport.ErrUnauthorized, principal)
	}
	b.ids.mu.Lock()
	defer b.ids.mu.Unlock()
	if b.ids.next == b.ids.end {
		first, err := b.allocateProducerIDs(ctx)
		if err != nil {
			return 0, 0, err
		}
		b.ids.next, b.ids.end = first, first+ProducerIDBlock
	}
	id := b.ids.next
	b.ids.next++
	return id, 0, nil
}

// mayProduce reports whether principal may write to the cluster or to a
// topic of the metadata.
func (b *Broker) mayProduce(principal string) bool {
	if b.CanDo(principal, metadata.OpWrite, metadata.ResourceCluster, "") {
		return true
	}
	if m := b.cfg.Replicas.Metadata(); m != nil {
		for _, t := range m.Topics {
			if b.CanDo(principal, metadata.OpWrite, metadata.ResourceTopic, t.Name) {
				return true
			}
		}
	}
	return false
}

// allocateProducerIDs asks the active controller, here or where it runs,
// for a block.
func (b *Broker) allocateProducerIDs(ctx context.Context) (int64, error) {
	c, err := b.active()
	if err == nil {
		return c.AllocateProducerIDs(ctx, b.cfg.Broker, ProducerIDBlock)
	}
	if b.cfg.CallController == nil {
		return 0, err
	}
	var resp transport.AllocateProducerIDsResponse
	if err := b.cfg.CallController(ctx, transport.APIAllocateProducerIDs,
		&transport.AllocateProducerIDsRequest{Broker: b.cfg.Broker, Count: ProducerIDBlock}, &resp); err != nil {
		return 0, err
	}
	if resp.Count != ProducerIDBlock || resp.First < 0 {
		return 0, fmt.Errorf("%w: the controller allocated %d producer ids from %d; asked for %d", transport.ErrUnknown, resp.Count, resp.First, ProducerIDBlock)
	}
	return resp.First, nil
}
