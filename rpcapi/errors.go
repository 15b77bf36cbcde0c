package rpcapi

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"gostream/controller"
	"gostream/controller/plan"
	"gostream/groups"
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
	// bare: the message leaves out the sentinel's own text, which the
	// code says better (the controller's sentinels).
	bare bool
}{
	// A full disk first: whatever failed for want of space (a log, the
	// controller's metadata, an epoch file) is named for it.
	{err: storage.ErrNoSpace, wire: transport.ErrNoSpace},
	{err: syscall.ENOSPC, wire: transport.ErrNoSpace},
	{err: syscall.EDQUOT, wire: transport.ErrNoSpace},
	{err: metadata.ErrInvalidTopicName, wire: transport.ErrInvalidTopicName},
	{err: storage.ErrInvalidName, wire: transport.ErrInvalidTopicName},
	{err: storage.ErrInvalidPartition, wire: transport.ErrUnknownPartition},
	{err: storage.ErrOffsetOutOfRange, wire: transport.ErrOffsetOutOfRange},
	{err: storage.ErrBatchTooLarge, wire: transport.ErrMessageTooLarge},
	{err: storage.ErrInvalidBatch, wire: transport.ErrInvalidBatch},
	{err: storage.ErrEpochRegression, wire: transport.ErrStaleEpoch},
	{err: storage.ErrCorrupt, wire: transport.ErrStorageFailed},
	{err: storage.ErrFailed, wire: transport.ErrStorageFailed},
	{err: storage.ErrClosed, wire: transport.ErrShuttingDown},
	{err: replication.ErrNotLeader, wire: transport.ErrNotLeader},
	{err: replication.ErrStateDropped, wire: transport.ErrNotReady},
	{err: replication.ErrLoading, wire: transport.ErrNotReady},
	{err: replication.ErrLoadFailed, wire: transport.ErrStorageFailed},
	{err: replication.ErrReplicaDivergence, wire: transport.ErrReplicaDivergence},
	{err: replication.ErrReplicationFailed, wire: transport.ErrReplicationFailed},
	{err: replication.ErrNotReady, wire: transport.ErrNotReady},
	{err: replication.ErrReplicaUnhealthy, wire: transport.ErrStorageFailed},
	{err: storage.ErrOffsetMismatch, wire: transport.ErrInvalidRequest},
	{err: storage.ErrStampMismatch, wire: transport.ErrStampMismatch},
	{err: replication.ErrStaleEpoch, wire: transport.ErrStaleEpoch},
	{err: replication.ErrOffsetOutOfRange, wire: transport.ErrOffsetOutOfRange},
	{err: controller.ErrInvalidRequest, wire: transport.ErrInvalidRequest, bare: true},
	{err: controller.ErrInvalidPartitions, wire: transport.ErrInvalidPartitions, bare: true},
	{err: controller.ErrInvalidReplication, wire: transport.ErrInvalidReplication, bare: true},
	{err: controller.ErrUnknownPartition, wire: transport.ErrUnknownPartition, bare: true},
	{err: controller.ErrUnknownBroker, wire: transport.ErrUnknownBroker, bare: true},
	{err: controller.ErrBrokerNotAvailable, wire: transport.ErrBrokerNotAvailable, bare: true},
	{err: controller.ErrLeaderStillAvailable, wire: transport.ErrLeaderStillAvailable, bare: true},
	{err: controller.ErrNoEligibleReplica, wire: transport.ErrNoEligibleReplica, bare: true},
	{err: controller.ErrReplicaDivergence, wire: transport.ErrReplicaDivergence, bare: true},
	{err: controller.ErrDuplicateBroker, wire: transport.ErrDuplicateBroker, bare: true},
	{err: controller.ErrBrokerAlive, wire: transport.ErrBrokerAlive, bare: true},
	{err: controller.ErrStampMismatch, wire: transport.ErrStampMismatch, bare: true},
	{err: controller.ErrStaleMetadata, wire: transport.ErrStaleMetadata, bare: true},
	{err: controller.ErrNotController, wire: transport.ErrNotController, bare: true},
	{err: controller.ErrNotReady, wire: transport.ErrNotReady, bare: true},
	{err: plan.ErrUnknownBroker, wire: transport.ErrUnknownBroker, bare: true},
	{err: plan.ErrNotEnoughBrokers, wire: transport.ErrInvalidReplication, bare: true},
	{err: groups.ErrInvalidGroupName, wire: transport.ErrInvalidGroupName, bare: true},
	{err: groups.ErrOffsetRegression, wire: transport.ErrOffsetRegression, bare: true},
	{err: groups.ErrInvalidOffset, wire: transport.ErrInvalidOffset, bare: true},
	{err: groups.ErrUnknownMember, wire: transport.ErrUnknownMember, bare: true},
	{err: groups.ErrFencedMember, wire: transport.ErrFencedMember, bare: true},
	{err: groups.ErrNotOwner, wire: transport.ErrIllegalGeneration, bare: true},
	{err: groups.ErrGroupNotEmpty, wire: transport.ErrGroupNotEmpty, bare: true},
	{err: groups.ErrFencedInstanceID, wire: transport.ErrFencedInstanceID, bare: true},
	{err: groups.ErrInconsistentProtocol, wire: transport.ErrInconsistentGroup, bare: true},
	{err: groups.ErrUnknownGroup, wire: transport.ErrUnknownGroup, bare: true},
	{err: groups.ErrGroupSubscribed, wire: transport.ErrGroupSubscribed, bare: true},
	{err: groups.ErrUnknownTopic, wire: transport.ErrUnknownTopic, bare: true},
	{err: groups.ErrUnknownPartition, wire: transport.ErrUnknownPartition, bare: true},
	{err: groups.ErrInvalidRequest, wire: transport.ErrInvalidRequest, bare: true},
	{err: groups.ErrMalformed, wire: transport.ErrStorageFailed},
	{err: groups.ErrNotCoordinator, wire: transport.ErrNotCoordinator, bare: true},
	{err: groups.ErrCoordinatorLoading, wire: transport.ErrCoordinatorLoading, bare: true},
	{err: groups.ErrCoordinatorFailed, wire: transport.ErrStorageFailed, bare: true},
	{err: metadata.ErrUnknownTopic, wire: transport.ErrUnknownTopic},
	{err: metadata.ErrTopicExists, wire: transport.ErrTopicExists},
	{err: metadata.ErrNotEnoughBrokers, wire: transport.ErrInvalidReplication},
	{err: metadata.ErrInvalidConfig, wire: transport.ErrInvalidConfig},
	{err: metadata.ErrInvalidAssignment, wire: transport.ErrInvalidRequest},
	{err: metadata.ErrInvalid, wire: transport.ErrInvalidRequest},
	{err: transport.ErrMalformed, wire: transport.ErrInvalidRequest},
	{err: context.DeadlineExceeded, wire: transport.ErrTimeout},
	{err: context.Canceled, wire: transport.ErrShuttingDown},
}

// WireError gives err the code of the first sentinel it matches, keeping its
// text. Errors that already carry a code keep it.
func WireError(err error) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return err
	}
	for _, m := range wireErrors {
		if errors.Is(err, m.err) {
			msg := err.Error()
			if m.bare {
				// The code names the sentinel: its own words go.
				msg = strings.TrimPrefix(msg, m.err.Error()+": ")
			}
			return &transport.Error{Code: m.wire.Code, Retriable: m.wire.Retriable, Message: m.wire.Code.String() + ": " + msg}
		}
	}
	return err
}
