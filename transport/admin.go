package transport

// CreateTopicRequest creates a topic with a fixed number of partitions.
type CreateTopicRequest struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
}

// Encode implements Message.
func (r *CreateTopicRequest) Encode(e *Encoder) {
	e.String(r.Name)
	e.Int32(r.Partitions)
	e.Int16(r.ReplicationFactor)
}

// Decode implements Message.
func (r *CreateTopicRequest) Decode(d *Decoder) {
	r.Name = d.String()
	r.Partitions = d.Int32()
	r.ReplicationFactor = d.Int16()
}

// TopicRequest names one topic, for DeleteTopic and SealTopic.
type TopicRequest struct {
	Name string
}

// Encode implements Message.
func (r *TopicRequest) Encode(e *Encoder) { e.String(r.Name) }

// Decode implements Message.
func (r *TopicRequest) Decode(d *Decoder) { r.Name = d.String() }
