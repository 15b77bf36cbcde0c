package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codeTable is the protocol's error table written out independently of
// errors.go: numbers are part of the protocol, and retriability is what
// clients act on.
var codeTable = []struct {
	code      Code
	num       uint16
	name      string
	retriable bool
	sentinel  *Error
}{
	{CodeUnknown, 1, "Unknown", false, ErrUnknown},
	{CodeInvalidRequest, 2, "InvalidRequest", false, ErrInvalidRequest},
	{CodeUnsupportedVersion, 3, "UnsupportedVersion", false, ErrUnsupportedVersion},
	{CodeUnknownTopic, 4, "UnknownTopic", false, ErrUnknownTopic},
	{CodeUnknownPartition, 5, "UnknownPartition", false, ErrUnknownPartition},
	{CodeTopicExists, 6, "TopicExists", false, ErrTopicExists},
	{CodeInvalidTopicName, 7, "InvalidTopicName", false, ErrInvalidTopicName},
	{CodeInvalidPartitions, 8, "InvalidPartitions", false, ErrInvalidPartitions},
	{CodeOffsetOutOfRange, 9, "OffsetOutOfRange", false, ErrOffsetOutOfRange},
	{CodeNotLeader, 10, "NotLeader", true, ErrNotLeader},
	{CodeStaleEpoch, 11, "StaleEpoch", false, ErrStaleEpoch},
	{CodeTopicSealed, 12, "TopicSealed", false, ErrTopicSealed},
	{CodeMessageTooLarge, 13, "MessageTooLarge", false, ErrMessageTooLarge},
	{CodeInvalidBatch, 14, "InvalidBatch", false, ErrInvalidBatch},
	{CodeTimeout, 15, "Timeout", true, ErrTimeout},
	{CodeReplicationFailed, 16, "ReplicationFailed", false, ErrReplicationFailed},
	{CodeNotController, 17, "NotController", true, ErrNotController},
	{CodeLeaderStillAvailable, 18, "LeaderStillAvailable", false, ErrLeaderStillAvailable},
	{CodeNoEligibleReplica, 19, "NoEligibleReplica", false, ErrNoEligibleReplica},
	{CodeReplicaDivergence, 20, "ReplicaDivergence", false, ErrReplicaDivergence},
	{CodeOffsetRegression, 21, "OffsetRegression", false, ErrOffsetRegression},
	{CodeControllerUnavailable, 22, "ControllerUnavailable", true, ErrControllerUnavailable},
	{CodeBrokerNotAvailable, 23, "BrokerNotAvailable", true, ErrBrokerNotAvailable},
	{CodeStorageFailed, 24, "StorageFailed", false, ErrStorageFailed},
	{CodeInvalidReplication, 25, "InvalidReplicationFactor", false, ErrInvalidReplication},
	{CodeShuttingDown, 26, "ShuttingDown", true, ErrShuttingDown},
	{CodeStampMismatch, 27, "StampMismatch", false, ErrStampMismatch},
	{CodeNotReady, 28, "NotReady", true, ErrNotReady},
	{CodeBusy, 29, "Busy", true, ErrBusy},
	{CodeUnknownTopicID, 30, "UnknownTopicID", true, ErrUnknownTopicID},
	{CodeDuplicateBroker, 31, "DuplicateBroker", false, ErrDuplicateBroker},
	{CodeBrokerAlive, 32, "BrokerAlive", false, ErrBrokerAlive},
	{CodeStaleMetadata, 33, "StaleMetadata", false, ErrStaleMetadata},
	{CodeUnknownBroker, 34, "UnknownBroker", false, ErrUnknownBroker},
	{CodeNoSpace, 35, "NoSpace", true, ErrNoSpace},
	{CodeInvalidConfig, 36, "InvalidConfig", false, ErrInvalidConfig},
	{CodeNotCoordinator, 37, "NotCoordinator", true, ErrNotCoordinator},
	{CodeCoordinatorLoading, 38, "CoordinatorLoading", true, ErrCoordinatorLoading},
	{CodeUnknownMember, 39, "UnknownMember", false, ErrUnknownMember},
	{CodeFencedMember, 40, "FencedMember", false, ErrFencedMember},
	{CodeIllegalGeneration, 41, "IllegalGeneration", false, ErrIllegalGeneration},
	{CodeFencedInstanceID, 42, "FencedInstanceId", false, ErrFencedInstanceID},
	{CodeGroupNotEmpty, 43, "GroupNotEmpty", false, ErrGroupNotEmpty},
	{CodeInvalidOffset, 44, "InvalidOffset", false, ErrInvalidOffset},
	{CodeUnknownGroup, 45, "UnknownGroup", false, ErrUnknownGroup},
	{CodeInvalidGroupName, 46, "InvalidGroupName", false, ErrInvalidGroupName},
	{CodeUnauthenticated, 47, "Unauthenticated", false, ErrUnauthenticated},
	{CodeUnauthorized, 48, "Unauthorized", false, ErrUnauthorized},
	{CodeTLSMismatch, 49, "TLSMismatch", false, ErrTLSMismatch},
	{CodeOutOfOrderSequence, 50, "OutOfOrderSequence", false, ErrOutOfOrderSequence},
	{CodeInvalidProducerEpoch, 51, "InvalidProducerEpoch", false, ErrInvalidProducerEpoch},
	{CodeInconsistentGroup, 52, "InconsistentGroupProtocol", false, ErrInconsistentGroup},
	{CodeGroupSubscribed, 53, "GroupSubscribedToTopic", false, ErrGroupSubscribed},
}

