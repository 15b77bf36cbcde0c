package transport

// APIOffsetDelete deletes committed offsets of a group (gostream-ctl group
// delete-offsets); the group's coordinator answers it.
const APIOffsetDelete API = 53

func init() { apiNames[APIOffsetDelete] = "OffsetDelete" }

// OffsetDeleteRequest deletes a group's committed offsets of Topic: of
// Partitions, or of every partition the group has committed when none is
// named. It is refused, deleting nothing, while a member of the group
// subscribes to Topic (ErrGroupSubscribed), while the group has Kafka
// members of a protocol type other than "consumer" (ErrGroupNotEmpty),
// and for a group that holds nothing (ErrUnknownGroup). A group left with
// nothing is deleted. Requester names who asked, for the record.
type OffsetDeleteRequest struct {
	Group      string
	Topic      string
	Partitions []int32
	Requester  string
}

// Encode implements Message.
func (r *OffsetDeleteRequest) Encode(e *Encoder) {
	e.String(r.Group)
	e.String(r.Topic)
	e.Int32s(r.Partitions)
	e.String(r.Requester)
}

// Decode implements Message.
func (r *OffsetDeleteRequest) Decode(d *Decoder) {
	r.Group = d.String()
	r.Topic = d.String()
	r.Partitions = d.Int32s()
	r.Requester = d.String()
}

// OffsetDeleteResponse holds the offsets deleted, sorted by partition:
// none when the group had none of the partitions committed.
type OffsetDeleteResponse struct {
	Deleted []CommittedOffset
}

// Encode implements Message.
func (r *OffsetDeleteResponse) Encode(e *Encoder) {
	e.Count(len(r.Deleted))
	for i := range r.Deleted {
		encodeCommitted(e, &r.Deleted[i])
	}
}

// Decode implements Message.
func (r *OffsetDeleteResponse) Decode(d *Decoder) { r.Deleted = decodeCommitted(d) }
