package kafkaapi

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// initProducerID gives an idempotent producer a producer id unique in the
// cluster, at epoch 0 (broker.InitProducerID). A transactional id is
// refused: transactions are not supported. A producer that asks again
// with its id and epoch (KIP-360, to bump its epoch after a lost batch)
// gets a new id, which is as good for an idempotent producer.
func (s *Server) initProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerrTransactionsUnsupported
		return resp, nil
	}
	id, epoch, err := s.cfg.Core.InitProducerID(ctx, principalOf(ctx))
	switch {
	case errors.Is(err, transport.ErrUnauthorized):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case errors.Is(err, transport.ErrNotController), errors.Is(err, transport.ErrControllerUnavailable):
		// The controller could not be reached for a block of ids: the
		// client retries this (Kafka's answer when its coordinator for
		// producer ids is not ready).
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case err != nil:
		resp.ErrorCode = s.code(err)
	default:
		resp.ProducerID, resp.ProducerEpoch = id, epoch
	}
	return resp, nil
}
