package transport

// Durable Streams APIs (docs/durable-streams.md). A node that does not
// lead a stream hands each protocol operation to the stream's leader as
// a typed request of its own API (append, read, head, and the two steps
// of a creation: init and log); the controller creates and deletes
// streams (StreamAdminRequest). A protocol answer other than success (a
// closed stream, a producer's sequence gap) travels in the response as a
// StreamRefusal, beside the fields of a success; an error of the cluster
// (not the leader, storage failed) is the frame's error, as for every
// API.
//
// API 40 was APIStream, which carried every operation as JSON in a byte
// field (until 13 of 18); its number is not used again.
const (
	// APIStreamAdmin asks the controller to create or delete a stream.
	APIStreamAdmin API = 41
	// APIStreamAppend appends to a stream (a POST).
	APIStreamAppend API = 46
	// APIStreamRead reads a stream (a GET; with a wait, a long poll).
	APIStreamRead API = 47
	// APIStreamHead describes a stream (a HEAD), with what a creator
	// needs to finish a creation.
	APIStreamHead API = 48
	// APIStreamInit appends one step of a creation.
	APIStreamInit API = 49
	// APIStreamLog reads the records of a stream's log, what a fork
	// copies.
	APIStreamLog API = 50
)

func init() {
	apiNames[APIStreamAdmin] = "StreamAdmin"
	apiNames[APIStreamAppend] = "StreamAppend"
	apiNames[APIStreamRead] = "StreamRead"
	apiNames[APIStreamHead] = "StreamHead"
	apiNames[APIStreamInit] = "StreamInit"
	apiNames[APIStreamLog] = "StreamLog"
}

// optInt64 appends an optional int64: a bool, and the value when set.
func optInt64(e *Encoder, v *int64) {
	e.Bool(v != nil)
	if v != nil {
		e.Int64(*v)
	}
}

func optInt64Size(v *int64) int {
	if v == nil {
		return 1
	}
	return 9
}

func decodeOptInt64(d *Decoder) *int64 {
	if !d.Bool() {
		return nil
	}
	v := d.Int64()
	return &v
}

// StreamRefusal is a protocol answer other than success: the HTTP status
// and message, and the headers the protocol gives with it.
type StreamRefusal struct {
	Status  uint16
	Message string
	// Closed is Stream-Closed: true; Tail is Stream-Next-Offset.
	Closed bool
	Tail   string
	// ProducerEpoch is a stale producer's current epoch (403);
	// ExpectedSeq and ReceivedSeq describe a sequence gap (409).
	ProducerEpoch *int64
	ExpectedSeq   *int64
	ReceivedSeq   *int64
}

// encodeRefusal appends an optional refusal: a bool, and the refusal
// when there is one.
func encodeRefusal(e *Encoder, r *StreamRefusal) {
	e.Bool(r != nil)
	if r == nil {
		return
	}
	e.Uint16(r.Status)
	e.String(r.Message)
	e.Bool(r.Closed)
	e.String(r.Tail)
	optInt64(e, r.ProducerEpoch)
	optInt64(e, r.ExpectedSeq)
	optInt64(e, r.ReceivedSeq)
}

func refusalSize(r *StreamRefusal) int {
	if r == nil {
		return 1
	}
	return 1 + 2 + 2 + len(r.Message) + 1 + 2 + len(r.Tail) +
		optInt64Size(r.ProducerEpoch) + optInt64Size(r.ExpectedSeq) + optInt64Size(r.ReceivedSeq)
}

func decodeRefusal(d *Decoder) *StreamRefusal {
	if !d.Bool() {
		return nil
	}
	r := &StreamRefusal{Status: d.Uint16(), Message: d.String(), Closed: d.Bool(), Tail: d.String()}
	r.ProducerEpoch = decodeOptInt64(d)
	r.ExpectedSeq = decodeOptInt64(d)
	r.ReceivedSeq = decodeOptInt64(d)
	return r
}

// StreamStatus is what HEAD tells of a stream.
type StreamStatus struct {
	ContentType string
	// TTL is the sliding time to live in seconds, nil for none.
	TTL       *int64
	ExpiresAt string
	// Tail is the token of the acknowledged tail.
	Tail   string
	Closed bool
}

func (s *StreamStatus) encode(e *Encoder) {
	e.String(s.ContentType)
	optInt64(e, s.TTL)
	e.String(s.ExpiresAt)
	e.String(s.Tail)
	e.Bool(s.Closed)
}

func (s *StreamStatus) size() int {
	return 2 + len(s.ContentType) + optInt64Size(s.TTL) + 2 + len(s.ExpiresAt) + 2 + len(s.Tail) + 1
}

func (s *StreamStatus) decode(d *Decoder) {
	s.ContentType = d.String()
	s.TTL = decodeOptInt64(d)
	s.ExpiresAt = d.String()
	s.Tail = d.String()
	s.Closed = d.Bool()
}

