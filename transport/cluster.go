package transport

// Cluster APIs: between brokers and the controller, and between replicas.
const (
	APIRegisterBroker  API = 20
	APIUpdateMetadata  API = 21
	APIFetchMetadata   API = 22
	APIReplicate       API = 23
	APIReplicaState    API = 24
	APIDescribeCluster API = 25
	APICatchUp         API = 26
)

func init() {
	apiNames[APIRegisterBroker] = "RegisterBroker"
	apiNames[APIUpdateMetadata] = "UpdateMetadata"
	apiNames[APIFetchMetadata] = "FetchMetadata"
	apiNames[APIReplicate] = "Replicate"
	apiNames[APIReplicaState] = "ReplicaState"
	apiNames[APIDescribeCluster] = "DescribeCluster"
	apiNames[APICatchUp] = "CatchUp"
}

// RegisterBrokerRequest announces a broker to the controller. ClusterID is
// the cluster named in the broker's storage stamp, empty for a new root;
// RootID is the root's unique id; MetadataEpoch is the epoch of the
// metadata the broker holds, -1 for none.
type RegisterBrokerRequest struct {
	ID            int32
	Addr          string
	HTTP          string
	Gossip        string
	ClusterID     string
	RootID        string
	MetadataEpoch int64
	// Kafka are the broker's Kafka listeners (metadata.Broker.Kafka),
	// sent only when it has some: a controller of the release before
	// them takes the registration of a broker without Kafka listeners.
	Kafka string
	// Listeners are the broker's named native listeners
	// (metadata.Broker.Listeners), sent, after Kafka, only when it has
	// some (or a rack follows).
	Listeners string
	// Rack is the broker's rack (metadata.Broker.Rack), sent, after
	// Listeners, only when it names one: a controller of the release
	// before racks takes the registration of a broker without one.
	Rack string
}

// Encode implements Message.
func (r *RegisterBrokerRequest) Encode(e *Encoder) {
	e.Int32(r.ID)
	e.String(r.Addr)
	e.String(r.HTTP)
	e.String(r.Gossip)
	e.String(r.ClusterID)
	e.String(r.RootID)
	e.Int64(r.MetadataEpoch)
	if r.Kafka != "" || r.Listeners != "" || r.Rack != "" {
		e.String(r.Kafka)
	}
	if r.Listeners != "" || r.Rack != "" {
		e.String(r.Listeners)
	}
	if r.Rack != "" {
		e.String(r.Rack)
	}
}

// Decode implements Message.
func (r *RegisterBrokerRequest) Decode(d *Decoder) {
	r.ID = d.Int32()
	r.Addr = d.String()
	r.HTTP = d.String()
	r.Gossip = d.String()
	r.ClusterID = d.String()
	r.RootID = d.String()
	r.MetadataEpoch = d.Int64()
	// The trailing fields are sent only when they say something (see
	// Encode): an empty one where nothing follows is not an encoding.
	if d.Remaining() > 0 {
		r.Kafka = d.String()
		if r.Kafka == "" && d.Remaining() == 0 {
			d.fail("an empty trailing Kafka field")
		}
	}
	if d.Remaining() > 0 {
		r.Listeners = d.String()
		if r.Listeners == "" && d.Remaining() == 0 {
			d.fail("an empty trailing Listeners field")
		}
	}
	if d.Remaining() > 0 {
		r.Rack = d.String()
		if r.Rack == "" {
			d.fail("an empty trailing Rack field")
		}
	}
}

// MetadataBlob carries the whole cluster metadata as the controller
// persisted it (JSON, package metadata's format). Empty means "nothing
// newer" in a FetchMetadata answer.
type MetadataBlob struct {
	Metadata []byte
}

// Encode implements Message.
func (r *MetadataBlob) Encode(e *Encoder) { e.Bytes32(r.Metadata) }

// Decode implements Message.
func (r *MetadataBlob) Decode(d *Decoder) { r.Metadata = d.Bytes32() }

// FetchMetadataRequest asks the controller for metadata newer than
// KnownEpoch, the epoch the asking broker holds. BrokerID and Addr say
// who asks, so that a controller whose own metadata is older than the
// broker's knows where to find a newer copy.
type FetchMetadataRequest struct {
	KnownEpoch int64
	BrokerID   int32
	Addr       string
}

