package transport

import "time"

// Operator APIs: failover and recovery (ctl → controller), and the replica
// calls they are made of (controller or leader → replica).
const (
	APIFailover        API = 27
	APIRecover         API = 28
	APIReplicaDigest   API = 29
	APIReplicaBatches  API = 30
	APITruncateReplica API = 31
	APIHistory         API = 32
	APIRecoverReplica  API = 33
	APIResetReplica    API = 34
	APIAudit           API = 35
	APIElectLeaders    API = 36
	APIReplaceBroker   API = 37
	APIRestoreMetadata API = 38
)

func init() {
	apiNames[APIFailover] = "Failover"
	apiNames[APIRecover] = "Recover"
	apiNames[APIReplicaDigest] = "ReplicaDigest"
	apiNames[APIReplicaBatches] = "ReplicaBatches"
	apiNames[APITruncateReplica] = "TruncateReplica"
	apiNames[APIHistory] = "History"
	apiNames[APIRecoverReplica] = "RecoverReplica"
	apiNames[APIResetReplica] = "ResetReplica"
	apiNames[APIAudit] = "Audit"
	apiNames[APIElectLeaders] = "ElectLeaders"
	apiNames[APIReplaceBroker] = "ReplaceBroker"
	apiNames[APIRestoreMetadata] = "RestoreMetadata"
}

// JSONMessage carries a JSON document: the operator APIs exchange reports
// whose shape is the CLI's JSON output, so they travel as JSON.
type JSONMessage struct {
	Data []byte
}

// Encode implements Message.
func (r *JSONMessage) Encode(e *Encoder) { e.Bytes32(r.Data) }

// Decode implements Message.
func (r *JSONMessage) Decode(d *Decoder) { r.Data = d.Bytes32() }

// ReplicaDigestRequest asks a replica for the digest of the identities of
// its batches that start in [From, To). With Verify, the replica first
// reads every batch of the range whole and checks it (checksum, framing,
// offsets), so that damage the identities do not show is found: a replica
// found damaged answers StorageFailed and says so from then on.
type ReplicaDigestRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
	From, To  int64
	Verify    bool
}

// Encode implements Message.
func (r *ReplicaDigestRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int64(r.From)
	e.Int64(r.To)
	e.Bool(r.Verify)
}

// Decode implements Message.
func (r *ReplicaDigestRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.From = d.Int64()
	r.To = d.Int64()
	r.Verify = d.Bool()
}

// ReplicaDigestResponse is a SHA-256 over (base, next, epoch, CRC) of each
// batch in the range, and how many batches it covers.
type ReplicaDigestResponse struct {
	Digest  []byte
	Batches int32
}

// Encode implements Message.
func (r *ReplicaDigestResponse) Encode(e *Encoder) {
	e.Bytes32(r.Digest)
	e.Int32(r.Batches)
}

// Decode implements Message.
func (r *ReplicaDigestResponse) Decode(d *Decoder) {
	r.Digest = d.Bytes32()
	r.Batches = d.Int32()
}

// ReplicaBatchesRequest asks for the identities of up to Max batches that
// end at or before Before, for walking a log backward.
type ReplicaBatchesRequest struct {
	Topic     string
	TopicID   string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition int32
	Before    int64
	Max       int32
}

// Encode implements Message.
func (r *ReplicaBatchesRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int64(r.Before)
	e.Int32(r.Max)
}

// Decode implements Message.
func (r *ReplicaBatchesRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.Before = d.Int64()
	r.Max = d.Int32()
}

// ReplicaBatchesResponse lists batch identities, oldest first.
type ReplicaBatchesResponse struct {
	Batches []BatchID
}

// Encode implements Message.
func (r *ReplicaBatchesResponse) Encode(e *Encoder) {
	e.Count(len(r.Batches))
	for _, b := range r.Batches {
		e.Int64(b.BaseOffset)
		e.Int64(b.NextOffset)
		e.Int32(b.LeaderEpoch)
		e.Uint32(b.CRC)
	}
}

// Decode implements Message.
func (r *ReplicaBatchesResponse) Decode(d *Decoder) {
	if n := d.Count(24); n > 0 {
		r.Batches = make([]BatchID, n)
		for i := range r.Batches {
			r.Batches[i] = BatchID{BaseOffset: d.Int64(), NextOffset: d.Int64(), LeaderEpoch: d.Int32(), CRC: d.Uint32()}
		}
	}
}

// TruncateReplicaRequest tells a follower, from the leader of LeaderEpoch,
// to cut its log back to Offset (its cut is kept in quarantine/). A
// replica never truncates while it leads.
type TruncateReplicaRequest struct {
	Topic       string
	TopicID     string // metadata.Topic.ID; a request for another incarnation is refused (empty: not checked)
	Partition   int32
	LeaderEpoch int32
	Offset      int64
}

// Encode implements Message.
func (r *TruncateReplicaRequest) Encode(e *Encoder) {
	e.String(r.Topic)
	e.String(r.TopicID)
	e.Int32(r.Partition)
	e.Int32(r.LeaderEpoch)
	e.Int64(r.Offset)
}

// Decode implements Message.
func (r *TruncateReplicaRequest) Decode(d *Decoder) {
	r.Topic = d.String()
	r.TopicID = d.String()
	r.Partition = d.Int32()
	r.LeaderEpoch = d.Int32()
	r.Offset = d.Int64()
}

// RecoveredReplicaHold is how long a leader counts a replica it has just
// recovered in every acknowledgement before the controller's metadata
// lists it active (replication.Partition.RecoverFollower): so that no
// record is acknowledged that the replica lacks once it is active. A
// controller commits the recovery well within it (half of it at most), or
// not at all.
const RecoveredReplicaHold = time.Minute

// RecoverReplicaResponse says what a leader did to bring a replica back:
// where it cut the replica's log (its end before, and the common prefix
// with the leader) and the leader's end it copied up to and verified.
type RecoverReplicaResponse struct {
	PreviousEnd  int64
	CommonPrefix int64
	CopiedTo     int64
}

// Encode implements Message.
func (r *RecoverReplicaResponse) Encode(e *Encoder) {
	e.Int64(r.PreviousEnd)
	e.Int64(r.CommonPrefix)
	e.Int64(r.CopiedTo)
}

// Decode implements Message.
func (r *RecoverReplicaResponse) Decode(d *Decoder) {
	r.PreviousEnd = d.Int64()
	r.CommonPrefix = d.Int64()
	r.CopiedTo = d.Int64()
}
