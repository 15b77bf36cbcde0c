package transport

import "strconv"

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
)

// Version1 is the version of every API today.
const Version1 = 1

var apiNames = map[API]string{
	APIProduce: "Produce", APIFetch: "Fetch", APIListOffsets: "ListOffsets",
	APIMetadata: "Metadata", APICreateTopic: "CreateTopic", APIDeleteTopic: "DeleteTopic",
	APISealTopic: "SealTopic",
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

// Marshal appends the encoding of m to dst.
func Marshal(dst []byte, m Message) []byte {
	e := NewEncoder(dst)
	m.Encode(e)
	return e.Bytes()
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
