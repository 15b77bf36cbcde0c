package rpcapi

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/broker"
	"gostream/controller"
	"gostream/metadata"
	"gostream/record"
	"gostream/streams"
	"gostream/transport"
)

// Bounds on what a request may ask for.
const (
	maxWaitMs       = 5 * 60 * 1000
	maxProduceWait  = 5 * time.Minute
	defaultAckWait  = 30 * time.Second
	minFetchBytes   = 1
	fetchFrameSlack = 1 << 10
)

// Security is what the handler asks of the node's security: the
// authorization of a principal (docs/security.md).
type Security interface {
	// Authorize says whether principal may do op on a resource: nil, or
	// an error that wraps transport.ErrAuthorizationFailed.
	Authorize(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error
	// CanDescribe reports whether principal may describe a resource.
	CanDescribe(principal string, rt metadata.ResourceType, name string) bool
	// PeerOnly refuses a request that only the cluster's nodes make
	// (what names it) from any other principal.
	PeerOnly(principal, what string) error
}

// Config is what a Handler serves with: the core, the node's replicas and
// its Durable Streams server, and, as functions, the node's parts it
// answers for (its controller, metadata, membership and audit trail).
type Config struct {
	// ID is the node's broker id; MaxBatchBytes its batch limit.
	ID            int32
	MaxBatchBytes int
	// RootID is the node's storage root's id (DescribeCluster).
	RootID   string
	Core     *broker.Broker
	Replicas *broker.Replicas
	Streams  *streams.Server
	Security Security
	// Controller is the active controller on this node, or nil;
	// NotController the error that says where the controller is.
	Controller    func() *controller.Controller
	NotController func() error
	// IsController says whether this node is the single controller
	// configured; Candidacy is its part in a controller group, or nil;
	// ControllerStatus its status in either.
	IsController     func() bool
	Candidacy        func() *controller.Candidacy
	ControllerStatus func() transport.ControllerStatus
	// ApplyMetadata adopts metadata pushed by the controller (source says
	// from where); RefreshMetadata fetches the controller's now.
	ApplyMetadata   func(meta *metadata.Cluster, source string) error
	RefreshMetadata func(ctx context.Context) error
	// Members are the cluster's members as gossip sees them (none while
	// the node runs no gossip).
	Members func() []transport.Member
	// Audit adds an event to the controller's audit trail (best effort).
	Audit func(ctx context.Context, ev transport.HistoryEvent)
	// ObserveRequest is called once per request, with its API, when it
	// began and its error on the wire.
	ObserveRequest func(api transport.API, start time.Time, err error)
	Logger         hclog.Logger
}

// Handler serves a node's native RPC API (transport.Handler): it decodes
// each request, checks what the API needs before it is served (access.go),
// has the core (or the node's replication, controller, streams) do it and
// encodes the answer, with the core's errors mapped to the protocol's
// codes (errors.go).
type Handler struct {
	cfg Config
	log hclog.Logger
}

// New returns the handler of cfg.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Members == nil {
		cfg.Members = func() []transport.Member { return nil }
	}
	if cfg.ObserveRequest == nil {
		cfg.ObserveRequest = func(transport.API, time.Time, error) {}
	}
	return &Handler{cfg: cfg, log: cfg.Logger}
}

// ReusesBody implements transport.BodyReuser, for the requests that carry
// batches. A Replicate request's batches are written to the replica's log
// before its Reply returns (the Reply only waits for their fsync), and
// nothing keeps them after that. A Produce request's batch is written to
// the leader's log, and queued to each follower's sender, which may need
// it after the Reply has returned (a produce that timed out): the queue
// holds the body (Request.Hold) until its sender is done with it.
func (h *Handler) ReusesBody(api transport.API) bool {
	return api == transport.APIReplicate || api == transport.APIProduce
}

// AnswersHere implements transport.AnswerHerer: a lone Produce or
// Replicate is answered on the goroutine that read it. Both append and
// wait for their fsync on this node; a leader's produce that must then
// wait for its followers says so (transport.WaitingOnOthers).
func (h *Handler) AnswersHere(api transport.API) bool {
	return api == transport.APIReplicate || api == transport.APIProduce
}

