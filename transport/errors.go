package transport

import (
	"errors"
	"strconv"
	"strings"
)

// Code is an error code on the wire.
type Code uint16

// Error codes. Their numbers are part of the protocol: never renumber.
const (
	CodeNone                  Code = 0
	CodeUnknown               Code = 1
	CodeInvalidRequest        Code = 2
	CodeUnsupportedVersion    Code = 3
	CodeUnknownTopic          Code = 4
	CodeUnknownPartition      Code = 5
	CodeTopicExists           Code = 6
	CodeInvalidTopicName      Code = 7
	CodeInvalidPartitions     Code = 8
	CodeOffsetOutOfRange      Code = 9
	CodeNotLeader             Code = 10
	CodeStaleEpoch            Code = 11
	CodeTopicSealed           Code = 12
	CodeMessageTooLarge       Code = 13
	CodeInvalidBatch          Code = 14
	CodeTimeout               Code = 15
	CodeReplicationFailed     Code = 16
	CodeNotController         Code = 17
	CodeLeaderStillAvailable  Code = 18
	CodeNoEligibleReplica     Code = 19
	CodeReplicaDivergence     Code = 20
	CodeOffsetRegression      Code = 21
	CodeControllerUnavailable Code = 22
	CodeBrokerNotAvailable    Code = 23
	CodeStorageFailed         Code = 24
	CodeInvalidReplication    Code = 25
	CodeShuttingDown          Code = 26
	CodeStampMismatch         Code = 27
	CodeNotReady              Code = 28
	CodeBusy                  Code = 29
	CodeUnknownTopicID        Code = 30
	CodeDuplicateBroker       Code = 31
	CodeBrokerAlive           Code = 32
	CodeStaleMetadata         Code = 33
	CodeUnknownBroker         Code = 34
	CodeNoSpace               Code = 35
	CodeInvalidConfig         Code = 36
	CodeNotCoordinator        Code = 37
	CodeCoordinatorLoading    Code = 38
	CodeUnknownMember         Code = 39
	CodeFencedMember          Code = 40
	CodeIllegalGeneration     Code = 41
	CodeFencedInstanceID      Code = 42
	CodeGroupNotEmpty         Code = 43
	CodeInvalidOffset         Code = 44
	CodeUnknownGroup          Code = 45
	CodeInvalidGroupName      Code = 46
	CodeUnauthenticated       Code = 47
	CodeUnauthorized          Code = 48
	CodeTLSMismatch           Code = 49
	CodeOutOfOrderSequence    Code = 50
	CodeInvalidProducerEpoch  Code = 51
	CodeInconsistentGroup     Code = 52
	CodeGroupSubscribed       Code = 53
)

// Error is an error that crosses the wire: a code, whether retrying the same
// request may succeed, and a message for people. Errors with the same code
// match each other under errors.Is, so the sentinels below work on both
// sides of a connection.
type Error struct {
	Code      Code
	Retriable bool
	Message   string
}

// Error returns the message, which starts with the code's name.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

type codeInfo struct {
	name      string
	retriable bool
}

