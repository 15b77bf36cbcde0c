package node

import (
	"context"
	"errors"
	"syscall"

	"gostream/metadata"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// wireErrors is the one table that maps the sentinels of the packages below
// to the codes clients see. The first match wins, so more specific errors
// come first.
var wireErrors = []struct {
	err  error
	wire *transport.Error
}{
	// A full disk first: whatever failed for want of space (a log, the
	// controller's metadata, an epoch file) is named for it.
	{storage.ErrNoSpace, transport.ErrNoSpace},
	{syscall.ENOSPC, transport.ErrNoSpace},
	{syscall.EDQUOT, transport.ErrNoSpace},
	{storage.ErrInvalidTopicName, transport.ErrInvalidTopicName},
	{storage.ErrInvalidPartition, transport.ErrUnknownPartition},
	{storage.ErrOffsetOutOfRange, transport.ErrOffsetOutOfRange},
	{storage.ErrBatchTooLarge, transport.ErrMessageTooLarge},
	{storage.ErrInvalidBatch, transport.ErrInvalidBatch},
	{storage.ErrEpochRegression, transport.ErrStaleEpoch},
	{storage.ErrCorrupt, transport.ErrStorageFailed},
	{storage.ErrFailed, transport.ErrStorageFailed},
	{storage.ErrClosed, transport.ErrShuttingDown},
	{replication.ErrNotLeader, transport.ErrNotLeader},
	{replication.ErrReplicaDivergence, transport.ErrReplicaDivergence},
	{replication.ErrReplicationFailed, transport.ErrReplicationFailed},
	{replication.ErrNotReady, transport.ErrNotReady},
	{replication.ErrReplicaUnhealthy, transport.ErrStorageFailed},
	{storage.ErrOffsetMismatch, transport.ErrInvalidRequest},
	{storage.ErrStampMismatch, transport.ErrStampMismatch},
	{replication.ErrStaleEpoch, transport.ErrStaleEpoch},
	{replication.ErrOffsetOutOfRange, transport.ErrOffsetOutOfRange},
	{metadata.ErrUnknownTopic, transport.ErrUnknownTopic},
	{metadata.ErrTopicExists, transport.ErrTopicExists},
	{metadata.ErrNotEnoughBrokers, transport.ErrInvalidReplication},
	{metadata.ErrInvalidConfig, transport.ErrInvalidConfig},
	{metadata.ErrInvalid, transport.ErrInvalidRequest},
	{transport.ErrMalformed, transport.ErrInvalidRequest},
	{context.DeadlineExceeded, transport.ErrTimeout},
	{context.Canceled, transport.ErrShuttingDown},
}

// wireError gives err the code of the first sentinel it matches, keeping its
// text. Errors that already carry a code keep it.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return err
	}
	for _, m := range wireErrors {
		if errors.Is(err, m.err) {
			return &transport.Error{Code: m.wire.Code, Retriable: m.wire.Retriable, Message: m.wire.Code.String() + ": " + err.Error()}
		}
	}
	return err
}