// Handle implements transport.Handler: decoding, validation and appends
// happen here, in arrival order; waiting happens in the Reply.
func (h *Handler) Handle(ctx context.Context, req *transport.Request) transport.Reply {
	start := time.Now()
	api := transport.API(req.API)
	if req.Version != transport.Version1 {
		return h.fail(api, start, fmt.Errorf("%w: %s version %d (this node speaks version %d)", transport.ErrUnsupportedVersion, api, req.Version, transport.Version1))
	}
	if err := h.admit(req); err != nil {
		return h.fail(api, start, err)
	}
	var reply transport.Reply
	switch api {
	case transport.APIProduce:
		reply = h.produce(req)
	case transport.APIFetch:
		reply = h.fetch(req)
	case transport.APIListOffsets:
		reply = h.listOffsets(req)
	case transport.APIMetadata:
		reply = h.metadata(req)
	case transport.APICreateTopic:
		reply = h.createTopic(req)
	case transport.APIDeleteTopic:
		reply = h.deleteTopic(req)
	case transport.APISealTopic:
		reply = h.sealTopic(req)
	case transport.APIAlterTopicConfig:
		reply = h.alterTopicConfig(req)
	case transport.APICreatePartitions:
		reply = h.createPartitions(req)
	case transport.APIFindCoordinator:
		reply = h.findCoordinator(req)
	case transport.APIOffsetCommit:
		reply = h.offsetCommit(req)
	case transport.APIOffsetFetch:
		reply = h.offsetFetch(req)
	case transport.APIGroupHeartbeat:
		reply = h.groupHeartbeat(req)
	case transport.APIListGroups:
		reply = h.listGroups(req)
	case transport.APIDescribeGroup:
		reply = h.describeGroup(req)
	case transport.APIDeleteGroup:
		reply = h.deleteGroup(req)
	case transport.APIOffsetDelete:
		reply = h.offsetDelete(req)
	case transport.APIReplicate:
		reply = h.replicate(req)
	case transport.APIReplicaState:
		reply = h.replicaState(req)
	case transport.APIRegisterBroker:
		reply = h.registerBroker(req)
	case transport.APIUpdateMetadata:
		reply = h.updateMetadata(req)
	case transport.APIFetchMetadata:
		reply = h.fetchMetadata(req)
	case transport.APIDescribeCluster:
		reply = h.describeCluster(req)
	case transport.APICatchUp:
		reply = h.catchUp(req)
	case transport.APIReplicaDigest:
		reply = h.replicaDigest(req)
	case transport.APIReplicaBatches:
		reply = h.replicaBatches(req)
	case transport.APITruncateReplica:
		reply = h.truncateReplica(req)
	case transport.APIRecoverReplica:
		reply = h.recoverReplica(req)
	case transport.APIMoveProgress:
		reply = h.moveProgress(req)
	case transport.APIReassign:
		reply = h.reassign(req)
	case transport.APIReassignStatus:
		reply = h.reassignStatus(req)
	case transport.APIResetReplica:
		reply = h.resetReplica(req)
	case transport.APIAudit:
		reply = h.auditEvent(req)
	case transport.APIFailover:
		reply = h.failover(req)
	case transport.APIRecover:
		reply = h.recover(req)
	case transport.APIElectLeaders:
		reply = h.electLeaders(req)
	case transport.APIReplaceBroker:
		reply = h.replaceBroker(req)
	case transport.APIRestoreMetadata:
		reply = h.restoreMetadata(req)
	case transport.APIHistory:
		reply = h.history(req)
	case transport.APIAutopilotLease:
		reply = h.autopilotLease(req)
	case transport.APIStreamAppend, transport.APIStreamRead, transport.APIStreamHead, transport.APIStreamInit, transport.APIStreamLog:
		reply = h.cfg.Streams.Handle(req)
	case transport.APIStreamAdmin:
		reply = h.streamAdmin(req)
	case transport.APIControllerStatus:
		reply = h.controllerStatus(req)
	case transport.APIControllerChange:
		reply = h.controllerChange(req)
	case transport.APIACL:
		reply = h.acl(req)
	case transport.APIInitProducerID:
		reply = h.initProducerID(req)
	case transport.APIAllocateProducerIDs:
		reply = h.allocateProducerIDs(req)
	case transport.APIPlanMoves:
		reply = h.planMoves(req)
	case transport.APIReplicaSizes:
		reply = h.replicaSizes(req)
	default:
		return h.fail(api, start, fmt.Errorf("%w: unknown API %d", transport.ErrUnsupportedVersion, req.API))
	}
	return func(ctx context.Context) (transport.Message, error) {
		m, err := reply(ctx)
		err = WireError(err)
		h.cfg.ObserveRequest(api, start, err)
		if err != nil {
			h.log.Debug("request failed", "api", api.String(), "peer", req.RemoteAddr, "err", err)
		}
		return m, err
	}
}

