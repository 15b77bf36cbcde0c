package transport

// Durable Streams APIs (docs/durable-streams.md). A node that does not
// lead a stream hands each protocol operation to the stream's leader as a
// StreamRequest; the controller creates and deletes streams
// (StreamAdminRequest). The operation's arguments and results travel as
// JSON in Args (they are small and change with the protocol), the data as
// bytes beside them.
const (
	// APIStream carries one stream operation to the stream's leader.
	APIStream API = 40
	// APIStreamAdmin asks the controller to create or delete a stream.
	APIStreamAdmin API = 41
)

func init() {
	apiNames[APIStream] = "Stream"
	apiNames[APIStreamAdmin] = "StreamAdmin"
}

// StreamRequest is one operation on a stream, for its leader.
type StreamRequest struct {
	Op      string
	Topic   string
	TopicID string
	Args    []byte // JSON of the operation's arguments
	Payload []byte // an append's body
}

// Encode implements Message.
func (r *StreamRequest) Encode(e *Encoder) {
	e.String(r.Op)
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Bytes32(r.Args)
	e.Bytes32(r.Payload)
}

// EncodedSize implements Sized.
func (r *StreamRequest) EncodedSize() int {
	return 6 + len(r.Op) + len(r.Topic) + len(r.TopicID) + 8 + len(r.Args) + len(r.Payload)
}

// Decode implements Message.
func (r *StreamRequest) Decode(d *Decoder) {
	r.Op = d.String()
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Args = d.Bytes32()
	r.Payload = d.Bytes32()
}

// StreamResponse is an operation's result: JSON in Args, data in Items
// (a read's messages).
type StreamResponse struct {
	Args  []byte
	Items [][]byte
}

// Encode implements Message.
func (r *StreamResponse) Encode(e *Encoder) {
	e.Bytes32(r.Args)
	e.Uint32(uint32(len(r.Items)))
	for _, it := range r.Items {
		e.Bytes32(it)
	}
}

// EncodedSize implements Sized.
func (r *StreamResponse) EncodedSize() int {
	n := 8 + len(r.Args)
	for _, it := range r.Items {
		n += 4 + len(it)
	}
	return n
}

// Decode implements Message.
func (r *StreamResponse) Decode(d *Decoder) {
	r.Args = d.Bytes32()
	n := d.Count(4)
	if n > 0 {
		r.Items = make([][]byte, n)
		for i := range r.Items {
			r.Items[i] = d.Bytes32()
		}
	}
}

// StreamAdminRequest asks the controller to create (Op "create") or
// delete (Op "delete") the stream of Topic. Stream is the JSON of its
// metadata.Stream on create. A delete with TopicID deletes only that
// incarnation of the topic: an expired stream's leader names the one that
// expired, which a new stream of the same path must not stand in for.
type StreamAdminRequest struct {
	Op                string
	Topic             string
	ReplicationFactor int32
	Stream            []byte
	TopicID           string
}

// Encode implements Message.
func (r *StreamAdminRequest) Encode(e *Encoder) {
	e.String(r.Op)
	e.String(r.Topic)
	e.Int32(r.ReplicationFactor)
	e.Bytes32(r.Stream)
	e.String(r.TopicID)
}

// Decode implements Message.
func (r *StreamAdminRequest) Decode(d *Decoder) {
	r.Op = d.String()
	r.Topic = d.String()
	r.ReplicationFactor = d.Int32()
	r.Stream = d.Bytes32()
	r.TopicID = d.String()
}

// StreamAdminResponse answers: the JSON of the controller's answer.
type StreamAdminResponse struct {
	Result []byte
}

// Encode implements Message.
func (r *StreamAdminResponse) Encode(e *Encoder) { e.Bytes32(r.Result) }

// Decode implements Message.
func (r *StreamAdminResponse) Decode(d *Decoder) { r.Result = d.Bytes32() }
