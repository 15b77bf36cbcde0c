package transport

// FetchRequest reads whole batches from a partition starting with the one
// that holds Offset, up to about MaxBytes, and only below the high
// watermark. With MaxWaitMs > 0 it long-polls: the answer comes as soon as
// there is data, or empty when the wait is over.
type FetchRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
	Offset    int64
	MaxBytes  int32
	MaxWaitMs int32
}

// Encode implements Message.
func (r *FetchRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int64(r.Offset)
	e.Int32(r.MaxBytes)
	e.Int32(r.MaxWaitMs)
}

// Decode implements Message.
func (r *FetchRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.Offset = d.Int64()
	r.MaxBytes = d.Int32()
	r.MaxWaitMs = d.Int32()
}

// FetchResponse carries zero or more whole batches. The first batch may
// start before the requested offset; readers skip those records.
type FetchResponse struct {
	HighWatermark  int64
	LogStartOffset int64
	Batches        []byte
	// File, if set, holds the batches in place of Batches (which is then
	// empty): a range of a segment's file, which a Server writes from the
	// file (SendFile) on a connection that can (Request.SendFile),
	// and reads into memory for one that cannot. It is sent as Batches
	// would be; only a Server writes a response that has one (Encode does
	// not read files).
	File *FileRange
	// Done, if set, is called by the server once it no longer needs
	// Batches or File (the response is copied into its frame, or
	// written), so the handler may reuse the buffer Batches points into,
	// or give the file range back. It is not sent.
	Done func()
}

// Release implements the server's hook for encoded responses.
func (r *FetchResponse) Release() {
	if r.Done != nil {
		r.Done()
	}
}

// EncodedSize is the size of the encoding, so a server can size its buffer.
func (r *FetchResponse) EncodedSize() int { return 20 + r.batchesLen() }

func (r *FetchResponse) batchesLen() int {
	if r.File != nil {
		return int(r.File.Length)
	}
	return len(r.Batches)
}

// Encode implements Message. A response with a File is written by a
// Server alone, which sends or reads the file; encoding one is a bug.
func (r *FetchResponse) Encode(e *Encoder) {
	if r.File != nil {
		panic("transport: FetchResponse with a File encoded; only a Server writes one")
	}
	e.buf = append(r.encodeHead(e.buf), r.Batches...)
}

// encodeHead implements splicer: the batches are the tail.
func (r *FetchResponse) encodeHead(dst []byte) []byte {
	e := NewEncoder(dst)
	e.Int64(r.HighWatermark)
	e.Int64(r.LogStartOffset)
	e.Uint32(uint32(r.batchesLen()))
	return e.Bytes()
}

func (r *FetchResponse) tail() []byte { return r.Batches }

func (r *FetchResponse) fileTail() *FileRange { return r.File }

// readFile implements splicer: the file range becomes Batches.
func (r *FetchResponse) readFile() error {
	b, err := r.File.read()
	if err != nil {
		return err
	}
	r.Batches, r.File = b, nil
	return nil
}

// Decode implements Message.
func (r *FetchResponse) Decode(d *Decoder) {
	r.HighWatermark = d.Int64()
	r.LogStartOffset = d.Int64()
	r.Batches = d.Bytes32()
}

// ListOffsetsRequest asks for a partition's offsets.
type ListOffsetsRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
}

// Encode implements Message.
func (r *ListOffsetsRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
}

// Decode implements Message.
func (r *ListOffsetsRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
}

// ListOffsetsResponse gives the earliest offset, the high watermark (the
// latest offset a consumer can read up to) and the leader's log end.
type ListOffsetsResponse struct {
	LogStartOffset int64
	HighWatermark  int64
	LogEndOffset   int64
}

// Encode implements Message.
func (r *ListOffsetsResponse) Encode(e *Encoder) {
	e.Int64(r.LogStartOffset)
	e.Int64(r.HighWatermark)
	e.Int64(r.LogEndOffset)
}

// Decode implements Message.
func (r *ListOffsetsResponse) Decode(d *Decoder) {
	r.LogStartOffset = d.Int64()
	r.HighWatermark = d.Int64()
	r.LogEndOffset = d.Int64()
}