func (h *Handler) fail(api transport.API, start time.Time, err error) transport.Reply {
	h.cfg.ObserveRequest(api, start, err)
	return transport.Immediate(nil, err)
}

func decode(req *transport.Request, m transport.Message) error {
	if err := transport.Unmarshal(req.Body, m); err != nil {
		return fmt.Errorf("%w: %s: %v", transport.ErrInvalidRequest, transport.API(req.API), err)
	}
	return nil
}

// serve is the shape of a handler over the core: decode the request into
// r, then have the core do the work in the Reply.
func (h *Handler) serve(req *transport.Request, r transport.Message, do func(context.Context) (transport.Message, error)) transport.Reply {
	if err := decode(req, r); err != nil {
		return transport.Immediate(nil, err)
	}
	return do
}

// serveWith is the common shape of a handler: decode the request into r,
// find what serves it (this broker's replica, the controller), answering
// at once if there is none, and do the work in the Reply. find runs after
// the decode, so it may read r.
func serveWith[T any](req *transport.Request, r transport.Message, find func() (T, error), serve func(context.Context, T) (transport.Message, error)) transport.Reply {
	if err := decode(req, r); err != nil {
		return transport.Immediate(nil, err)
	}
	t, err := find()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) { return serve(ctx, t) }
}

func (h *Handler) produce(req *transport.Request) transport.Reply {
	var r transport.ProduceRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	wait, err := h.cfg.Core.Produce(req.Principal, broker.ProduceRequest{Topic: r.Topic, TopicID: r.TopicID, Partition: r.Partition,
		Batch: record.Batch(r.Batch), Timeout: time.Duration(r.TimeoutMs) * time.Millisecond, Hold: req.Hold})
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		ack, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		return &transport.ProduceResponse{
			Partition: r.Partition, BaseOffset: ack.BaseOffset, NextOffset: ack.NextOffset,
			LeaderID: h.cfg.ID, LeaderEpoch: ack.LeaderEpoch, AppendTime: ack.AppendTime, Replicas: ack.Replicas,
		}, nil
	}
}

func (h *Handler) fetch(req *transport.Request) transport.Reply {
	var r transport.FetchRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if r.MaxWaitMs < 0 || r.MaxWaitMs > maxWaitMs {
		return transport.Immediate(nil, fmt.Errorf("%w: max wait %d ms outside [0, %d]", transport.ErrInvalidRequest, r.MaxWaitMs, maxWaitMs))
	}
	// The response must fit a frame.
	maxBytes := min(int(r.MaxBytes), transport.FrameLimit(h.cfg.MaxBatchBytes)-fetchFrameSlack)
	if r.MaxBytes < minFetchBytes {
		maxBytes = int(r.MaxBytes)
	}
	fr := broker.FetchRequest{Topic: r.Topic, TopicID: r.TopicID, Partition: r.Partition, Offset: r.Offset, MaxBytes: maxBytes,
		MaxWait: time.Duration(r.MaxWaitMs) * time.Millisecond}
	if req.SendFile {
		fr.RangeMin = transport.SendFileMin
	}
	return func(ctx context.Context) (transport.Message, error) {
		res, err := h.cfg.Core.Fetch(ctx, req.Principal, fr, req.Reserve)
		if err != nil {
			return nil, err
		}
		resp := &transport.FetchResponse{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, Batches: res.Batches,
			Done: res.Release}
		if r := res.Range; r != nil {
			resp.File = &transport.FileRange{File: r.File(), Offset: r.Position(), Length: int64(r.Len())}
		}
		return resp, nil
	}
}

