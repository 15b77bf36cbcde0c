package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gostream/transport"
)

// Operator changes: failover, recovery and the controller's audit trail
// (docs/design.md section 7), and the replica digest that verification compares.
// The controller's requests and answers travel as JSON documents whose shape
// is the CLI's JSON output; the types below mirror them.

// FailoverRequest names what a failover acts on: one partition (Topic and
// Partition), or every partition a broker leads or follows (Broker).
type FailoverRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Broker, when set, is the lost broker: the partitions it leads fail
	// over to another replica and it is dropped from the active set of the
	// partitions it follows.
	Broker int32 `json:"broker,omitempty"`
	// BrokerOfPartition, with Topic and Partition, names one replica of
	// the partition to take out of its active set: failed over when it
	// leads, dropped when it follows (refused while it answers with a
	// healthy replica).
	BrokerOfPartition int32 `json:"broker_of_partition,omitempty"`
	// DryRun asks what would happen and changes nothing.
	DryRun bool `json:"dry_run"`
	// Requester names who asked, for the audit trail; the controller uses
	// the connection's address when it is empty.
	Requester string `json:"requester,omitempty"`
}

// RecoverRequest names the returning replica: Broker's replica of one
// partition (Topic and Partition), or, with Topic empty, every replica of
// Broker that is outside its partition's active set.
type RecoverRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Broker    int32  `json:"broker"`
	Requester string `json:"requester,omitempty"`
}

// Candidate is one replica a failover considered for leader.
type Candidate struct {
	Broker       int32  `json:"broker"`
	Reachable    bool   `json:"reachable"`
	LastEpoch    int32  `json:"last_epoch"`     // leader epoch of its last batch, -1 when unknown
	LogEndOffset int64  `json:"log_end_offset"` // -1 when unknown
	Agrees       bool   `json:"agrees"`         // holds what the chosen one holds on every shared offset
	Chosen       bool   `json:"chosen"`
	Note         string `json:"note,omitempty"`
}

// Actions of a ChangeResult.
const (
	ActionFailover     = "failover"
	ActionDropFollower = "drop-follower"
	ActionRecover      = "recover"
	ActionElectLeader  = "elect-leader"
	// ActionReplaceBroker is the last result of a broker replace: the
	// broker's storage root unbound (Topic empty, Partition -1).
	ActionReplaceBroker = "replace-broker"
)