func TestCodeTable(t *testing.T) {
	require.Len(t, codes, len(codeTable), "a code was added: add it to codeTable")
	for _, tc := range codeTable {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.num, uint16(tc.code), "code numbers never change")
			assert.Equal(t, tc.name, tc.code.String())
			assert.Equal(t, tc.retriable, tc.code.Retriable())
			assert.Equal(t, tc.code, tc.sentinel.Code)
			assert.Equal(t, tc.retriable, tc.sentinel.Retriable)
			assert.Equal(t, tc.name, tc.sentinel.Error())
		})
	}
	assert.Equal(t, "None", CodeNone.String())
	assert.Equal(t, "Code999", Code(999).String())
	assert.False(t, Code(999).Retriable())
	assert.Equal(t, "Produce", APIProduce.String())
	assert.Equal(t, "API77", API(77).String())
}

func TestErrorIsMatchesByCode(t *testing.T) {
	for _, a := range codeTable {
		for _, b := range codeTable {
			fromWire := &Error{Code: a.code, Retriable: !a.retriable, Message: "from the wire"}
			assert.Equal(t, a.code == b.code, errors.Is(fromWire, b.sentinel), "%s vs %s", a.name, b.name)
		}
	}
	wrapped := fmt.Errorf("produce to n1: %w", &Error{Code: CodeNotLeader, Message: "NotLeader: x"})
	assert.ErrorIs(t, wrapped, ErrNotLeader)
	assert.NotErrorIs(t, ErrNotLeader, errors.New("NotLeader"))
}

