package node

import (
	"context"
	"fmt"
	"gostream/broker"
	"strings"
	"sync"
	"time"

	"gostream/controller"
	"gostream/metadata"
	"gostream/record"
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

// rpcHandler serves the RPC API of a node.
type rpcHandler struct {
	n *Node
}

// Handle implements transport.Handler: decoding, validation and appends
// happen here, in arrival order; waiting happens in the Reply.
func (h *rpcHandler) Handle(ctx context.Context, req *transport.Request) transport.Reply {
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
	case transport.APIStream:
		reply = h.stream(req)
	case transport.APIStreamAdmin:
		reply = h.streamAdmin(req)
	case transport.APIControllerStatus:
		reply = h.controllerStatus(req)
	case transport.APIControllerChange:
		reply = h.controllerChange(req)
	case transport.APIACL:
		reply = h.acl(req)
	default:
		return h.fail(api, start, fmt.Errorf("%w: unknown API %d", transport.ErrUnsupportedVersion, req.API))
	}
	return func(ctx context.Context) (transport.Message, error) {
		m, err := reply(ctx)
		err = wireError(err)
		h.n.metrics.observeRequest(api, start, err)
		if err != nil {
			h.n.logger.Debug("request failed", "api", api.String(), "peer", req.RemoteAddr, "err", err)
		}
		return m, err
	}
}

func (h *rpcHandler) fail(api transport.API, start time.Time, err error) transport.Reply {
	h.n.metrics.observeRequest(api, start, err)
	return transport.Immediate(nil, err)
}