// ChangeResult is what a failover or recovery did to one partition (or,
// for a dry run, would do). A result whose Error is set changed nothing.
type ChangeResult struct {
	Topic      string      `json:"topic"`
	Partition  int32       `json:"partition"`
	Action     string      `json:"action"` // failover, drop-follower or recover
	DryRun     bool        `json:"dry_run,omitempty"`
	OldLeader  int32       `json:"old_leader"`
	NewLeader  int32       `json:"new_leader"`
	OldEpoch   int32       `json:"old_epoch"`
	NewEpoch   int32       `json:"new_epoch"`
	OldActive  []int32     `json:"old_active"`
	NewActive  []int32     `json:"new_active"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// LostFrom, for a failover, is the offset at and past which records
	// held only by the old leader are lost: the new leader's log end.
	LostFrom *int64 `json:"lost_from_offset,omitempty"`
	// Truncated, for a recovery, is where the replica's log was cut: from
	// its end Truncated[0] back to the common prefix Truncated[1]. Nil when
	// nothing was cut.
	Truncated *[2]int64 `json:"truncated,omitempty"`
	// CopiedTo, for a recovery, is the leader's log end the replica was
	// copied up to and verified against.
	CopiedTo int64 `json:"copied_to,omitempty"`
	// Note says why a leader or follower that still answers was replaced
	// or dropped: its replica cannot serve (damaged, failed, behind).
	Note string `json:"note,omitempty"`
	// Error and ErrorName say why this partition failed, when it did, in a
	// change of several partitions. ErrorName is the wire code's name
	// (LeaderStillAvailable, ReplicaDivergence, ...).
	Error     string `json:"error,omitempty"`
	ErrorName string `json:"error_name,omitempty"`
}

// ChangeReport is the answer to a Failover or Recover request: one result
// per partition.
type ChangeReport struct {
	Results []ChangeResult `json:"results"`
}

// HistoryEvent is one entry of the controller's audit trail: a change that
// was made, when, and at whose request.
type HistoryEvent struct {
	Time      time.Time `json:"time"`
	Requester string    `json:"requester,omitempty"`
	ChangeResult
}

// ReplicaDigest is a digest of the batches of one replica that start in a
// range of offsets: SHA-256 over each batch's base offset, next offset,
// leader epoch and CRC. Two replicas hold the same batches in the range if
// and only if (barring a hash collision) their digests are equal.
type ReplicaDigest struct {
	Digest  []byte
	Batches int32 // batches the digest covers
}

// Failover asks the controller to replace the failed leader of a partition,
// or, with req.Broker, to do so for every partition that broker leads and
// to drop it from the active set of every partition it follows.
//
// For one partition, the controller's refusal comes back as the error, with
// its code: transport.ErrLeaderStillAvailable (the leader answers),
// transport.ErrNoEligibleReplica (no follower answers),
// transport.ErrReplicaDivergence (the candidates disagree; nothing was
// promoted), transport.ErrUnknownTopic or transport.ErrUnknownPartition.
// For a broker, each partition's failure is in its result (Error,
// ErrorName) and the error is nil, unless the broker had one partition only.
//
// The request is sent to the controller and sent again only when it
// provably did nothing: the connection could not be opened, or the broker
// answered NotController. It is bounded by ctx, not by
// Config.RequestTimeout: a failover of many partitions takes as long as it
// takes.
func (c *Client) Failover(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	what := fmt.Sprintf("%s/%d", req.Topic, req.Partition)
	if req.Topic == "" {
		what = fmt.Sprintf("broker %d", req.Broker)
	}
	var rep ChangeReport
	if err := c.operatorCall(ctx, transport.APIFailover, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("failover of %s: %w", what, err)
	}
	return rep, nil
}

// Recover asks the controller to bring a returning replica back as a
// follower: its leader cuts the replica back to their longest common prefix
// (the cut is kept in the replica's quarantine/), copies what it misses,
// verifies it identical, and only then is it added to the active set.
// With req.Topic empty, every replica of req.Broker outside its partition's
// active set is recovered; an empty report means there was none.
//
// For one partition the controller's refusal comes back as the error
// (transport.ErrInvalidRequest for a replica that is the leader or already
// active, transport.ErrReplicaDivergence, transport.ErrBrokerNotAvailable
// when the leader or the replica cannot be reached, ...); for several, in
// each result. It is sent and bounded as Failover is.
func (c *Client) Recover(ctx context.Context, req RecoverRequest) (ChangeReport, error) {
	if req.Broker <= 0 {
		return ChangeReport{}, fmt.Errorf("%w: recover names the returning broker", transport.ErrInvalidRequest)
	}
	what := fmt.Sprintf("broker %d", req.Broker)
	if req.Topic != "" {
		what = fmt.Sprintf("broker %d's replica of %s/%d", req.Broker, req.Topic, req.Partition)
	}
	var rep ChangeReport
	if err := c.operatorCall(ctx, transport.APIRecover, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("recover %s: %w", what, err)
	}
	return rep, nil
}

// ReplaceBroker tells the controller that broker's disk is lost for good
// and a new storage root will take its id: every partition it leads fails
// over, it is dropped from every active set, and then the id is free for
// the next node that registers with it, whatever its root. The new node's
// replicas are rebuilt with Recover, from their leaders; an empty replica
// never leads. The controller refuses (transport.ErrBrokerAlive) while the
// broker answers as itself, and (transport.ErrNoEligibleReplica) when a
// partition it leads has no other active replica. With dryRun it says
// what it would do. The last result (ActionReplaceBroker) is the
// unbinding; it is sent and bounded as Failover is.
func (c *Client) ReplaceBroker(ctx context.Context, broker int32, dryRun bool, requester string) (ChangeReport, error) {
	var rep ChangeReport
	req := FailoverRequest{Broker: broker, DryRun: dryRun, Requester: requester}
	if err := c.operatorCall(ctx, transport.APIReplaceBroker, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("replace broker %d: %w", broker, err)
	}
	return rep, nil
}

// RestoreRequest asks the controller to adopt a broker's copy of the
// cluster's metadata: the newest one any broker holds, or FromBroker's.
type RestoreRequest struct {
	FromBroker int32  `json:"from_broker,omitempty"`
	DryRun     bool   `json:"dry_run"`
	Requester  string `json:"requester,omitempty"`
}

// RestoreSource is one broker's copy of the metadata, as a restore found
// it.
type RestoreSource struct {
	Broker    int32  `json:"broker"`
	Address   string `json:"address"`
	Answered  bool   `json:"answered"`
	ClusterID string `json:"cluster_id,omitempty"`
	Epoch     int64  `json:"epoch"` // -1 when unknown
	Topics    int    `json:"topics"`
	Chosen    bool   `json:"chosen"`
	Note      string `json:"note,omitempty"`
}

// RestoreReport says what a restore found and did.
type RestoreReport struct {
	// ControllerEpoch is the epoch of the controller's own metadata, -1
	// when its file is missing (Missing).
	ControllerEpoch int64           `json:"controller_epoch"`
	Missing         bool            `json:"missing"`
	Refused         string          `json:"refused,omitempty"` // why the controller refused changes
	Sources         []RestoreSource `json:"sources"`
	NewEpoch        int64           `json:"new_epoch,omitempty"`
	TopicsGained    []string        `json:"topics_gained"`
	TopicsLost      []string        `json:"topics_lost"`
	DryRun          bool            `json:"dry_run"`
	Restored        bool            `json:"restored"`
}

// RestoreMetadata asks the controller to adopt the newest copy of the
// cluster's metadata that the brokers hold (or req.FromBroker's), with an
// epoch above every one seen, when its own metadata file is missing or
// older than a broker's: the controller refuses every change
// (transport.ErrStaleMetadata) until this is done. With req.DryRun it
// reports every copy and what would change. It is sent and bounded as
// Failover is.
func (c *Client) RestoreMetadata(ctx context.Context, req RestoreRequest) (RestoreReport, error) {
	var rep RestoreReport
	if err := c.operatorCall(ctx, transport.APIRestoreMetadata, req, &rep); err != nil {
		return RestoreReport{}, fmt.Errorf("restore metadata: %w", err)
	}
	return rep, nil
}

// ElectLeadersRequest asks for the leadership of every partition (of
// Topic, or of every topic when empty) to go back to its preferred
// replica, the first of its replicas.
type ElectLeadersRequest struct {
	Topic     string `json:"topic,omitempty"`
	DryRun    bool   `json:"dry_run"`
	Requester string `json:"requester,omitempty"`
}

// ElectLeaders asks the controller to move leadership back to the
// preferred replicas: after failovers, leadership gathers on the brokers
// that survived, and stays there. For each partition whose leader is not
// its preferred replica and whose preferred replica is active, the
// controller reserves a new epoch, fences every active replica with it
// (the old leader stops taking writes: they fail as NotLeader, provably
// not appended), makes the preferred replica leader, and recovers any
// replica that held a write in flight the new leader lacks. Each move is
// a result (action elect-leader), each such recovery another (recover).
// It is sent and bounded as Failover is.
func (c *Client) ElectLeaders(ctx context.Context, req ElectLeadersRequest) (ChangeReport, error) {
	var rep ChangeReport
	if err := c.operatorCall(ctx, transport.APIElectLeaders, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("elect leaders: %w", err)
	}
	return rep, nil
}

// History returns the controller's audit trail of failovers and
// recoveries, oldest first. It is sent like the admin requests.
func (c *Client) History(ctx context.Context) ([]HistoryEvent, error) {
	var resp transport.JSONMessage
	if err := c.callController(ctx, transport.APIHistory, &transport.Empty{}, &resp, c.cfg.RequestTimeout); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var out struct {
		Events []HistoryEvent `json:"events"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return nil, fmt.Errorf("history: decode the controller's answer: %w", err)
	}
	if out.Events == nil {
		out.Events = []HistoryEvent{}
	}
	return out.Events, nil
}

