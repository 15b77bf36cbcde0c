package controller

import (
	"context"
	"fmt"
	"math"

	"gostream/metadata"
	"gostream/transport"
)

// ProducerIDRestoreMargin is how far past the newest copy's next producer
// id a restore without the controller's own copy starts: blocks handed
// out after the last push that reached a broker are not in any copy.
const ProducerIDRestoreMargin = 1 << 20

// AllocateProducerIDs hands broker a block of count producer ids no
// broker has had: the metadata's next producer id is raised past the
// block, persisted (and, with a controller group, committed by its
// majority) and pushed before it answers, so no later controller hands
// out an id of the block again.
func (c *Controller) AllocateProducerIDs(ctx context.Context, broker, count int32) (first int64, err error) {
	if count <= 0 || count > transport.MaxProducerIDBlock {
		return 0, fmt.Errorf("%w: a block of %d producer ids; want 1 to %d", ErrInvalidRequest, count, transport.MaxProducerIDBlock)
	}
	err = c.change(ctx, fmt.Sprintf("allocate %d producer ids to broker %d", count, broker), func(m *metadata.Cluster) error {
		if m.NextProducerID > math.MaxInt64-int64(count) {
			return fmt.Errorf("%w: the cluster has handed out every producer id", ErrInvalidRequest)
		}
		first = m.NextProducerID
		m.NextProducerID += int64(count)
		return nil
	})
	return first, err
}