// codes is the one table of names and retriability.
var codes = map[Code]codeInfo{
	CodeUnknown:               {"Unknown", false},
	CodeInvalidRequest:        {"InvalidRequest", false},
	CodeUnsupportedVersion:    {"UnsupportedVersion", false},
	CodeUnknownTopic:          {"UnknownTopic", false},
	CodeUnknownPartition:      {"UnknownPartition", false},
	CodeTopicExists:           {"TopicExists", false},
	CodeInvalidTopicName:      {"InvalidTopicName", false},
	CodeInvalidPartitions:     {"InvalidPartitions", false},
	CodeOffsetOutOfRange:      {"OffsetOutOfRange", false},
	CodeNotLeader:             {"NotLeader", true},
	CodeStaleEpoch:            {"StaleEpoch", false},
	CodeTopicSealed:           {"TopicSealed", false},
	CodeMessageTooLarge:       {"MessageTooLarge", false},
	CodeInvalidBatch:          {"InvalidBatch", false},
	CodeTimeout:               {"Timeout", true},
	CodeReplicationFailed:     {"ReplicationFailed", false},
	CodeNotController:         {"NotController", true},
	CodeLeaderStillAvailable:  {"LeaderStillAvailable", false},
	CodeNoEligibleReplica:     {"NoEligibleReplica", false},
	CodeReplicaDivergence:     {"ReplicaDivergence", false},
	CodeOffsetRegression:      {"OffsetRegression", false},
	CodeControllerUnavailable: {"ControllerUnavailable", true},
	CodeBrokerNotAvailable:    {"BrokerNotAvailable", true},
	CodeStorageFailed:         {"StorageFailed", false},
	CodeInvalidReplication:    {"InvalidReplicationFactor", false},
	CodeShuttingDown:          {"ShuttingDown", true},
	CodeStampMismatch:         {"StampMismatch", false},
	CodeNotReady:              {"NotReady", true},
	CodeBusy:                  {"Busy", true},
	// Retriable: the broker may not have heard of a new topic yet; a
	// client that finds its topic's id changed stops (see client).
	CodeUnknownTopicID:  {"UnknownTopicID", true},
	CodeDuplicateBroker: {"DuplicateBroker", false},
	CodeBrokerAlive:     {"BrokerAlive", false},
	CodeStaleMetadata:   {"StaleMetadata", false},
	CodeUnknownBroker:   {"UnknownBroker", false},
	// Retriable: space may come back, and the replica resumes by itself.
	CodeNoSpace:       {"NoSpace", true},
	CodeInvalidConfig: {"InvalidConfig", false},
	// Retriable: the client looks the group's coordinator up again.
	CodeNotCoordinator: {"NotCoordinator", true},
	// Retriable: the coordinator is rebuilding its groups from its log.
	CodeCoordinatorLoading: {"CoordinatorLoading", true},
	// Not retriable as they are: the member joins again.
	CodeUnknownMember:     {"UnknownMember", false},
	CodeFencedMember:      {"FencedMember", false},
	CodeIllegalGeneration: {"IllegalGeneration", false},
	CodeFencedInstanceID:  {"FencedInstanceId", false},
	CodeGroupNotEmpty:     {"GroupNotEmpty", false},
	CodeInvalidOffset:     {"InvalidOffset", false},
	CodeUnknownGroup:      {"UnknownGroup", false},
	CodeInvalidGroupName:  {"InvalidGroupName", false},
	CodeUnauthenticated:   {"Unauthenticated", false},
	CodeUnauthorized:      {"Unauthorized", false},
	CodeTLSMismatch:       {"TLSMismatch", false},
	// Not retriable as they are: an idempotent producer's batch out of
	// its sequence, or from an epoch of its producer id that is past.
	CodeOutOfOrderSequence:   {"OutOfOrderSequence", false},
	CodeInvalidProducerEpoch: {"InvalidProducerEpoch", false},
	// Not retriable while the group has members of the other protocol.
	CodeInconsistentGroup: {"InconsistentGroupProtocol", false},
	// Not retriable while a member of the group subscribes to the topic.
	CodeGroupSubscribed: {"GroupSubscribedToTopic", false},
}

// String is the code's name, as printed at the start of error messages.
func (c Code) String() string {
	if i, ok := codes[c]; ok {
		return i.name
	}
	if c == CodeNone {
		return "None"
	}
	return "Code" + strconv.Itoa(int(c))
}

// Retriable reports whether a request that failed with c may succeed if
// sent again (after refreshing metadata, for NotLeader).
func (c Code) Retriable() bool { return codes[c].retriable }

func sentinel(c Code) *Error { return &Error{Code: c, Retriable: c.Retriable()} }

