package client

import (
	"errors"
	"fmt"

	"gostream/transport"
)

// Sentinel errors of the client. Errors from the cluster keep their
// transport sentinels (transport.ErrNotLeader, transport.ErrUnknownTopic,
// ...): test for both with errors.Is.
var (
	// ErrClosed means the Client or Producer is closed.
	ErrClosed = errors.New("client: closed")
	// ErrInvalidConfig means a Config or ProducerConfig that cannot work.
	ErrInvalidConfig = errors.New("client: invalid config")
	// ErrNotAppended marks a produce error that proves the record is not in
	// the log: sending it again cannot duplicate it.
	ErrNotAppended = errors.New("client: not appended")
	// ErrUnknownOutcome marks a produce error after which the record may or
	// may not be in the log. The client never resends such a record.
	ErrUnknownOutcome = errors.New("client: outcome unknown")
	// ErrBufferFull means a record could not be buffered before its context
	// ended (Send) or ProducerConfig.MaxBlock passed (SendAsync) because
	// ProducerConfig.BufferBytes were taken.
	ErrBufferFull = errors.New("client: producer buffer full")
	// ErrCorruptBatch means a fetched batch failed verification: its
	// checksum, framing, record layout or offsets. It also matches the
	// record package's error (record.ErrChecksum or record.ErrInvalid).
	ErrCorruptBatch = errors.New("client: corrupt batch")
	// ErrTopicRecreated means a Producer or Consumer that started on one
	// topic finds that the topic was deleted and another of the same name
	// created: its records are never written to, nor read from, the new
	// one. It matches transport.ErrUnknownTopicID.
	ErrTopicRecreated = fmt.Errorf("client: topic deleted and created again: %w", transport.ErrUnknownTopicID)
	// ErrNotServing means a topic was created (or grew) but some of its
	// new partitions' leaders did not answer before the deadline (see
	// CreateTopic, CreatePartitions). It matches transport.ErrNotReady.
	ErrNotServing = fmt.Errorf("client: topic created, partitions not serving yet: %w", transport.ErrNotReady)
	// ErrNoLeader means the metadata names no reachable leader for a
	// partition. It matches transport.ErrBrokerNotAvailable.
	ErrNoLeader = fmt.Errorf("client: no leader known: %w", transport.ErrBrokerNotAvailable)
	// ErrMemberStopped means a GroupConsumer stopped for good: its
	// coordinator refused what cannot change (an invalid subscription or
	// group name, an instance id another live member holds). The error says why; Poll returns it
	// from then on. Any other error of Poll passes.
	ErrMemberStopped = errors.New("client: group member stopped")
)

// staleRoute reports whether err suggests the cached metadata sent a
// request to the wrong broker, so that refreshing it may help.
func staleRoute(err error) bool {
	return errors.Is(err, transport.ErrNotLeader) ||
		errors.Is(err, transport.ErrUnknownTopic) ||
		errors.Is(err, transport.ErrUnknownPartition) ||
		errors.Is(err, transport.ErrBrokerNotAvailable) ||
		errors.Is(err, transport.ErrShuttingDown) ||
		errors.Is(err, transport.ErrNotReady) ||
		errors.Is(err, transport.ErrUnknownTopicID)
}