// Encode implements Message.
func (r *FetchMetadataRequest) Encode(e *Encoder) {
	e.Int64(r.KnownEpoch)
	e.Int32(r.BrokerID)
	e.String(r.Addr)
}

// Decode implements Message.
func (r *FetchMetadataRequest) Decode(d *Decoder) {
	r.KnownEpoch = d.Int64()
	r.BrokerID = d.Int32()
	r.Addr = d.String()
}

// ReplicateRequest carries batches, back to back and exactly as the leader
// stored them, to a follower.
type ReplicateRequest struct {
	Topic         string
	TopicID       string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition     int32
	LeaderEpoch   int32
	LeaderID      int32
	HighWatermark int64
	Batch         []byte
	// Batches, when not empty, is sent in place of Batch: the slices back
	// to back, as one Batch field, written from where they lie (or copied
	// into the frame when small). A decoded request has Batch only.
	Batches [][]byte
}

// Encode implements Message.
func (r *ReplicateRequest) Encode(e *Encoder) {
	e.buf = r.encodeHead(e.buf)
	if len(r.Batches) == 0 {
		e.buf = append(e.buf, r.Batch...)
		return
	}
	for _, b := range r.Batches {
		e.buf = append(e.buf, b...)
	}
}

// encodeHead implements gatherer.
func (r *ReplicateRequest) encodeHead(dst []byte) []byte {
	e := NewEncoder(dst)
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.LeaderEpoch)
	e.Int32(r.LeaderID)
	e.Int64(r.HighWatermark)
	n := len(r.Batch)
	if len(r.Batches) > 0 {
		n = r.batchesLen()
	}
	e.Uint32(uint32(n))
	return e.Bytes()
}

// gather implements gatherer.
func (r *ReplicateRequest) gather() ([][]byte, int) {
	if len(r.Batches) == 0 {
		return [][]byte{r.Batch}, len(r.Batch)
	}
	return r.Batches, r.batchesLen()
}

func (r *ReplicateRequest) batchesLen() int {
	n := 0
	for _, b := range r.Batches {
		n += len(b)
	}
	return n
}

// EncodedSize implements Sized.
func (r *ReplicateRequest) EncodedSize() int {
	n := len(r.Batch)
	if len(r.Batches) > 0 {
		n = r.batchesLen()
	}
	return 2 + len(r.Topic) + 2 + len(r.TopicID) + 24 + n
}

// Decode implements Message.
func (r *ReplicateRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.LeaderID = d.Int32()
	r.HighWatermark = d.Int64()
	r.Batch = d.Bytes32()
}

// ReplicateResponse is the follower's log end once the batch is durable.
type ReplicateResponse struct {
	LogEndOffset int64
}

// Encode implements Message.
func (r *ReplicateResponse) Encode(e *Encoder) { e.Int64(r.LogEndOffset) }

// Decode implements Message.
func (r *ReplicateResponse) Decode(d *Decoder) { r.LogEndOffset = d.Int64() }

// ReplicaStateRequest asks a replica for its position. A LeaderEpoch above
// zero also fences the replica at that epoch; TailBatches asks for the
// identity of its last batches, for the prefix check of catch-up.
type ReplicaStateRequest struct {
	Topic       string
	TopicID     string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition   int32
	LeaderEpoch int32
	TailBatches int32
}

// Encode implements Message.
func (r *ReplicaStateRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.LeaderEpoch)
	e.Int32(r.TailBatches)
}

// Decode implements Message.
func (r *ReplicaStateRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.TailBatches = d.Int32()
}

// BatchID identifies a stored batch by content: its CRC covers its offsets,
// epoch and records.
type BatchID struct {
	BaseOffset  int64
	NextOffset  int64
	LeaderEpoch int32
	CRC         uint32
}

// ReplicaStateResponse is a replica's position.
type ReplicaStateResponse struct {
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	LastEpoch      int32 // epoch of the last batch, -1 when empty
	FencedEpoch    int32 // highest leader epoch the replica has seen
	Tail           []BatchID
	// Problem says why the replica cannot be trusted to lead (damaged,
	// behind an active follower, its storage failed); empty when healthy.
	Problem string
}

