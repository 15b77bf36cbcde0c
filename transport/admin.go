package transport

// ConfigEntry is one topic configuration key and its value (the keys are
// Kafka's: retention.bytes, retention.ms, segment.bytes, segment.ms).
type ConfigEntry struct {
	Key   string
	Value int64
}

func encodeConfigEntries(e *Encoder, entries []ConfigEntry) {
	e.Count(len(entries))
	for _, c := range entries {
		e.String(c.Key)
		e.Int64(c.Value)
	}
}

func decodeConfigEntries(d *Decoder) []ConfigEntry {
	// An entry is at least 10 bytes: an empty key (2) and its value (8).
	n := d.Count(10)
	if n == 0 {
		return nil
	}
	entries := make([]ConfigEntry, n)
	for i := range entries {
		entries[i].Key = d.String()
		entries[i].Value = d.Int64()
	}
	return entries
}

// CreateTopicRequest creates a topic with a fixed number of partitions and
// the configuration keys it sets for itself (the others take each node's
// default).
type CreateTopicRequest struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Config            []ConfigEntry
}

// Encode implements Message.
func (r *CreateTopicRequest) Encode(e *Encoder) {
	e.String(r.Name)
	e.Int32(r.Partitions)
	e.Int16(r.ReplicationFactor)
	encodeConfigEntries(e, r.Config)
}

// Decode implements Message.
func (r *CreateTopicRequest) Decode(d *Decoder) {
	r.Name = d.String()
	r.Partitions = d.Int32()
	r.ReplicationFactor = d.Int16()
	r.Config = decodeConfigEntries(d)
}

// AlterTopicConfigRequest changes a topic's configuration: it sets the
// keys of Set and removes those of Delete (which then take each node's
// default again), as one change.
type AlterTopicConfigRequest struct {
	Name   string
	Set    []ConfigEntry
	Delete []string
}

// Encode implements Message.
func (r *AlterTopicConfigRequest) Encode(e *Encoder) {
	e.String(r.Name)
	encodeConfigEntries(e, r.Set)
	e.Strings(r.Delete)
}

// Decode implements Message.
func (r *AlterTopicConfigRequest) Decode(d *Decoder) {
	r.Name = d.String()
	r.Set = decodeConfigEntries(d)
	r.Delete = d.Strings()
}

// TopicRequest names one topic, for DeleteTopic and SealTopic.
type TopicRequest struct {
	Name string
}

// Encode implements Message.
func (r *TopicRequest) Encode(e *Encoder) { e.String(r.Name) }

// Decode implements Message.
func (r *TopicRequest) Decode(d *Decoder) { r.Name = d.String() }
