package transport

import (
	"encoding/binary"
	"strconv"

	"gostream/internal/bufpool"
)

// API identifies a request type. The numbers are part of the protocol.
type API uint16

// Client APIs.
const (
	APIProduce     API = 1
	APIFetch       API = 2
	APIListOffsets API = 3
	APIMetadata    API = 4
	APICreateTopic API = 5
	APIDeleteTopic API = 6
	APISealTopic   API = 7
	// APIAlterTopicConfig changes a topic's configuration
	// (AlterTopicConfigRequest, answered with the topic's TopicInfo).
	APIAlterTopicConfig API = 8
)

// Idempotent reports whether a request of api can be made twice with the
// effect of once: it only reads, or (ReplicaState) fences at an epoch the
// replica then holds anyway, or (Audit) the controller records an event
// that arrives twice in a row once. A call of such an API whose outcome is
// unknown may be retried.
func Idempotent(api API) bool {
	switch api {
	case APIFetch, APIListOffsets, APIMetadata, APIFetchMetadata, APIReplicaState, APIDescribeCluster,
		APIReplicaDigest, APIReplicaBatches, APIHistory, APIAudit, APIControllerStatus,
		APIStreamRead, APIStreamHead, APIStreamLog, APIReassignStatus, APIMoveProgress, APIPlanMoves:
		return true
	}
	return false
}

// Version1 is the version of every API today.
const Version1 = 1

var apiNames = map[API]string{
	APIProduce: "Produce", APIFetch: "Fetch", APIListOffsets: "ListOffsets",
	APIMetadata: "Metadata", APICreateTopic: "CreateTopic", APIDeleteTopic: "DeleteTopic",
	APISealTopic: "SealTopic", APIAlterTopicConfig: "AlterTopicConfig",
}

// String is the API's name, for logs and metrics.
func (a API) String() string {
	if n, ok := apiNames[a]; ok {
		return n
	}
	return "API" + strconv.Itoa(int(a))
}

// Message is a request or response body. Decode reads exactly the bytes
// Encode writes; Unmarshal rejects anything else.
type Message interface {
	Encode(e *Encoder)
	Decode(d *Decoder)
}

// Sized is a Message that knows the size of its encoding (at least
// roughly), so that its frame is allocated once, not grown while the large
// byte fields it carries are copied in.
type Sized interface {
	EncodedSize() int
}

// splicer is a message whose encoding ends with a large byte field that
// a server writes from where it lies, after the rest of the frame, rather
// than copy it in: a fetch's batches, in a read buffer or a range of a
// file that the message gives back (Release) once the frame is written.
type splicer interface {
	// encodeHead appends the encoding up to the tail's bytes.
	encodeHead(dst []byte) []byte
	// tail is the rest of the encoding, unless fileTail is not nil.
	tail() []byte
	// fileTail is the rest of the encoding as a range of a file, or nil.
	fileTail() *FileRange
	// readFile reads the file range into memory, for a connection that
	// cannot send it from the file: tail then returns it, fileTail nil.
	readFile() error
}

// gatherer is a request whose encoding ends with large byte slices back to
// back (a produce's batch, the batches of a Replicate) that a client
// writes from where they lie, after the rest of the frame, with one
// writev, rather than copy them into the frame. The caller of SendNotify
// keeps them unchanged until it returns: by then they are written.
type gatherer interface {
	// encodeHead appends the encoding up to the slices' bytes.
	encodeHead(dst []byte) []byte
	// gather returns the slices that end the encoding, and their total
	// length.
	gather() ([][]byte, int)
}

// gatherMin and gatherAvg are what a request's slices must come to, in all
// and on average, to be written where they lie: below, copying them costs
// less than the writev's extra pieces.
const (
	gatherMin = 16 << 10
	gatherAvg = 4 << 10
)

// frameOf returns the frame of a request as the buffers to write, and
// the one buffer of them that the caller may give back to the pool once
// they are written.
func frameOf(m Message, api, version uint16, correlationID uint32) (bufs [][]byte, own []byte) {
	if g, ok := m.(gatherer); ok {
		if tails, n := g.gather(); n >= gatherMin && n >= gatherAvg*len(tails) {
			head := g.encodeHead(make([]byte, frameHead, frameHead+128))
			head = finishFrameLen(head, len(head)-4+n, api, version, correlationID)
			return append([][]byte{head}, tails...), nil
		}
	}
	frame := finishFrame(Marshal(newFrame(m, 64), m), api, version, correlationID)
	return [][]byte{frame}, frame
}

// Marshal appends the encoding of m to dst.
func Marshal(dst []byte, m Message) []byte {
	e := NewEncoder(dst)
	m.Encode(e)
	return e.Bytes()
}

// frameHead is the length prefix and the header of a frame.
const frameHead = 4 + FrameHeaderSize

// newFrame returns a buffer for a frame: room for its head, then capacity
// for a body of extra bytes and, when m is Sized, for m's encoding. A large
// one comes from the buffer pool: its owner may give it back with bufpool.Put
// once it is written.
func newFrame(m Message, extra int) []byte {
	if s, ok := m.(Sized); ok {
		extra += s.EncodedSize()
	}
	return bufpool.Get(frameHead + extra)[:frameHead]
}

// finishFrame fills in the head of a frame built on newFrame.
func finishFrame(frame []byte, api, version uint16, correlationID uint32) []byte {
	return finishFrameLen(frame, len(frame)-4, api, version, correlationID)
}

// finishFrameLen fills in the head of a frame of n bytes after its length
// prefix, of which frame holds the first ones.
func finishFrameLen(frame []byte, n int, api, version uint16, correlationID uint32) []byte {
	binary.BigEndian.PutUint32(frame[0:], uint32(n))
	binary.BigEndian.PutUint16(frame[4:], api)
	binary.BigEndian.PutUint16(frame[6:], version)
	binary.BigEndian.PutUint32(frame[8:], correlationID)
	return frame
}

// Unmarshal decodes body into m. It returns an error wrapping ErrMalformed
// unless body is exactly one encoding of m.
func Unmarshal(body []byte, m Message) error {
	d := NewDecoder(body)
	m.Decode(d)
	return d.Finish()
}

// Empty is a message with no fields, for responses that carry only success.
type Empty struct{}

// Encode implements Message.
func (*Empty) Encode(*Encoder) {}

// Decode implements Message.
func (*Empty) Decode(*Decoder) {}
