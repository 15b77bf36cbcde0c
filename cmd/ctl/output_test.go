package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/record"
	"gostream/transport"
)

func TestTableText(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("hello world"), "hello world"},
		{[]byte(`{"a":"ü"}`), `{"a":"ü"}`},
		{[]byte(""), `""`},
		{[]byte("a\tb\nc"), `"a\tb\nc"`},
		{[]byte{0xff, 0xfe}, "base64://4="},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tableText(tt.in), "%q", tt.in)
	}
	assert.Equal(t, "(null)", tableKey(nil))
	assert.Equal(t, `""`, tableKey([]byte{}))
}

func TestConsumedRecordJSON(t *testing.T) {
	tests := []struct {
		name string
		rec  record.Record
		want string
	}{
		{
			name: "text without key",
			rec:  record.Record{Offset: 7, Timestamp: 1714564800123, Value: []byte("v <&>")},
			want: `{"topic":"t","partition":2,"offset":7,"timestamp":"2024-05-01T12:00:00.123Z","key":null,"value":"v <&>","headers":[]}`,
		},
		{
			name: "empty key and value",
			rec:  record.Record{Offset: 0, Timestamp: 0, Key: []byte{}, Value: []byte{}},
			want: `{"topic":"t","partition":2,"offset":0,"timestamp":"1970-01-01T00:00:00.000Z","key":"","value":"","headers":[]}`,
		},
		{
			name: "headers",
			rec: record.Record{Offset: 1, Timestamp: 1000, Key: []byte("k"), Value: []byte("v"),
				Headers: []record.Header{{Key: "a", Value: []byte("b,c")}, {Key: "a", Value: nil}}},
			want: `{"topic":"t","partition":2,"offset":1,"timestamp":"1970-01-01T00:00:01.000Z","key":"k","value":"v","headers":[{"key":"a","value":"b,c"},{"key":"a","value":""}]}`,
		},
		{
			name: "a value that is not UTF-8 makes every byte field base64",
			rec: record.Record{Offset: 3, Timestamp: 1000, Key: []byte("k"), Value: []byte{0xff},
				Headers: []record.Header{{Key: "h", Value: []byte("x")}}},
			want: `{"topic":"t","partition":2,"offset":3,"timestamp":"1970-01-01T00:00:01.000Z","key":"aw==","value":"/w==","headers":[{"key":"h","value":"eA=="}],"encoding":"base64"}`,
		},
		{
			name: "a header value that is not UTF-8",
			rec: record.Record{Offset: 4, Timestamp: 1000, Value: []byte("v"),
				Headers: []record.Header{{Key: "h", Value: []byte{0xc3}}}},
			want: `{"topic":"t","partition":2,"offset":4,"timestamp":"1970-01-01T00:00:01.000Z","key":null,"value":"dg==","headers":[{"key":"h","value":"ww=="}],"encoding":"base64"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, writeJSON(&buf, newConsumedRecord("t", 2, &tt.rec)))
			assert.Equal(t, tt.want+"\n", buf.String())
		})
	}
}

func TestErrorNames(t *testing.T) {
	tests := []struct {
		err      error
		name     string
		wantLine string
	}{
		{
			err:      fmt.Errorf("create topic %q: %w", "x", &transport.Error{Code: transport.CodeTopicExists, Message: `TopicExists: topic "x" exists`}),
			name:     "TopicExists",
			wantLine: `TopicExists: create topic "x": topic "x" exists`,
		},
		{
			err:      fmt.Errorf("produce to t/0: %w: %w", client.ErrNotAppended, transport.ErrTopicSealed),
			name:     "TopicSealed",
			wantLine: "TopicSealed: produce to t/0: client: not appended: TopicSealed",
		},
		{
			err: fmt.Errorf("catch up broker 3 on orders/2: %w", &transport.Error{Code: transport.CodeReplicaDivergence,
				Message: "ReplicaDivergence: broker 3's batch at offset 7 (epoch 1, crc 0badf00d) differs from the leader's"}),
			name:     "ReplicaDivergence",
			wantLine: "ReplicaDivergence: catch up broker 3 on orders/2: broker 3's batch at offset 7 (epoch 1, crc 0badf00d) differs from the leader's",
		},
		{err: fmt.Errorf("p: %w", client.ErrNoLeader), name: "NoLeader"},
		{err: fmt.Errorf("p: %w: %w", client.ErrCorruptBatch, transport.ErrInvalidBatch), name: "CorruptBatch"},
		{err: fmt.Errorf("p: %w: %w", client.ErrBufferFull, context.DeadlineExceeded), name: "BufferFull"},
		// Sent and never answered: the outcome is the news, whatever ended
		// the wait (the --timeout, a closed connection, a deadline, Ctrl-C).
		{err: fmt.Errorf("p: %w: %w", client.ErrUnknownOutcome, context.DeadlineExceeded), name: "UnknownOutcome"},
		{err: fmt.Errorf("p: %w: %w", client.ErrUnknownOutcome, context.Canceled), name: "UnknownOutcome"},
		{err: fmt.Errorf("p: %w: %w", client.ErrUnknownOutcome, transport.ErrTimeout), name: "UnknownOutcome"},
		{
			err: fmt.Errorf("create topic %q: %w: the controller (%s) did not answer within 3s; the change may have been made: %w",
				"late", client.ErrUnknownOutcome, "127.0.0.1:9400", transport.ErrConnClosed),
			name:     "UnknownOutcome",
			wantLine: `UnknownOutcome: create topic "late": client: outcome unknown: the controller (127.0.0.1:9400) did not answer within 3s; the change may have been made: BrokerNotAvailable: connection closed`,
		},
		// An answer that names what went wrong keeps its name.
		{
			err: fmt.Errorf("produce to t/0: %w: %w", client.ErrUnknownOutcome, &transport.Error{Code: transport.CodeReplicationFailed,
				Message: "ReplicationFailed: broker 3 did not store the batch"}),
			name:     "ReplicationFailed",
			wantLine: "ReplicationFailed: produce to t/0: client: outcome unknown: broker 3 did not store the batch",
		},
		{err: fmt.Errorf("p: %w: %w", client.ErrUnknownOutcome, transport.ErrNoSpace), name: "NoSpace"},
		{err: fmt.Errorf("p: %w", context.DeadlineExceeded), name: "Timeout"},
		{err: fmt.Errorf("p: %w", transport.ErrBrokerNotAvailable), name: "BrokerNotAvailable"},
		{err: fmt.Errorf("p: %w", context.Canceled), name: "Interrupted"},
		{err: client.ErrClosed, name: "Closed"},
		{err: fmt.Errorf("nothing known"), name: "Error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.name, errorName(tt.err))
			var buf bytes.Buffer
			assert.Equal(t, exitcode.Failed, exitcode.Report(&buf, failed(tt.err)))
			if tt.wantLine != "" {
				assert.Equal(t, tt.wantLine+"\n", buf.String())
			}
			assert.ErrorIs(t, failed(tt.err), tt.err, "the cause stays in the chain")
		})
	}
}

func TestDescribedPartition(t *testing.T) {
	p := client.PartitionMetadata{Partition: 1, Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 1, 3, 4}, Active: []int32{2, 1, 3}}
	offs := client.PartitionOffsets{LogStartOffset: 5, HighWatermark: 40, LogEndOffset: 42}
	tests := []struct {
		name     string
		offs     *client.PartitionOffsets
		ends     map[int32]int64
		problems map[int32]string
		status   string // replica_status
	}{
		{
			name: "every replica answered",
			offs: &offs, ends: map[int32]int64{1: 42, 3: 40, 4: 17},
			status: `[{"broker":2,"log_end_offset":42,"lag":0,"state":"leader"},
				{"broker":1,"log_end_offset":42,"lag":0,"state":"in-sync"},
				{"broker":3,"log_end_offset":40,"lag":2,"state":"lagging"},
				{"broker":4,"log_end_offset":17,"lag":25,"state":"inactive"}]`,
		},
		{
			// A full disk or damage, as the follower's own broker says;
			// out of the active set nothing waits for it.
			name: "a replica that reports a problem has failed",
			offs: &offs, ends: map[int32]int64{1: 41, 3: 42, 4: 17},
			problems: map[int32]string{1: "replication: replica unhealthy: the disk of broker 1 is full", 4: "the log is damaged"},
			status: `[{"broker":2,"log_end_offset":42,"lag":0,"state":"leader"},
				{"broker":1,"log_end_offset":41,"lag":1,"state":"failed","problem":"replication: replica unhealthy: the disk of broker 1 is full"},
				{"broker":3,"log_end_offset":42,"lag":0,"state":"in-sync"},
				{"broker":4,"log_end_offset":17,"lag":25,"state":"inactive"}]`,
		},
		{
			name: "silent replicas are unknown, not zero",
			offs: &offs, ends: map[int32]int64{3: 43},
			status: `[{"broker":2,"log_end_offset":42,"lag":0,"state":"leader"},
				{"broker":1,"log_end_offset":null,"lag":null,"state":"unknown"},
				{"broker":3,"log_end_offset":43,"lag":-1,"state":"diverged"},
				{"broker":4,"log_end_offset":null,"lag":null,"state":"unknown"}]`,
		},
		{
			name: "silent leader: nothing to measure against",
			ends: map[int32]int64{1: 42, 3: 40, 4: 17},
			status: `[{"broker":2,"log_end_offset":null,"lag":null,"state":"unknown"},
				{"broker":1,"log_end_offset":null,"lag":null,"state":"unknown"},
				{"broker":3,"log_end_offset":null,"lag":null,"state":"unknown"},
				{"broker":4,"log_end_offset":null,"lag":null,"state":"unknown"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := json.Marshal(describedPartitionOf(p, tt.offs, tt.ends, tt.problems))
			require.NoError(t, err)
			hw, start := "null", "null"
			if tt.offs != nil {
				hw, start = "40", "5"
			}
			assert.JSONEq(t, `{"partition":1,"leader":2,"leader_epoch":4,"replicas":[2,1,3,4],"active":[2,1,3],
				"high_watermark":`+hw+`,"log_start_offset":`+start+`,"replica_status":`+tt.status+`}`, string(out))
		})
	}
	t.Run("no leader", func(t *testing.T) {
		out, err := json.Marshal(describedPartitionOf(client.PartitionMetadata{Partition: 0, Leader: -1}, nil, nil, nil))
		require.NoError(t, err)
		assert.JSONEq(t, `{"partition":0,"leader":-1,"leader_epoch":0,"replicas":[],"active":[],
			"high_watermark":null,"log_start_offset":null,"replica_status":[]}`, string(out))
	})
}
