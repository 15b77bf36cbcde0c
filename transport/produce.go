package transport

// ProduceRequest appends one batch to a partition through its leader. The
// batch is in the format of package record, with base offset, epoch and
// time left for the leader to stamp.
type ProduceRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
	TimeoutMs int32 // how long the leader may wait for replication
	Batch     []byte
}

// Encode implements Message.
func (r *ProduceRequest) Encode(e *Encoder) {
	e.buf = append(r.encodeHead(e.buf), r.Batch...)
}

// encodeHead implements gatherer.
func (r *ProduceRequest) encodeHead(dst []byte) []byte {
	e := NewEncoder(dst)
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.TimeoutMs)
	e.Uint32(uint32(len(r.Batch)))
	return e.Bytes()
}

// gather implements gatherer.
func (r *ProduceRequest) gather() ([][]byte, int) { return [][]byte{r.Batch}, len(r.Batch) }

// EncodedSize implements Sized.
func (r *ProduceRequest) EncodedSize() int {
	return 2 + len(r.Topic) + 2 + len(r.TopicID) + 12 + len(r.Batch)
}

// Decode implements Message.
func (r *ProduceRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.TimeoutMs = d.Int32()
	r.Batch = d.Bytes32()
}

// ProduceResponse acknowledges a batch: it is durable on every replica
// listed in Replicas.
type ProduceResponse struct {
	Partition   int32
	BaseOffset  int64
	NextOffset  int64 // offset after the batch's last record
	LeaderID    int32
	LeaderEpoch int32
	AppendTime  int64 // Unix milliseconds, the leader's clock
	Replicas    []int32
}

// Encode implements Message.
func (r *ProduceResponse) Encode(e *Encoder) {
	e.Int32(r.Partition)
	e.Int64(r.BaseOffset)
	e.Int64(r.NextOffset)
	e.Int32(r.LeaderID)
	e.Int32(r.LeaderEpoch)
	e.Int64(r.AppendTime)
	e.Int32s(r.Replicas)
}

// Decode implements Message.
func (r *ProduceResponse) Decode(d *Decoder) {
	r.Partition = d.Int32()
	r.BaseOffset = d.Int64()
	r.NextOffset = d.Int64()
	r.LeaderID = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.AppendTime = d.Int64()
	r.Replicas = d.Int32s()
}
