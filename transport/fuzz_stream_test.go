package transport

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// streamMessages are the messages of the Durable Streams APIs, indexed by
// the first byte of a FuzzStreamMessage input (one target for them all,
// as for the cluster messages).
var streamMessages = []func() Message{
	func() Message { return &StreamRequest{} },
	func() Message { return &StreamResponse{} },
	func() Message { return &StreamAdminRequest{} },
	func() Message { return &StreamAdminResponse{} },
}

// streamTopic is the shape of a stream's internal topic (durable.TopicFor).
const streamTopic = "__ds.0123456789abcdef0123456789abcdef"

// streamSeeds are full values of every stream message, as a node sends
// them: JSON arguments beside the data.
func streamSeeds() []Message {
	return []Message{
		&StreamRequest{Op: "append", Topic: streamTopic, TopicID: "00112233445566778899aabbccddeeff",
			Args:    []byte(`{"path":"chat/room-1","content_type":"application/json","producer":{"id":"p","epoch":1,"seq":2}}`),
			Payload: []byte(`[{"text":"hi"},{"text":"\u0000\n"}]`)},
		&StreamResponse{Args: []byte(`{"result":{"info":{"content_type":"text/plain","tail":"0000000000000002_0000000000000006"}}}`),
			Items: [][]byte{[]byte("hello\x00"), []byte("\xff"), []byte("x")}},
		&StreamAdminRequest{Op: "create", Topic: streamTopic, ReplicationFactor: 3,
			Stream: []byte(`{"path":"chat/room-1","content_type":"text/plain","ttl":3600}`)},
		&StreamAdminResponse{Result: []byte(`{"outcome":"created","topic_id":"00112233445566778899aabbccddeeff"}`)},
	}
}

// FuzzStreamMessage decodes arbitrary bytes as the stream message its
// first byte picks (see fuzzPicked).
func FuzzStreamMessage(f *testing.F) {
	// Counts and lengths that claim more than the body holds.
	f.Add([]byte("\x01\x00\x00\x00\x00\xff\xff\xff\xff"))                 // StreamResponse: 2^32-1 items
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00")) // StreamResponse: 2 items, room for 1
	f.Add([]byte("\x00\xff\xff"))                                         // StreamRequest: a 65535-byte Op
	f.Add([]byte("\x03\xff\xff\xff\xff"))                                 // StreamAdminResponse: a 4 GiB result
	// A delete (no metadata), then the same with a byte left over.
	f.Add([]byte("\x02\x00\x06delete\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00"))
	f.Add([]byte("\x02\x00\x06delete\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00"))
	fuzzPicked(f, streamMessages, streamSeeds())
}

// Every stream message round-trips, with every field set, and a Sized
// one's EncodedSize is the length of its encoding.
func TestStreamMessagesRoundTrip(t *testing.T) {
	roundTripAll(t, streamMessages, streamSeeds())
	for _, m := range append(streamSeeds(),
		&StreamRequest{},
		&StreamResponse{},
		&StreamResponse{Items: [][]byte{nil, {}, []byte("a")}},
	) {
		if s, ok := m.(Sized); ok {
			assert.Equal(t, len(Marshal(nil, m)), s.EncodedSize(), "%#v", m)
		}
	}
}