func decode(req *transport.Request, m transport.Message) error {
	if err := transport.Unmarshal(req.Body, m); err != nil {
		return fmt.Errorf("%w: %s: %v", transport.ErrInvalidRequest, transport.API(req.API), err)
	}
	return nil
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

func (h *rpcHandler) produce(req *transport.Request) transport.Reply {
	var r transport.ProduceRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if err := h.allow(req, metadata.OpWrite, metadata.ResourceTopic, r.Topic); err != nil {
		return transport.Immediate(nil, err)
	}
	t, rep, err := h.n.broker.Lookup(r.Topic, r.TopicID, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	if strings.HasPrefix(r.Topic, controller.InternalPrefix) {
		return transport.Immediate(nil, fmt.Errorf("%w: %s is an internal topic of the cluster: only its brokers write to it", transport.ErrInvalidRequest, r.Topic))
	}
	if t.Sealed {
		return transport.Immediate(nil, fmt.Errorf("%w: topic %q is sealed: it takes no more records, reads go on", transport.ErrTopicSealed, r.Topic))
	}
	if rep == nil {
		return transport.Immediate(nil, notLeader(t, r.Partition))
	}
	if r.TimeoutMs < 0 {
		return transport.Immediate(nil, fmt.Errorf("%w: negative timeout %d ms", transport.ErrInvalidRequest, r.TimeoutMs))
	}
	if len(r.Batch) > h.n.cfg.MaxBatchBytes {
		return transport.Immediate(nil, transport.BatchTooLarge(len(r.Batch), h.n.cfg.MaxBatchBytes))
	}
	start := time.Now()
	wait, err := rep.Part.Produce(record.Batch(r.Batch))
	if err != nil {
		return transport.Immediate(nil, err)
	}
	size := len(r.Batch)
	timeout := defaultAckWait
	if r.TimeoutMs > 0 {
		timeout = min(time.Duration(r.TimeoutMs)*time.Millisecond, maxProduceWait)
	}
	return func(ctx context.Context) (transport.Message, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ack, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		if len(ack.Replicas) > 1 {
			h.n.metrics.replication.Observe(time.Since(start).Seconds())
		}
		h.n.metrics.bytesIn.Add(float64(size))
		h.n.metrics.recordsIn.Add(float64(ack.NextOffset - ack.BaseOffset))
		return &transport.ProduceResponse{
			Partition: r.Partition, BaseOffset: ack.BaseOffset, NextOffset: ack.NextOffset,
			LeaderID: h.n.cfg.ID, LeaderEpoch: ack.LeaderEpoch, AppendTime: ack.AppendTime, Replicas: ack.Replicas,
		}, nil
	}
}

// hosted finds this broker's replica of a partition for client requests; a
// broker that holds none answers NotLeader, so the client looks again.
// The partition itself refuses what only its leader may serve.
func (h *rpcHandler) hosted(topic, id string, partition int32) (*broker.Replica, error) {
	t, rep, err := h.n.broker.Lookup(topic, id, partition)
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, notLeader(t, partition)
	}
	return rep, nil
}

func notLeader(t *metadata.Topic, partition int32) error {
	p := t.Partitions[partition]
	return fmt.Errorf("%w: partition %s/%d is led by broker %d", transport.ErrNotLeader, t.Name, partition, p.Leader)
}

func (h *rpcHandler) fetch(req *transport.Request) transport.Reply {
	var r transport.FetchRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if err := h.allow(req, metadata.OpRead, metadata.ResourceTopic, r.Topic); err != nil {
		return transport.Immediate(nil, err)
	}
	rep, err := h.hosted(r.Topic, r.TopicID, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	switch {
	case r.Offset < 0:
		return transport.Immediate(nil, fmt.Errorf("%w: negative offset %d", transport.ErrOffsetOutOfRange, r.Offset))
	case r.MaxBytes < minFetchBytes:
		return transport.Immediate(nil, fmt.Errorf("%w: max bytes %d below %d", transport.ErrInvalidRequest, r.MaxBytes, minFetchBytes))
	case r.MaxWaitMs < 0 || r.MaxWaitMs > maxWaitMs:
		return transport.Immediate(nil, fmt.Errorf("%w: max wait %d ms outside [0, %d]", transport.ErrInvalidRequest, r.MaxWaitMs, maxWaitMs))
	}
	maxBytes := min(int(r.MaxBytes), transport.FrameLimit(h.n.cfg.MaxBatchBytes)-fetchFrameSlack)
	return func(ctx context.Context) (transport.Message, error) {
		var buf []byte
		// The read's memory is reserved once there is data to read, not
		// while a long poll waits; the server trims the reservation to
		// the response once this returns.
		res, err := rep.Part.FetchInto(ctx, r.Offset, maxBytes, time.Duration(r.MaxWaitMs)*time.Millisecond, func() ([]byte, error) {
			if err := req.Reserve(ctx, readReservation(maxBytes, h.n.cfg.MaxBatchBytes)); err != nil {
				return nil, err
			}
			buf = getReadBuffer(maxBytes)
			return buf, nil
		})
		if err != nil {
			putReadBuffer(buf)
			return nil, err
		}
		if len(res.Batches) == 0 || cap(buf) == 0 || &res.Batches[:1][0] != &buf[:1][0] {
			// The batches are not in buf (nothing read, or a first batch
			// larger than buf read into a buffer of its own).
			putReadBuffer(buf)
			buf = nil
		}
		h.n.metrics.bytesOut.Add(float64(len(res.Batches)))
		return &transport.FetchResponse{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, Batches: res.Batches,
			Done: func() { putReadBuffer(buf) }}, nil
	}
}

// readReservation is the memory a fetch of maxBytes may allocate for its
// read, at most: its read buffer (a pooled one, or one of maxBytes), plus,
// when a first batch larger than maxBytes can exist, a buffer for that
// batch alone.
func readReservation(maxBytes, maxBatchBytes int) int {
	n := maxBytes
	if maxBytes <= pooledReadBuffer {
		n = pooledReadBuffer
	}
	if maxBytes < maxBatchBytes {
		n += maxBatchBytes
	}
	return n
}

func (h *rpcHandler) listOffsets(req *transport.Request) transport.Reply {
	var r transport.ListOffsetsRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if err := h.allow(req, metadata.OpDescribe, metadata.ResourceTopic, r.Topic); err != nil {
		return transport.Immediate(nil, err)
	}
	rep, err := h.hosted(r.Topic, r.TopicID, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	start, hw, end, err := rep.Part.LeaderOffsets()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return transport.Immediate(&transport.ListOffsetsResponse{LogStartOffset: start, HighWatermark: hw, LogEndOffset: end}, nil)
}

func (h *rpcHandler) metadata(req *transport.Request) transport.Reply {
	var r transport.MetadataRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	meta := h.n.broker.Metadata()
	if meta == nil {
		return transport.Immediate(nil, fmt.Errorf("%w: this node has no metadata yet", transport.ErrControllerUnavailable))
	}
	resp := &transport.MetadataResponse{ClusterID: meta.ClusterID, ControllerID: meta.ControllerID, MetadataEpoch: meta.Epoch,
		MaxBatchBytes: int32(h.n.cfg.MaxBatchBytes)}
	for _, b := range meta.Brokers {
		resp.Brokers = append(resp.Brokers, transport.BrokerInfo{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip})
	}
	if len(r.Topics) == 0 {
		for i := range meta.Topics {
			if h.canSee(req, metadata.ResourceTopic, meta.Topics[i].Name) {
				resp.Topics = append(resp.Topics, h.topicInfo(&meta.Topics[i]))
			}
		}
	} else {
		for _, name := range r.Topics {
			// Before the lookup: without describe, a topic that exists
			// and one that does not get the same answer.
			if err := h.allow(req, metadata.OpDescribe, metadata.ResourceTopic, name); err != nil {
				return transport.Immediate(nil, err)
			}
			t := meta.Topic(name)
			if t == nil {
				return transport.Immediate(nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, name))
			}
			resp.Topics = append(resp.Topics, h.topicInfo(t))
		}
	}
	return transport.Immediate(resp, nil)
}

func (h *rpcHandler) topicInfo(t *metadata.Topic) transport.TopicInfo {
	ti := transport.TopicInfo{Name: t.Name, ID: t.ID, ReplicationFactor: int16(t.ReplicationFactor), Sealed: t.Sealed,
		Config: h.n.broker.TopicConfigValues(t)}
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

func (h *rpcHandler) controller() (*controller.Controller, error) {
	c := h.n.activeController()
	if c == nil {
		return nil, h.n.notControllerError()
	}
	return c, nil
}

func (h *rpcHandler) createTopic(req *transport.Request) transport.Reply {
	var r transport.CreateTopicRequest
	return serveWith(req, &r, allowing(func() error {
		// create on the cluster allows any topic; else create on this one.
		if h.n.sec.authz == nil || h.canCreateAnyTopic(req) {
			return nil
		}
		return h.allow(req, metadata.OpCreate, metadata.ResourceTopic, r.Name)
	}, h.controller), func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		t, err := c.CreateTopic(ctx, &r)
		if err != nil {
			return nil, err
		}
		ti := h.topicInfo(t)
		return &ti, nil
	})
}

func (h *rpcHandler) deleteTopic(req *transport.Request) transport.Reply {
	var r transport.TopicRequest
	return serveWith(req, &r, allowing(func() error {
		if err := h.allow(req, metadata.OpDelete, metadata.ResourceTopic, r.Name); err != nil {
			return err
		}
		return h.allow(req, metadata.OpOperate, metadata.ResourceCluster, "")
	}, h.controller), func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		return nil, c.DeleteTopic(ctx, r.Name)
	})
}

func (h *rpcHandler) sealTopic(req *transport.Request) transport.Reply {
	var r transport.TopicRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpAlter, metadata.ResourceTopic, r.Name)
	}, h.controller), func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		return nil, c.SealTopic(ctx, r.Name)
	})
}

// Fetch read buffers are reused: a consumer reading 1 MiB at a time would
// otherwise make the node allocate (and collect) a megabyte per request.
// Only buffers of the common size are pooled.
const pooledReadBuffer = 1 << 20

var readBuffers = sync.Pool{New: func() any { b := make([]byte, pooledReadBuffer); return &b }}

func getReadBuffer(maxBytes int) []byte {
	if maxBytes > pooledReadBuffer {
		return nil // Read allocates what it needs
	}
	return (*readBuffers.Get().(*[]byte))[:0]
}

func putReadBuffer(b []byte) {
	if b != nil && cap(b) == pooledReadBuffer {
		b = b[:cap(b)]
		readBuffers.Put(&b)
	}
}