// ReplicaDigest asks broker for the digest of the batches of its replica
// of a partition that start in [from, to), without reading them whole; see
// VerifiedReplicaDigest. Both ends must lie within the
// replica's log (transport.ErrOffsetOutOfRange otherwise); to compare two
// replicas, pick ends that are batch boundaries on both. It is one request,
// not retried, like ReplicaState, and returns the same errors for a broker
// that cannot be reached or holds no replica.
func (c *Client) ReplicaDigest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (ReplicaDigest, error) {
	return c.replicaDigest(ctx, broker, topic, partition, from, to, false)
}

// VerifiedReplicaDigest is ReplicaDigest after the broker read every batch
// of the range whole and checked it (checksum, records, offsets): a bit
// flipped where no batch identity shows it is found, and the replica is
// reported damaged (transport.ErrStorageFailed) from then on. It reads the
// whole range on the broker.
func (c *Client) VerifiedReplicaDigest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (ReplicaDigest, error) {
	return c.replicaDigest(ctx, broker, topic, partition, from, to, true)
}

func (c *Client) replicaDigest(ctx context.Context, broker int32, topic string, partition int32, from, to int64, verify bool) (ReplicaDigest, error) {
	addr, err := c.brokerAddr(ctx, broker)
	if err != nil {
		return ReplicaDigest{}, err
	}
	var id string
	if st := c.state(); st != nil {
		id = st.topics[topic].ID
	}
	req := &transport.ReplicaDigestRequest{Topic: topic, TopicID: id, Partition: partition, From: from, To: to, Verify: verify}
	var resp transport.ReplicaDigestResponse
	if err := c.call(ctx, addr, 0, transport.APIReplicaDigest, req, &resp); err != nil {
		return ReplicaDigest{}, fmt.Errorf("digest of %s/%d [%d, %d) on broker %d: %w", topic, partition, from, to, broker, err)
	}
	return ReplicaDigest{Digest: resp.Digest, Batches: resp.Batches}, nil
}

// operatorCall sends req as JSON to the controller and decodes its JSON
// answer into resp, bounded by ctx alone.
func (c *Client) operatorCall(ctx context.Context, api transport.API, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var m transport.JSONMessage
	if err := c.callController(ctx, api, &transport.JSONMessage{Data: data}, &m, 0); err != nil {
		return err
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("decode the controller's answer: %w", err)
	}
	return nil
}
