package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterMessages are the messages between nodes (and the operator's JSON
// envelope), indexed by the first byte of a FuzzClusterMessage input: one
// target covers them all, so that the short fuzz pass of `make test` stays
// short.
var clusterMessages = []func() Message{
	func() Message { return &RegisterBrokerRequest{} },
	func() Message { return &MetadataBlob{} },
	func() Message { return &FetchMetadataRequest{} },
	func() Message { return &ReplicateRequest{} },
	func() Message { return &ReplicateResponse{} },
	func() Message { return &ReplicaStateRequest{} },
	func() Message { return &ReplicaStateResponse{} },
	func() Message { return &DescribeClusterResponse{} },
	func() Message { return &CatchUpRequest{} },
	func() Message { return &CatchUpResponse{} },
	func() Message { return &JSONMessage{} },
	func() Message { return &ReplicaDigestRequest{} },
	func() Message { return &ReplicaDigestResponse{} },
	func() Message { return &ReplicaBatchesRequest{} },
	func() Message { return &ReplicaBatchesResponse{} },
	func() Message { return &TruncateReplicaRequest{} },
	func() Message { return &RecoverReplicaResponse{} },
}

// clusterSeeds are full values of every cluster message.
func clusterSeeds() []Message {
	return []Message{
		&RegisterBrokerRequest{ID: 2, Addr: "n2:9400", HTTP: "n2:9402", Gossip: "n2:9401", ClusterID: "c", RootID: "00112233445566778899aabbccddeeff", MetadataEpoch: 7},
		&MetadataBlob{Metadata: []byte(`{"version":1}`)},
		&FetchMetadataRequest{KnownEpoch: 9, BrokerID: 3, Addr: "n3:9400"},
		&ReplicateRequest{Topic: "t", TopicID: "id", Partition: 1, LeaderEpoch: 2, LeaderID: 1, HighWatermark: 5, Batch: []byte("batch")},
		&ReplicateResponse{LogEndOffset: 10},
		&ReplicaStateRequest{Topic: "t", TopicID: "id", Partition: 0, LeaderEpoch: 3, TailBatches: 8},
		&ReplicaStateResponse{LogStartOffset: 1, LogEndOffset: 9, HighWatermark: 8, LastEpoch: 2, FencedEpoch: 3,
			Tail: []BatchID{{BaseOffset: 1, NextOffset: 4, LeaderEpoch: 2, CRC: 7}}, Problem: "damaged"},
		&DescribeClusterResponse{NodeID: 1, Metadata: []byte("{}"), Members: []Member{{BrokerID: 2, Gossip: "g", State: "alive", RootID: "r"}},
			RootID: "r1", Controller: "refuses"},
		&CatchUpRequest{Topic: "t", TopicID: "id", Partition: 2, Broker: 3},
		&CatchUpResponse{FromOffset: 1, ToOffset: 2},
		&JSONMessage{Data: []byte(`{"a":1}`)},
		&ReplicaDigestRequest{Topic: "t", TopicID: "id", Partition: 1, From: 0, To: 10, Verify: true},
		&ReplicaDigestResponse{Digest: make([]byte, 32), Batches: 4},
		&ReplicaBatchesRequest{Topic: "t", TopicID: "id", Partition: 1, Before: 10, Max: 256},
		&ReplicaBatchesResponse{Batches: []BatchID{{BaseOffset: 0, NextOffset: 2, LeaderEpoch: 1, CRC: 9}}},
		&TruncateReplicaRequest{Topic: "t", TopicID: "id", Partition: 1, LeaderEpoch: 2, Offset: 5},
		&RecoverReplicaResponse{PreviousEnd: 9, CommonPrefix: 5, CopiedTo: 12},
	}
}

// FuzzClusterMessage decodes arbitrary bytes as the message its first byte
// picks: decoding never panics, fails only with ErrMalformed, and a body
// that decodes is the one encoding of its value.
func FuzzClusterMessage(f *testing.F) { fuzzPicked(f, clusterMessages, clusterSeeds()) }

// fuzzPicked fuzzes a set of messages in one target: an input's first byte
// picks the message, the rest is its body, which decodes only with
// ErrMalformed errors and, when it decodes, is the one encoding of its
// value. seeds[i] is a full value of messages[i].
func fuzzPicked(f *testing.F, messages []func() Message, seeds []Message) {
	for i, m := range seeds {
		enc := Marshal(nil, m)
		f.Add(append([]byte{byte(i)}, enc...))
		f.Add(append([]byte{byte(i)}, enc[:len(enc)/2]...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		m := messages[int(in[0])%len(messages)]()
		body := in[1:]
		if err := Unmarshal(body, m); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if again := Marshal(nil, m); !bytes.Equal(again, body) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x\n value %#v", body, again, m)
		}
	})
}

// Every cluster message round-trips, with every field set.
func TestClusterMessagesRoundTrip(t *testing.T) { roundTripAll(t, clusterMessages, clusterSeeds()) }

// roundTripAll checks that every seed decodes into its message and
// encodes back to the same bytes.
func roundTripAll(t *testing.T, messages []func() Message, seeds []Message) {
	if len(seeds) != len(messages) {
		t.Fatalf("%d seeds for %d messages", len(seeds), len(messages))
	}
	for i, m := range seeds {
		enc := Marshal(nil, m)
		got := messages[i]()
		if err := Unmarshal(enc, got); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if again := Marshal(nil, got); !bytes.Equal(again, enc) {
			t.Fatalf("%T: re-encoding differs", m)
		}
	}
}

// RegisterBrokerRequest's trailing fields have one encoding each: an
// empty Kafka field is sent only before Listeners, an empty Listeners
// field only before Rack, an empty Rack never (FuzzClusterMessage found
// an empty trailing Kafka field that decoded and re-encoded without it).
// A broker in a rack sends it last, after empty fields where it has no
// Kafka or named listeners.
func TestRegisterBrokerTrailingFields(t *testing.T) {
	base := Marshal(nil, &RegisterBrokerRequest{ID: 1, Addr: "a:1", MetadataEpoch: -1})
	for name, tail := range map[string][]byte{
		"empty Kafka, nothing after": {0, 0},
		"empty Listeners":            {0, 1, 'k', 0, 0},
		"empty Rack":                 {0, 1, 'k', 0, 1, 'l', 0, 0},
		"empty Rack after nothing":   {0, 0, 0, 0, 0, 0},
	} {
		var r RegisterBrokerRequest
		assert.ErrorIs(t, Unmarshal(append(bytes.Clone(base), tail...), &r), ErrMalformed, name)
	}
	for _, r := range []*RegisterBrokerRequest{
		{ID: 1, Addr: "a:1", Listeners: "external://h:2"},
		{ID: 1, Addr: "a:1", Kafka: "default://h:3"},
		{ID: 1, Addr: "a:1", Kafka: "default://h:3", Listeners: "external://h:2"},
		{ID: 1, Addr: "a:1"},
		{ID: 1, Addr: "a:1", Rack: "rack-a"},
		{ID: 1, Addr: "a:1", Kafka: "default://h:3", Rack: "rack-a"},
		{ID: 1, Addr: "a:1", Kafka: "default://h:3", Listeners: "external://h:2", Rack: "rack-a"},
	} {
		var got RegisterBrokerRequest
		require.NoError(t, Unmarshal(Marshal(nil, r), &got))
		assert.Equal(t, *r, got)
	}
}

// A move's recovery carries its throttle after the fields every recovery
// has; one without sends none, as before.
func TestCatchUpRequestThrottle(t *testing.T) {
	for _, want := range []CatchUpRequest{
		{Topic: "t", TopicID: "id", Partition: 2, Broker: 3, Throttle: 50_000_000},
		{Topic: "t", TopicID: "id", Partition: 2, Broker: 3},
	} {
		enc := Marshal(nil, &want)
		var got CatchUpRequest
		if err := Unmarshal(enc, &got); err != nil || got != want {
			t.Fatalf("%+v: got %+v, %v", want, got, err)
		}
	}
	plain := Marshal(nil, &CatchUpRequest{Topic: "t"})
	paced := Marshal(nil, &CatchUpRequest{Topic: "t", Throttle: 1})
	if len(paced) != len(plain)+8 {
		t.Fatalf("the throttle takes %d bytes, want 8", len(paced)-len(plain))
	}
	// A throttle on the wire is positive: one that is not is refused
	// (it would not encode back; the fuzzer found it).
	binary.BigEndian.PutUint64(paced[len(paced)-8:], uint64(0xffff_ffff_ffff_fffb)) // -5
	if err := Unmarshal(paced, &CatchUpRequest{}); err == nil {
		t.Fatal("a throttle of -5 bytes/s was taken")
	}
}