func TestToWire(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want *Error
	}{
		{"nil", nil, nil},
		{"sentinel", ErrNotLeader, &Error{Code: CodeNotLeader, Retriable: true, Message: "NotLeader"}},
		{"wrapped sentinel keeps code, is not prefixed twice",
			fmt.Errorf("%w: topic %q partition 2, leader is 3", ErrNotLeader, "orders"),
			&Error{Code: CodeNotLeader, Retriable: true, Message: `NotLeader: topic "orders" partition 2, leader is 3`}},
		{"sentinel wrapped with context first is prefixed",
			fmt.Errorf("append: %w", ErrStorageFailed),
			&Error{Code: CodeStorageFailed, Message: "StorageFailed: append: StorageFailed"}},
		{"a name that only starts like the code is prefixed",
			fmt.Errorf("NotLeaderish: %w", ErrNotLeader),
			&Error{Code: CodeNotLeader, Retriable: true, Message: "NotLeader: NotLeaderish: NotLeader"}},
		{"an error from another node keeps its text",
			&Error{Code: CodeUnknownTopic, Message: `UnknownTopic: "x"`},
			&Error{Code: CodeUnknownTopic, Message: `UnknownTopic: "x"`}},
		{"retriability comes from the table, not the error",
			&Error{Code: CodeTimeout, Retriable: false, Message: "Timeout: slow"},
			&Error{Code: CodeTimeout, Retriable: true, Message: "Timeout: slow"}},
		{"unknown error", errors.New("disk on fire"), &Error{Code: CodeUnknown, Message: "Unknown: disk on fire"}},
		{"context error", context.Canceled, &Error{Code: CodeUnknown, Message: "Unknown: context canceled"}},
		{"connection closed is broker not available", ErrConnClosed,
			&Error{Code: CodeBrokerNotAvailable, Retriable: true, Message: "BrokerNotAvailable: connection closed"}},
		{"code None never reads as success", &Error{Code: CodeNone, Message: "oops"},
			&Error{Code: CodeUnknown, Message: "Unknown: oops"}},
		{"wrapped code None never reads as success", fmt.Errorf("x: %w", &Error{}),
			&Error{Code: CodeUnknown, Message: "Unknown: x: None"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ToWire(tc.err)
			assert.Equal(t, tc.want, got)
			if got == nil {
				return
			}
			// What the client reads is what ToWire made.
			_, back, err := SplitResponse(AppendResponseError(nil, got))
			require.NoError(t, err)
			require.NotNil(t, back, "an error response must not read as success")
			assert.Equal(t, got, back)
		})
	}
}

// TestErrorsAcrossTheWire checks that a sentinel returned by a handler
// matches the same sentinel in the client, after a real round trip.
func TestErrorsAcrossTheWire(t *testing.T) {
	errs := map[string]error{}
	for _, tc := range codeTable {
		errs[tc.name] = fmt.Errorf("%w: detail of %s", tc.sentinel, tc.name)
	}
	errs["plain"] = errors.New("plain failure")
	errs["connclosed"] = ErrConnClosed
	h := HandlerFunc(func(ctx context.Context, req *Request) Reply {
		var r TopicRequest
		if err := Unmarshal(req.Body, &r); err != nil {
			return Immediate(nil, err)
		}
		if req.API == 1 {
			return Immediate(nil, errs[r.Name]) // from Handle
		}
		return func(context.Context) (Message, error) { return nil, errs[r.Name] } // from the Reply
	})
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)

	for _, tc := range codeTable {
		for _, api := range []API{1, 2} {
			t.Run(fmt.Sprintf("%s/api%d", tc.name, api), func(t *testing.T) {
				err := c.Call(testContext(t), api, &TopicRequest{Name: tc.name}, nil)
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.sentinel)
				var we *Error
				require.ErrorAs(t, err, &we)
				assert.Equal(t, tc.retriable, we.Retriable)
				assert.Equal(t, tc.name+": detail of "+tc.name, we.Message)
				for _, other := range codeTable {
					if other.code != tc.code {
						assert.NotErrorIs(t, err, other.sentinel)
					}
				}
			})
		}
	}
	t.Run("plain error is Unknown", func(t *testing.T) {
		err := c.Call(testContext(t), 2, &TopicRequest{Name: "plain"}, nil)
		assert.ErrorIs(t, err, ErrUnknown)
		assert.EqualError(t, err, "Unknown: plain failure")
	})
	t.Run("a server-side ErrConnClosed is BrokerNotAvailable but not ErrConnClosed", func(t *testing.T) {
		err := c.Call(testContext(t), 2, &TopicRequest{Name: "connclosed"}, nil)
		assert.ErrorIs(t, err, ErrBrokerNotAvailable)
		assert.NotErrorIs(t, err, ErrConnClosed, "the client's connection did not close")
	})
}
