package transport

// MetadataRequest asks for the cluster's brokers and the named topics, or
// every topic when Topics is empty.
type MetadataRequest struct {
	Topics []string
}

// Encode implements Message.
func (r *MetadataRequest) Encode(e *Encoder) { e.Strings(r.Topics) }

// Decode implements Message.
func (r *MetadataRequest) Decode(d *Decoder) { r.Topics = d.Strings() }

// BrokerInfo is one broker as registered with the controller.
type BrokerInfo struct {
	ID     int32
	Addr   string // RPC address, as advertised
	HTTP   string
	Gossip string
}

func (b *BrokerInfo) encode(e *Encoder) {
	e.Int32(b.ID)
	e.String(b.Addr)
	e.String(b.HTTP)
	e.String(b.Gossip)
}

func (b *BrokerInfo) decode(d *Decoder) {
	b.ID = d.Int32()
	b.Addr = d.String()
	b.HTTP = d.String()
	b.Gossip = d.String()
}

// PartitionInfo is one partition's replica assignment and leadership.
type PartitionInfo struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32 // assigned, leader first at creation
	Active      []int32 // the replicas a write must reach
}

func (p *PartitionInfo) encode(e *Encoder) {
	e.Int32(p.Partition)
	e.Int32(p.Leader)
	e.Int32(p.LeaderEpoch)
	e.Int32s(p.Replicas)
	e.Int32s(p.Active)
}

func (p *PartitionInfo) decode(d *Decoder) {
	p.Partition = d.Int32()
	p.Leader = d.Int32()
	p.LeaderEpoch = d.Int32()
	p.Replicas = d.Int32s()
	p.Active = d.Int32s()
}

// TopicConfigValue is one configuration key of a topic as the answering
// node applies it: the topic's own value, or (Default) the node's default
// for a key the topic does not set.
type TopicConfigValue struct {
	Key     string
	Value   int64
	Default bool
}

// TopicInfo is one topic's metadata.
type TopicInfo struct {
	Name string
	// ID is the topic's id (metadata.Topic.ID): requests for its
	// partitions carry it, so they never reach a later topic of the name.
	ID                string
	ReplicationFactor int16
	Sealed            bool
	Partitions        []PartitionInfo
	// Config is every configuration key, sorted, with the value the
	// answering node applies.
	Config []TopicConfigValue
	// Stream is set on the topic of a Durable Streams stream.
	Stream *StreamInfo
}

// StreamInfo is what a topic list shows of a Durable Streams stream.
type StreamInfo struct {
	Path        string
	ContentType string
	// ForkedFrom is the path of the stream it was forked from, if any.
	ForkedFrom string
	// Deleted marks a stream deleted while forks of it remain.
	Deleted bool
}

// Encode implements Message.
func (t *TopicInfo) Encode(e *Encoder) {
	e.String(t.Name)
	e.String(t.ID)
	e.Int16(t.ReplicationFactor)
	e.Bool(t.Sealed)
	e.Count(len(t.Partitions))
	for i := range t.Partitions {
		t.Partitions[i].encode(e)
	}
	e.Count(len(t.Config))
	for _, c := range t.Config {
		e.String(c.Key)
		e.Int64(c.Value)
		e.Bool(c.Default)
	}
	e.Bool(t.Stream != nil)
	if t.Stream != nil {
		e.String(t.Stream.Path)
		e.String(t.Stream.ContentType)
		e.String(t.Stream.ForkedFrom)
		e.Bool(t.Stream.Deleted)
	}
}

// Decode implements Message.
func (t *TopicInfo) Decode(d *Decoder) {
	t.Name = d.String()
	t.ID = d.String()
	t.ReplicationFactor = d.Int16()
	t.Sealed = d.Bool()
	// A partition is at least 20 bytes: three int32s and two empty lists.
	if n := d.Count(20); n > 0 {
		t.Partitions = make([]PartitionInfo, n)
		for i := range t.Partitions {
			t.Partitions[i].decode(d)
		}
	}
	// A config value is at least 11 bytes: an empty key (2), the value
	// (8) and the default flag (1).
	if n := d.Count(11); n > 0 {
		t.Config = make([]TopicConfigValue, n)
		for i := range t.Config {
			t.Config[i].Key = d.String()
			t.Config[i].Value = d.Int64()
			t.Config[i].Default = d.Bool()
		}
	}
	if d.Bool() {
		t.Stream = &StreamInfo{Path: d.String(), ContentType: d.String(), ForkedFrom: d.String(), Deleted: d.Bool()}
	}
}

// MetadataResponse is the cluster as the answering node knows it.
type MetadataResponse struct {
	ClusterID     string
	ControllerID  int32
	MetadataEpoch int64
	Brokers       []BrokerInfo
	Topics        []TopicInfo
	// MaxBatchBytes is the answering node's batch limit (its
	// --max-batch-bytes): a produced batch larger than this is refused
	// with ErrMessageTooLarge, so a client checks before sending.
	MaxBatchBytes int32
}

// Encode implements Message.
func (r *MetadataResponse) Encode(e *Encoder) {
	e.String(r.ClusterID)
	e.Int32(r.ControllerID)
	e.Int64(r.MetadataEpoch)
	e.Count(len(r.Brokers))
	for i := range r.Brokers {
		r.Brokers[i].encode(e)
	}
	e.Count(len(r.Topics))
	for i := range r.Topics {
		r.Topics[i].Encode(e)
	}
	e.Int32(r.MaxBatchBytes)
}

// Decode implements Message.
func (r *MetadataResponse) Decode(d *Decoder) {
	r.ClusterID = d.String()
	r.ControllerID = d.Int32()
	r.MetadataEpoch = d.Int64()
	// A broker is at least 10 bytes: its id (4) and three empty strings (6).
	if n := d.Count(10); n > 0 {
		r.Brokers = make([]BrokerInfo, n)
		for i := range r.Brokers {
			r.Brokers[i].decode(d)
		}
	}
	// A topic is at least 15 bytes: an empty name and id (2 each), the
	// replication factor (2), sealed (1) and empty partition and config
	// lists (4 each).
	if n := d.Count(15); n > 0 {
		r.Topics = make([]TopicInfo, n)
		for i := range r.Topics {
			r.Topics[i].Decode(d)
		}
	}
	r.MaxBatchBytes = d.Int32()
}