// StreamProducer names an idempotent producer's append.
type StreamProducer struct {
	ID    string
	Epoch int64
	Seq   int64
}

// StreamAppendRequest is a POST, for the stream's leader.
type StreamAppendRequest struct {
	Topic       string
	TopicID     string
	ContentType string
	// Seq is the Stream-Seq header, when HasSeq.
	HasSeq   bool
	Seq      string
	Close    bool
	Producer *StreamProducer
	Body     []byte
}

// Encode implements Message.
func (r *StreamAppendRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.String(r.ContentType)
	e.Bool(r.HasSeq)
	if r.HasSeq {
		e.String(r.Seq)
	}
	e.Bool(r.Close)
	e.Bool(r.Producer != nil)
	if p := r.Producer; p != nil {
		e.String(p.ID)
		e.Int64(p.Epoch)
		e.Int64(p.Seq)
	}
	e.Bytes32(r.Body)
}

// EncodedSize implements Sized.
func (r *StreamAppendRequest) EncodedSize() int {
	n := 2 + len(r.Topic) + 2 + len(r.TopicID) + 2 + len(r.ContentType) + 3 + 4 + len(r.Body)
	if r.HasSeq {
		n += 2 + len(r.Seq)
	}
	if r.Producer != nil {
		n += 2 + len(r.Producer.ID) + 16
	}
	return n
}

// Decode implements Message.
func (r *StreamAppendRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.ContentType = d.String()
	if r.HasSeq = d.Bool(); r.HasSeq {
		r.Seq = d.String()
	}
	r.Close = d.Bool()
	if d.Bool() {
		r.Producer = &StreamProducer{ID: d.String(), Epoch: d.Int64(), Seq: d.Int64()}
	}
	r.Body = d.Bytes32()
}

// StreamAppendResponse answers a StreamAppendRequest: the refusal, or
// what an accepted (or duplicate) append returns.
type StreamAppendResponse struct {
	Refusal   *StreamRefusal
	Tail      string
	Closed    bool
	Duplicate bool
	// ProducerSeq is the highest sequence accepted for the producer's
	// epoch.
	ProducerSeq int64
}

// Encode implements Message.
func (r *StreamAppendResponse) Encode(e *Encoder) {
	encodeRefusal(e, r.Refusal)
	e.String(r.Tail)
	e.Bool(r.Closed)
	e.Bool(r.Duplicate)
	e.Int64(r.ProducerSeq)
}

// Decode implements Message.
func (r *StreamAppendResponse) Decode(d *Decoder) {
	r.Refusal = decodeRefusal(d)
	r.Tail = d.String()
	r.Closed = d.Bool()
	r.Duplicate = d.Bool()
	r.ProducerSeq = d.Int64()
}

// StreamReadRequest is a read: from Offset ("-1", "now" or a token), up
// to about MaxBytes of data; with WaitMs, it waits that long for data
// when there is none at the acknowledged tail.
type StreamReadRequest struct {
	Topic    string
	TopicID  string
	Offset   string
	MaxBytes int32
	WaitMs   int32
}

// Encode implements Message.
func (r *StreamReadRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.String(r.Offset)
	e.Int32(r.MaxBytes)
	e.Int32(r.WaitMs)
}

// Decode implements Message.
func (r *StreamReadRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Offset = d.String()
	r.MaxBytes = d.Int32()
	r.WaitMs = d.Int32()
}

// StreamMessage is one append's data, and the token after it.
type StreamMessage struct {
	Data []byte
	Next string
}

// StreamReadResponse answers a StreamReadRequest: the refusal, or the
// messages read and where the read is.
type StreamReadResponse struct {
	Refusal  *StreamRefusal
	Status   StreamStatus
	Messages []StreamMessage
	// Start is the token read from (the offset resolved), Next the one
	// after the last message (Start when none).
	Start string
	Next  string
	// UpToDate: Next is the acknowledged tail. Closed: the stream is
	// closed and Next is its tail. TimedOut: a wait ended with nothing.
	UpToDate bool
	Closed   bool
	TimedOut bool
}

// Encode implements Message.
func (r *StreamReadResponse) Encode(e *Encoder) {
	encodeRefusal(e, r.Refusal)
	r.Status.encode(e)
	e.Count(len(r.Messages))
	for _, m := range r.Messages {
		e.Bytes32(m.Data)
		e.String(m.Next)
	}
	e.String(r.Start)
	e.String(r.Next)
	e.Bool(r.UpToDate)
	e.Bool(r.Closed)
	e.Bool(r.TimedOut)
}

// EncodedSize implements Sized.
func (r *StreamReadResponse) EncodedSize() int {
	n := refusalSize(r.Refusal) + r.Status.size() + 4 + 2 + len(r.Start) + 2 + len(r.Next) + 3
	for _, m := range r.Messages {
		n += 6 + len(m.Data) + len(m.Next)
	}
	return n
}