// Encode implements Message.
func (r *ReplicaStateResponse) Encode(e *Encoder) {
	e.Int64(r.LogStartOffset)
	e.Int64(r.LogEndOffset)
	e.Int64(r.HighWatermark)
	e.Int32(r.LastEpoch)
	e.Int32(r.FencedEpoch)
	e.Count(len(r.Tail))
	for _, b := range r.Tail {
		e.Int64(b.BaseOffset)
		e.Int64(b.NextOffset)
		e.Int32(b.LeaderEpoch)
		e.Uint32(b.CRC)
	}
	e.String(r.Problem)
}

// Decode implements Message.
func (r *ReplicaStateResponse) Decode(d *Decoder) {
	r.LogStartOffset = d.Int64()
	r.LogEndOffset = d.Int64()
	r.HighWatermark = d.Int64()
	r.LastEpoch = d.Int32()
	r.FencedEpoch = d.Int32()
	if n := d.Count(24); n > 0 {
		r.Tail = make([]BatchID, n)
		for i := range r.Tail {
			r.Tail[i] = BatchID{BaseOffset: d.Int64(), NextOffset: d.Int64(), LeaderEpoch: d.Int32(), CRC: d.Uint32()}
		}
	}
	r.Problem = d.String()
}

// Member is one memberlist member as a node sees it.
type Member struct {
	BrokerID int32
	Gossip   string
	State    string // alive, suspect, dead, left
	RootID   string // the member's storage root: two members with one broker id are two processes
}

// DescribeClusterResponse is a node's view of the cluster: the metadata it
// holds and the gossip state of every member it knows. RootID is the
// unique id of the node's storage root, so that a caller can tell the
// broker registered under NodeID from another process claiming its id.
// Controller, on the controller's node, says whether it accepts changes
// ("" when it does, else why not).
type DescribeClusterResponse struct {
	NodeID     int32
	Metadata   []byte
	Members    []Member
	RootID     string
	Controller string
}

// Encode implements Message.
func (r *DescribeClusterResponse) Encode(e *Encoder) {
	e.Int32(r.NodeID)
	e.Bytes32(r.Metadata)
	e.Count(len(r.Members))
	for _, m := range r.Members {
		e.Int32(m.BrokerID)
		e.String(m.Gossip)
		e.String(m.State)
		e.String(m.RootID)
	}
	e.String(r.RootID)
	e.String(r.Controller)
}

// Decode implements Message.
func (r *DescribeClusterResponse) Decode(d *Decoder) {
	r.NodeID = d.Int32()
	r.Metadata = d.Bytes32()
	if n := d.Count(10); n > 0 {
		r.Members = make([]Member, n)
		for i := range r.Members {
			r.Members[i] = Member{BrokerID: d.Int32(), Gossip: d.String(), State: d.String(), RootID: d.String()}
		}
	}
	r.RootID = d.String()
	r.Controller = d.String()
}

// CatchUpRequest asks a partition's leader to bring one active follower up
// to date now.
type CatchUpRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
	Broker    int32
	// Throttle, for the recovery of a replica being added by a move, is
	// the bytes per second the leader's node sends to copy replicas, all
	// its moves together (docs/reassignment.md); 0 for any other
	// recovery, which is not paced. Sent only when set.
	Throttle int64
}

// Encode implements Message.
func (r *CatchUpRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.Broker)
	if r.Throttle > 0 {
		e.Int64(r.Throttle)
	}
}

// Decode implements Message.
func (r *CatchUpRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.Broker = d.Int32()
	if d.Remaining() > 0 {
		// Sent only when set, so a throttle that is there is positive.
		if r.Throttle = d.Int64(); r.Throttle <= 0 {
			d.fail("throttle %d: want a positive number of bytes per second", r.Throttle)
		}
	}
}

// CatchUpResponse says what catch-up copied: the follower's log end before
// and after.
type CatchUpResponse struct {
	FromOffset int64
	ToOffset   int64
}

// Encode implements Message.
func (r *CatchUpResponse) Encode(e *Encoder) {
	e.Int64(r.FromOffset)
	e.Int64(r.ToOffset)
}

// Decode implements Message.
func (r *CatchUpResponse) Decode(d *Decoder) {
	r.FromOffset = d.Int64()
	r.ToOffset = d.Int64()
}
