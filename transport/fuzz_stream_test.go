package transport

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// streamMessages are the messages of the Durable Streams APIs, indexed by
// the first byte of a FuzzStreamMessage input (one target for them all,
// as for the cluster messages, so that the short fuzz pass of `make test`
// stays short). Its seeds are in testdata/fuzz/FuzzStreamMessage
// (fuzzSeeds).
var streamMessages = []func() Message{
	func() Message { return &StreamAdminRequest{} },
	func() Message { return &StreamAdminResponse{} },
	func() Message { return &StreamAppendRequest{} },
	func() Message { return &StreamAppendResponse{} },
	func() Message { return &StreamReadRequest{} },
	func() Message { return &StreamReadResponse{} },
	func() Message { return &StreamHeadRequest{} },
	func() Message { return &StreamHeadResponse{} },
	func() Message { return &StreamInitRequest{} },
	func() Message { return &StreamLogRequest{} },
	func() Message { return &StreamLogResponse{} },
}

// streamTopic is the shape of a stream's internal topic (metadata.StreamTopic).
const streamTopic = "__ds.0123456789abcdef0123456789abcdef"

const streamTopicID = "00112233445566778899aabbccddeeff"

func i64(v int64) *int64 { return &v }

// streamSeeds are full values of every stream message, as a node sends
// them.
func streamSeeds() []Message {
	tok := "0000000000000002_0000000000000006"
	ttl := i64(3600)
	return []Message{
		&StreamAdminRequest{Op: "create", Topic: streamTopic, ReplicationFactor: 3,
			Stream: []byte(`{"path":"chat/room-1","content_type":"text/plain","ttl":3600}`)},
		&StreamAdminResponse{Result: []byte(`{"outcome":"created","topic_id":"00112233445566778899aabbccddeeff"}`)},
		&StreamAppendRequest{Topic: streamTopic, TopicID: streamTopicID, ContentType: "application/json", HasSeq: true, Seq: "0042",
			Close: true, Producer: &StreamProducer{ID: "p", Epoch: 1, Seq: 2}, Body: []byte(`[{"text":"hi"},{"text":"\u0000\n"}]`)},
		&StreamAppendResponse{Refusal: &StreamRefusal{Status: 409, Message: "producer sequence gap", Closed: true, Tail: tok,
			ProducerEpoch: i64(3), ExpectedSeq: i64(4), ReceivedSeq: i64(6)}, Tail: tok, Closed: true, Duplicate: true, ProducerSeq: 7},
		&StreamReadRequest{Topic: streamTopic, TopicID: streamTopicID, Offset: "now", MaxBytes: 1 << 20, WaitMs: 20000},
		&StreamReadResponse{Status: StreamStatus{ContentType: "text/plain", TTL: ttl, ExpiresAt: "2030-01-01T00:00:00Z", Tail: tok, Closed: true},
			Messages: []StreamMessage{{Data: []byte("hello\x00"), Next: tok}, {Data: []byte("\xff"), Next: tok}},
			Start:    tok, Next: tok, UpToDate: true, Closed: true, TimedOut: true},
		&StreamHeadRequest{Topic: streamTopic, TopicID: streamTopicID},
		&StreamHeadResponse{Refusal: &StreamRefusal{Status: 404, Message: "stream \"x\" not found"},
			Status: StreamStatus{ContentType: "application/octet-stream", Tail: tok}, Ready: true, LogEnd: 9, Pos: 1 << 40},
		&StreamInitRequest{Topic: streamTopic, TopicID: streamTopicID, ExpectEnd: 3,
			Records: []StreamRecord{{Kind: 'f'}, {Kind: 'd', Data: []byte("abc")}, {Kind: 'i'}, {Kind: 'c'}}},
		&StreamLogRequest{Topic: streamTopic, TopicID: streamTopicID, From: 1, To: 7, MaxBytes: 1 << 20},
		&StreamLogResponse{Pos: 17, Records: []StreamRecord{{Offset: 1, Kind: 'd', Data: []byte("x")}, {Offset: 2, Kind: 'f'}}},
	}
}

// streamHostileSeeds are inputs that claim more than they hold, for the
// fuzzer to start from (first byte: the message, as streamMessages).
var streamHostileSeeds = map[string][]byte{
	"read-response-huge-count":    []byte("\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"),
	"log-response-two-for-one":    []byte("\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01d\x00\x00\x00\x00"),
	"init-request-huge-data":      []byte("\x08\x00\x01t\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00d\xff\xff\xff\xff"),
	"append-request-long-topic":   []byte("\x02\xff\xff"),
	"append-response-bool-2":      []byte("\x03\x02"),
	"admin-response-4gib":         []byte("\x01\xff\xff\xff\xff"),
	"admin-delete":                []byte("\x00\x00\x06delete\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"),
	"admin-delete-trailing-byte":  []byte("\x00\x00\x06delete\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00"),
	"refusal-epoch-without-value": []byte("\x07\x01\x01\x93\x00\x00\x00\x00\x00\x01"),
}

// FuzzStreamMessage decodes arbitrary bytes as the stream message its
// first byte picks (see fuzzPicked).
func FuzzStreamMessage(f *testing.F) { fuzzPicked(f, streamMessages, streamSeeds()) }

// Every stream message round-trips, with every field set, and a Sized
// one's EncodedSize is the length of its encoding.
func TestStreamMessagesRoundTrip(t *testing.T) {
	roundTripAll(t, streamMessages, streamSeeds())
	for _, m := range append(streamSeeds(),
		&StreamAppendRequest{},
		&StreamAppendRequest{HasSeq: true},
		&StreamReadResponse{},
		&StreamReadResponse{Messages: []StreamMessage{{}, {Data: []byte("a")}}},
		&StreamInitRequest{Records: []StreamRecord{{}}},
		&StreamLogResponse{},
		&StreamLogResponse{Refusal: &StreamRefusal{Message: "m", ExpectedSeq: i64(1)}},
	) {
		if s, ok := m.(Sized); ok {
			assert.Equal(t, len(Marshal(nil, m)), s.EncodedSize(), "%#v", m)
		}
	}
}
