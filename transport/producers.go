package transport

// Idempotent producers (docs/kafka.md, "Idempotent producers").
const (
	// APIInitProducerID gives a client a new producer id, at epoch 0, for
	// an idempotent producer (InitProducerIDRequest, answered with
	// InitProducerIDResponse). Any node answers, from a block of ids its
	// active controller allocated to it.
	APIInitProducerID API = 51
	// APIAllocateProducerIDs asks the active controller for a block of
	// producer ids no other node has had (AllocateProducerIDsRequest,
	// answered with AllocateProducerIDsResponse). Only nodes make it.
	APIAllocateProducerIDs API = 52
)

func init() {
	apiNames[APIInitProducerID] = "InitProducerID"
	apiNames[APIAllocateProducerIDs] = "AllocateProducerIDs"
}

// NoProducerID is the producer id of a batch produced without
// idempotence.
const NoProducerID = -1

// InitProducerIDRequest asks for a producer id. It has no fields today.
type InitProducerIDRequest struct{}

// Encode implements Message.
func (r *InitProducerIDRequest) Encode(*Encoder) {}

// Decode implements Message.
func (r *InitProducerIDRequest) Decode(*Decoder) {}

// InitProducerIDResponse is a producer id unique in the cluster and its
// first epoch.
type InitProducerIDResponse struct {
	ProducerID int64
	Epoch      int16
}

// Encode implements Message.
func (r *InitProducerIDResponse) Encode(e *Encoder) {
	e.Int64(r.ProducerID)
	e.Int16(r.Epoch)
}

// Decode implements Message.
func (r *InitProducerIDResponse) Decode(d *Decoder) {
	r.ProducerID = d.Int64()
	r.Epoch = d.Int16()
}

// MaxProducerIDBlock bounds the ids of one AllocateProducerIDsRequest.
const MaxProducerIDBlock = 1 << 20

// AllocateProducerIDsRequest asks for Count producer ids for Broker.
type AllocateProducerIDsRequest struct {
	Broker int32
	Count  int32
}

// Encode implements Message.
func (r *AllocateProducerIDsRequest) Encode(e *Encoder) {
	e.Int32(r.Broker)
	e.Int32(r.Count)
}

// Decode implements Message.
func (r *AllocateProducerIDsRequest) Decode(d *Decoder) {
	r.Broker = d.Int32()
	r.Count = d.Int32()
}

// AllocateProducerIDsResponse is the block [First, First+Count): the
// controller persisted that the next block starts past it before it
// answered.
type AllocateProducerIDsResponse struct {
	First int64
	Count int32
}

// Encode implements Message.
func (r *AllocateProducerIDsResponse) Encode(e *Encoder) {
	e.Int64(r.First)
	e.Int32(r.Count)
}

// Decode implements Message.
func (r *AllocateProducerIDsResponse) Decode(d *Decoder) {
	r.First = d.Int64()
	r.Count = d.Int32()
}