// Decode implements Message.
func (r *StreamReadResponse) Decode(d *Decoder) {
	r.Refusal = decodeRefusal(d)
	r.Status.decode(d)
	if n := d.Count(6); n > 0 {
		r.Messages = make([]StreamMessage, n)
		for i := range r.Messages {
			r.Messages[i] = StreamMessage{Data: d.Bytes32(), Next: d.String()}
		}
	}
	r.Start = d.String()
	r.Next = d.String()
	r.UpToDate = d.Bool()
	r.Closed = d.Bool()
	r.TimedOut = d.Bool()
}

// StreamHeadRequest asks the stream's leader about it: a HEAD.
type StreamHeadRequest struct {
	Topic   string
	TopicID string
}

// Encode implements Message.
func (r *StreamHeadRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
}

// Decode implements Message.
func (r *StreamHeadRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
}

// StreamHeadResponse answers a StreamHeadRequest and a StreamInitRequest:
// the refusal, or the stream's status with what a creator needs to finish
// a creation: whether it is complete (Ready), where the leader's log ends
// and the stream's byte position there.
type StreamHeadResponse struct {
	Refusal *StreamRefusal
	Status  StreamStatus
	Ready   bool
	LogEnd  int64
	Pos     int64
}

// Encode implements Message.
func (r *StreamHeadResponse) Encode(e *Encoder) {
	encodeRefusal(e, r.Refusal)
	r.Status.encode(e)
	e.Bool(r.Ready)
	e.Int64(r.LogEnd)
	e.Int64(r.Pos)
}

// Decode implements Message.
func (r *StreamHeadResponse) Decode(d *Decoder) {
	r.Refusal = decodeRefusal(d)
	r.Status.decode(d)
	r.Ready = d.Bool()
	r.LogEnd = d.Int64()
	r.Pos = d.Int64()
}

// StreamRecord is one record of a stream's log: its offset (in a
// StreamLogResponse), its kind (the key's byte) and its data.
type StreamRecord struct {
	Offset int64
	Kind   byte
	Data   []byte
}

const streamRecordMin = 8 + 1 + 4

func encodeRecords(e *Encoder, recs []StreamRecord) {
	e.Count(len(recs))
	for _, rec := range recs {
		e.Int64(rec.Offset)
		e.Int8(int8(rec.Kind))
		e.Bytes32(rec.Data)
	}
}

func decodeRecords(d *Decoder) []StreamRecord {
	n := d.Count(streamRecordMin)
	if n == 0 {
		return nil
	}
	recs := make([]StreamRecord, n)
	for i := range recs {
		recs[i] = StreamRecord{Offset: d.Int64(), Kind: byte(d.Int8()), Data: d.Bytes32()}
	}
	return recs
}

func recordsSize(recs []StreamRecord) int {
	n := 4
	for _, rec := range recs {
		n += streamRecordMin + len(rec.Data)
	}
	return n
}

// StreamInitRequest is one step of a creation: Records appended as one
// batch only where the leader's log ends at ExpectEnd, so that a creation
// run again skips what is done.
type StreamInitRequest struct {
	Topic     string
	TopicID   string
	ExpectEnd int64
	Records   []StreamRecord
}

// Encode implements Message.
func (r *StreamInitRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int64(r.ExpectEnd)
	encodeRecords(e, r.Records)
}

// EncodedSize implements Sized.
func (r *StreamInitRequest) EncodedSize() int {
	return 2 + len(r.Topic) + 2 + len(r.TopicID) + 8 + recordsSize(r.Records)
}

// Decode implements Message.
func (r *StreamInitRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.ExpectEnd = d.Int64()
	r.Records = decodeRecords(d)
}

// StreamLogRequest asks for the records of [From, To) of a stream's log
// below its high watermark, up to about MaxBytes.
type StreamLogRequest struct {
	Topic    string
	TopicID  string
	From     int64
	To       int64
	MaxBytes int32
}

// Encode implements Message.
func (r *StreamLogRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int64(r.From)
	e.Int64(r.To)
	e.Int32(r.MaxBytes)
}

// Decode implements Message.
func (r *StreamLogRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.From = d.Int64()
	r.To = d.Int64()
	r.MaxBytes = d.Int32()
}

// StreamLogResponse answers a StreamLogRequest: the refusal, or the
// records and the stream's byte position before the first.
type StreamLogResponse struct {
	Refusal *StreamRefusal
	Pos     int64
	Records []StreamRecord
}

// Encode implements Message.
func (r *StreamLogResponse) Encode(e *Encoder) {
	encodeRefusal(e, r.Refusal)
	e.Int64(r.Pos)
	encodeRecords(e, r.Records)
}

// EncodedSize implements Sized.
func (r *StreamLogResponse) EncodedSize() int {
	return refusalSize(r.Refusal) + 8 + recordsSize(r.Records)
}

// Decode implements Message.
func (r *StreamLogResponse) Decode(d *Decoder) {
	r.Refusal = decodeRefusal(d)
	r.Pos = d.Int64()
	r.Records = decodeRecords(d)
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
