package client

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// Operator changes: failover, recovery and the controller's audit trail
// (docs/design.md section 7), and the replica digest that verification compares.
// The controller's requests and answers travel as JSON documents whose shape
// is the CLI's JSON output; the types below mirror them.

// The requests and reports of the operator changes have one definition,
// in package transport; these names are the client's for them.
type (
	FailoverRequest     = transport.FailoverRequest
	RecoverRequest      = transport.RecoverRequest
	ElectLeadersRequest = transport.ElectLeadersRequest
	Candidate           = transport.Candidate
	Action              = transport.Action
	ChangeResult        = transport.ChangeResult
	ChangeReport        = transport.ChangeReport
	HistoryEvent        = transport.HistoryEvent
	RestoreRequest      = transport.RestoreRequest
	RestoreSource       = transport.RestoreSource
	RestoreReport       = transport.RestoreReport
)

// Actions of a ChangeResult.
const (
	ActionFailover        = transport.ActionFailover
	ActionDropFollower    = transport.ActionDropFollower
	ActionRecover         = transport.ActionRecover
	ActionElectLeader     = transport.ActionElectLeader
	ActionCatchUp         = transport.ActionCatchUp
	ActionReplaceBroker   = transport.ActionReplaceBroker
	ActionRestoreMetadata = transport.ActionRestoreMetadata
	ActionReassign        = transport.ActionReassign
	ActionReassignJoin    = transport.ActionReassignJoin
	ActionReassignFinish  = transport.ActionReassignFinish
	ActionReassignCancel  = transport.ActionReassignCancel
)

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
// takes. A dry run, which changes nothing, is retried as reads are.
func (c *Client) Failover(ctx context.Context, req FailoverRequest) (ChangeReport, error) {
	what := fmt.Sprintf("%s/%d", req.Topic, req.Partition)
	if req.Topic == "" {
		what = fmt.Sprintf("broker %d", req.Broker)
	}
	var rep ChangeReport
	if err := c.operatorJSON(ctx, transport.APIFailover, req.DryRun, req, &rep); err != nil {
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
	if err := c.operatorJSON(ctx, transport.APIReplaceBroker, dryRun, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("replace broker %d: %w", broker, err)
	}
	return rep, nil
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
	if err := c.operatorJSON(ctx, transport.APIRestoreMetadata, req.DryRun, req, &rep); err != nil {
		return RestoreReport{}, fmt.Errorf("restore metadata: %w", err)
	}
	return rep, nil
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
	if err := c.operatorJSON(ctx, transport.APIElectLeaders, req.DryRun, req, &rep); err != nil {
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
	return c.operatorJSON(ctx, api, transport.Idempotent(api), req, resp)
}

// operatorJSON is operatorCall for a request that only reads when reads
// is set, whatever its api (a dry run, an acl list): it is retried like
// any read, and an answer lost leaves no outcome unknown.
func (c *Client) operatorJSON(ctx context.Context, api transport.API, reads bool, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var m transport.JSONMessage
	if err := c.controllerCall(ctx, api, reads, &transport.JSONMessage{Data: data}, &m, 0); err != nil {
		return err
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("decode the controller's answer: %w", err)
	}
	return nil
}