// Sentinel errors, one per code. Wrap them with context on the server
// (fmt.Errorf("%w: topic %q", transport.ErrUnknownTopic, name)); clients
// test for them with errors.Is.
var (
	ErrUnknown               = sentinel(CodeUnknown)
	ErrInvalidRequest        = sentinel(CodeInvalidRequest)
	ErrUnsupportedVersion    = sentinel(CodeUnsupportedVersion)
	ErrUnknownTopic          = sentinel(CodeUnknownTopic)
	ErrUnknownPartition      = sentinel(CodeUnknownPartition)
	ErrTopicExists           = sentinel(CodeTopicExists)
	ErrInvalidTopicName      = sentinel(CodeInvalidTopicName)
	ErrInvalidPartitions     = sentinel(CodeInvalidPartitions)
	ErrOffsetOutOfRange      = sentinel(CodeOffsetOutOfRange)
	ErrNotLeader             = sentinel(CodeNotLeader)
	ErrStaleEpoch            = sentinel(CodeStaleEpoch)
	ErrTopicSealed           = sentinel(CodeTopicSealed)
	ErrMessageTooLarge       = sentinel(CodeMessageTooLarge)
	ErrInvalidBatch          = sentinel(CodeInvalidBatch)
	ErrTimeout               = sentinel(CodeTimeout)
	ErrReplicationFailed     = sentinel(CodeReplicationFailed)
	ErrNotController         = sentinel(CodeNotController)
	ErrLeaderStillAvailable  = sentinel(CodeLeaderStillAvailable)
	ErrNoEligibleReplica     = sentinel(CodeNoEligibleReplica)
	ErrReplicaDivergence     = sentinel(CodeReplicaDivergence)
	ErrOffsetRegression      = sentinel(CodeOffsetRegression)
	ErrControllerUnavailable = sentinel(CodeControllerUnavailable)
	ErrBrokerNotAvailable    = sentinel(CodeBrokerNotAvailable)
	ErrStorageFailed         = sentinel(CodeStorageFailed)
	ErrInvalidReplication    = sentinel(CodeInvalidReplication)
	ErrShuttingDown          = sentinel(CodeShuttingDown)
	ErrStampMismatch         = sentinel(CodeStampMismatch)
	ErrNotReady              = sentinel(CodeNotReady)
	// ErrBusy means the node refused the request before carrying it out,
	// because its request memory was in use (see ServerConfig): sending
	// it again later cannot do it twice.
	ErrBusy            = sentinel(CodeBusy)
	ErrUnknownTopicID  = sentinel(CodeUnknownTopicID)
	ErrDuplicateBroker = sentinel(CodeDuplicateBroker)
	ErrBrokerAlive     = sentinel(CodeBrokerAlive)
	ErrStaleMetadata   = sentinel(CodeStaleMetadata)
	ErrUnknownBroker   = sentinel(CodeUnknownBroker)
	ErrNoSpace         = sentinel(CodeNoSpace)
	// ErrInvalidConfig means a topic configuration key that does not
	// exist or a value it does not take; the message names the key.
	ErrInvalidConfig = sentinel(CodeInvalidConfig)
	// ErrNotCoordinator means the broker does not lead the group's
	// partition of __consumer_offsets: look the coordinator up again.
	ErrNotCoordinator = sentinel(CodeNotCoordinator)
	// ErrCoordinatorLoading means the coordinator is rebuilding the
	// group's state from its log; it answers soon.
	ErrCoordinatorLoading = sentinel(CodeCoordinatorLoading)
	// ErrUnknownMember means a member id the group does not hold (it
	// left, or its session expired): the member joins again.
	ErrUnknownMember = sentinel(CodeUnknownMember)
	// ErrFencedMember means a member epoch that is not the member's
	// current one: a request from its past, refused.
	ErrFencedMember = sentinel(CodeFencedMember)
	// ErrIllegalGeneration means a commit for a partition the member
	// does not own in the group's current assignment.
	ErrIllegalGeneration = sentinel(CodeIllegalGeneration)
	// ErrFencedInstanceID means a static member's instance id that a
	// live member of the group already uses.
	ErrFencedInstanceID = sentinel(CodeFencedInstanceID)
	// ErrInconsistentGroup means a join into a group whose members speak
	// the other group protocol (Kafka's classic one, or gostream's own):
	// a group has one kind of membership at a time.
	ErrInconsistentGroup = sentinel(CodeInconsistentGroup)
	// ErrGroupSubscribed means a deletion of committed offsets of a topic
	// a member of the group subscribes to: nothing was deleted.
	ErrGroupSubscribed = sentinel(CodeGroupSubscribed)
	// ErrGroupNotEmpty means a reset or delete of a group with members.
	ErrGroupNotEmpty = sentinel(CodeGroupNotEmpty)
	// ErrInvalidOffset means a commit of a negative offset, or one above
	// the partition's high watermark.
	ErrInvalidOffset = sentinel(CodeInvalidOffset)
	// ErrUnknownGroup means a group that holds nothing: no member, no
	// committed offset.
	ErrUnknownGroup = sentinel(CodeUnknownGroup)
	// ErrInvalidGroupName means a group name the topic-name rules refuse.
	ErrInvalidGroupName = sentinel(CodeInvalidGroupName)
	// ErrUnauthenticated means a request on a connection that has not
	// proved who it is (no verified certificate, no accepted token) to a
	// node that asks, a token it does not recognize, or a TLS handshake
	// that failed on a certificate.
	ErrUnauthenticated = sentinel(CodeUnauthenticated)
	// ErrUnauthorized means the principal may not do what it asked:
	// nothing was done. It is the same answer whether the resource exists
	// or not.
	ErrUnauthorized = sentinel(CodeUnauthorized)
	// ErrTLSMismatch means one end of a connection speaks TLS and the
	// other does not: a plaintext client at a TLS listener, or a TLS
	// client at a plaintext one. The message says which.
	ErrTLSMismatch = sentinel(CodeTLSMismatch)
	// ErrOutOfOrderSequence means an idempotent producer's batch whose
	// first sequence does not follow the last one the partition's leader
	// has from that producer (and is not a duplicate of one of its last
	// five batches): a batch in between was lost to the producer.
	ErrOutOfOrderSequence = sentinel(CodeOutOfOrderSequence)
	// ErrInvalidProducerEpoch means a batch from an epoch of its producer
	// id older than one the leader has seen: that producer was fenced.
	ErrInvalidProducerEpoch = sentinel(CodeInvalidProducerEpoch)
)

// ToWire turns any error into the *Error sent to a client. An error that
// wraps a sentinel keeps its code and its full text, prefixed with the
// code's name if it does not already start with it; any other error is
// CodeUnknown. Map package errors to sentinels before calling ToWire (the
// server edge does that once, in one table).
func ToWire(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	code := CodeUnknown
	if errors.As(err, &e) && e.Code != CodeNone {
		code = e.Code // CodeNone on the wire would read as success
	}
	msg := err.Error()
	name := code.String()
	if msg != name && !strings.HasPrefix(msg, name+":") {
		msg = name + ": " + msg
	}
	return &Error{Code: code, Retriable: code.Retriable(), Message: msg}
}
