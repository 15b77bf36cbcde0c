package kafkaapi

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"gostream/transport"
)

// kafkaCodes maps the core's error codes (transport.Error, after
// Config.Classify) to Kafka's: the Kafka protocol's one error table. A
// retriable Kafka code is chosen where the client should refresh its
// metadata and send again (the leader moved, a partition not ready).
var kafkaCodes = map[transport.Code]*kerr.Error{
	transport.CodeNotLeader:             kerr.NotLeaderForPartition,
	transport.CodeUnknownTopic:          kerr.UnknownTopicOrPartition,
	transport.CodeUnknownTopicID:        kerr.UnknownTopicOrPartition,
	transport.CodeUnknownPartition:      kerr.UnknownTopicOrPartition,
	transport.CodeOffsetOutOfRange:      kerr.OffsetOutOfRange,
	transport.CodeMessageTooLarge:       kerr.MessageTooLarge,
	transport.CodeInvalidBatch:          kerr.CorruptMessage,
	transport.CodeInvalidTopicName:      kerr.InvalidTopicException,
	transport.CodeTopicSealed:           kerr.PolicyViolation,
	transport.CodeUnauthorized:          kerr.TopicAuthorizationFailed,
	transport.CodeUnauthenticated:       kerr.SaslAuthenticationFailed,
	transport.CodeReplicationFailed:     kerr.NotEnoughReplicasAfterAppend,
	transport.CodeNotReady:              kerr.LeaderNotAvailable,
	transport.CodeShuttingDown:          kerr.NotLeaderForPartition,
	transport.CodeBrokerNotAvailable:    kerr.LeaderNotAvailable,
	transport.CodeTimeout:               kerr.RequestTimedOut,
	transport.CodeStorageFailed:         kerr.KafkaStorageError,
	transport.CodeNoSpace:               kerr.KafkaStorageError,
	transport.CodeStaleEpoch:            kerr.NotLeaderForPartition,
	transport.CodeInvalidRequest:        kerr.InvalidRequest,
	transport.CodeBusy:                  kerr.RequestTimedOut,
	transport.CodeNotController:         kerr.NotController,
	transport.CodeTopicExists:           kerr.TopicAlreadyExists,
	transport.CodeInvalidPartitions:     kerr.InvalidPartitions,
	transport.CodeInvalidReplication:    kerr.InvalidReplicationFactor,
	transport.CodeInvalidConfig:         kerr.InvalidConfig,
	transport.CodeControllerUnavailable: kerr.NotController,
	transport.CodeOutOfOrderSequence:    kerr.OutOfOrderSequenceNumber,
	transport.CodeInvalidProducerEpoch:  kerr.InvalidProducerEpoch,
}

// code is the Kafka error code of err (0 for nil).
func (s *Server) code(err error) int16 {
	if err == nil {
		return 0
	}
	if s.cfg.Classify != nil {
		err = s.cfg.Classify(err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		if k, ok := kafkaCodes[te.Code]; ok {
			return k.Code
		}
	}
	return kerr.UnknownServerError.Code
}