func (h *Handler) listOffsets(req *transport.Request) transport.Reply {
	var r transport.ListOffsetsRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	o, err := h.cfg.Core.ListOffsets(req.Principal, r.Topic, r.TopicID, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return transport.Immediate(&transport.ListOffsetsResponse{LogStartOffset: o.LogStartOffset, HighWatermark: o.HighWatermark, LogEndOffset: o.LogEndOffset}, nil)
}

func (h *Handler) metadata(req *transport.Request) transport.Reply {
	var r transport.MetadataRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	meta, topics, err := h.cfg.Core.Metadata(req.Principal, r.Topics)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	resp := &transport.MetadataResponse{ClusterID: meta.ClusterID, ControllerID: meta.ControllerID, MetadataEpoch: meta.Epoch,
		MaxBatchBytes: int32(h.cfg.MaxBatchBytes)}
	for _, b := range meta.Brokers {
		// Each broker at its address on the listener the request came in
		// on; one without a listener of that name is left out, as Kafka
		// does.
		addr, ok := b.RPCEndpoint(req.Listener)
		if !ok {
			continue
		}
		resp.Brokers = append(resp.Brokers, transport.BrokerInfo{ID: b.ID, Addr: addr, HTTP: b.HTTP, Gossip: b.Gossip})
	}
	for _, t := range topics {
		resp.Topics = append(resp.Topics, topicInfo(t))
	}
	return transport.Immediate(resp, nil)
}

func notLeader(t *metadata.Topic, partition int32) error {
	p := t.Partitions[partition]
	return fmt.Errorf("%w: partition %s/%d is led by broker %d", transport.ErrNotLeader, t.Name, partition, p.Leader)
}

// topicInfo is a topic as the native protocol describes it.
func topicInfo(t broker.TopicView) transport.TopicInfo {
	ti := transport.TopicInfo{Name: t.Name, ID: t.ID, ReplicationFactor: int16(t.ReplicationFactor), Sealed: t.Sealed, Config: t.Config}
	if st := t.Stream; st != nil {
		ti.Stream = &transport.StreamInfo{Path: st.Path, ContentType: st.ContentType, ForkedFrom: st.ForkedFrom, Deleted: st.Deleted}
	}
	for p, part := range t.Partitions {
		ti.Partitions = append(ti.Partitions, transport.PartitionInfo{
			Partition: int32(p), Leader: part.Leader, LeaderEpoch: part.LeaderEpoch,
			Replicas: part.Replicas, Active: part.Active,
		})
	}
	return ti
}

// topicInfo is a topic as the native protocol describes it, with this
// node's configuration values.
func (h *Handler) topicInfo(t *metadata.Topic) transport.TopicInfo {
	return topicInfo(broker.TopicView{Topic: t, Config: h.cfg.Replicas.TopicConfigValues(t)})
}

func (h *Handler) controller() (*controller.Controller, error) {
	c := h.cfg.Controller()
	if c == nil {
		return nil, h.cfg.NotController()
	}
	return c, nil
}

func (h *Handler) createTopic(req *transport.Request) transport.Reply {
	var r transport.CreateTopicRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		t, err := h.cfg.Core.CreateTopic(ctx, req.Principal, &r)
		if err != nil {
			return nil, err
		}
		ti := topicInfo(t)
		return &ti, nil
	})
}

func (h *Handler) deleteTopic(req *transport.Request) transport.Reply {
	var r transport.TopicRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.cfg.Core.DeleteTopic(ctx, req.Principal, r.Name)
	})
}

func (h *Handler) sealTopic(req *transport.Request) transport.Reply {
	var r transport.TopicRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		return nil, h.cfg.Core.SealTopic(ctx, req.Principal, r.Name)
	})
}

func (h *Handler) alterTopicConfig(req *transport.Request) transport.Reply {
	var r transport.AlterTopicConfigRequest
	return h.serve(req, &r, func(ctx context.Context) (transport.Message, error) {
		t, err := h.cfg.Core.AlterTopicConfig(ctx, req.Principal, &r)
		if err != nil {
			return nil, err
		}
		ti := topicInfo(t)
		return &ti, nil
	})
}
