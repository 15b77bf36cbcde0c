package controller

import "errors"

// The controller's sentinels. The native front end maps each to its wire
// code (rpcapi/errors.go); errors from the brokers it calls keep the codes
// they came with.
var (
	// ErrInvalidRequest: the request names something that cannot be done
	// as asked (a broker outside the active set, the leader recovered, a
	// partition changed meanwhile).
	ErrInvalidRequest = errors.New("controller: invalid request")
	// ErrInvalidPartitions and ErrInvalidReplication: a topic's partition
	// count or replication factor is out of range.
	ErrInvalidPartitions  = errors.New("controller: invalid partition count")
	ErrInvalidReplication = errors.New("controller: invalid replication factor")
	// ErrUnknownPartition: the topic has no such partition.
	ErrUnknownPartition = errors.New("controller: unknown partition")
	// ErrUnknownBroker: no broker of that id is registered.
	ErrUnknownBroker = errors.New("controller: unknown broker")
	// ErrBrokerNotAvailable: a broker to ask is not registered.
	ErrBrokerNotAvailable = errors.New("controller: broker not available")
	// ErrLeaderStillAvailable: a failover or drop named a replica that
	// answers with a healthy replica; nothing changed.
	ErrLeaderStillAvailable = errors.New("controller: leader still available")
	// ErrNoEligibleReplica: no replica can take over (none answers, or the
	// named one does not); only a reserved epoch moved.
	ErrNoEligibleReplica = errors.New("controller: no eligible replica")
	// ErrReplicaDivergence: the candidates of a failover disagree on a
	// shared offset; nothing was promoted.
	ErrReplicaDivergence = errors.New("controller: replicas diverge")
	// ErrDuplicateBroker: a broker id registered from a storage root other
	// than the one it is bound to, or a copy of a root beside it.
	ErrDuplicateBroker = errors.New("controller: duplicate broker")
	// ErrBrokerAlive: broker replace named a broker that answers.
	ErrBrokerAlive = errors.New("controller: broker alive")
	// ErrStampMismatch: a broker of another cluster registered.
	ErrStampMismatch = errors.New("controller: cluster mismatch")
	// ErrStaleMetadata: the controller's metadata is missing or older than
	// a broker's; it refuses every change until it is restored.
	ErrStaleMetadata = errors.New("controller: stale metadata")
	// ErrNotReady: a replaced broker's new node has not registered yet.
	ErrNotReady = errors.New("controller: not ready")
	// ErrNotController: a candidate of a replicated controller that is
	// not the active one.
	ErrNotController = errors.New("controller: not the active controller")
)
