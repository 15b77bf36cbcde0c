package rpcapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gostream/broker"
	"gostream/replication"

	"gostream/controller"
	"gostream/metadata"
	"gostream/transport"
)

// Handlers of the cluster APIs: controller registration and metadata, and
// replica-to-replica replication.

func (h *Handler) replicate(req *transport.Request) transport.Reply {
	var r transport.ReplicateRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	rep, err := h.replicaOf(r.Topic, r.TopicID, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	wait, err := rep.Part.Replicate(&r)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		end, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		return &transport.ReplicateResponse{LogEndOffset: end}, nil
	}
}

// replicaOfRequest and leaderOfRequest find, for serveWith, the replica a
// request names once it is decoded into the fields given.
func (h *Handler) replicaOfRequest(topic, id *string, partition *int32) func() (*broker.Replica, error) {
	return func() (*broker.Replica, error) { return h.replicaOf(*topic, *id, *partition) }
}

func (h *Handler) leaderOfRequest(topic, id *string, partition *int32) func() (*broker.Replica, error) {
	return func() (*broker.Replica, error) { return h.leaderOf(*topic, *id, *partition) }
}

func (h *Handler) replicaState(req *transport.Request) transport.Reply {
	var r transport.ReplicaStateRequest
	// Fencing writes the epoch file, so it runs in the Reply, not in line.
	return serveWith(req, &r, allowing(func() error {
		if r.LeaderEpoch > 0 {
			return h.cfg.Security.PeerOnly(req.Principal, "ReplicaState with a fencing epoch")
		}
		return h.allow(req, metadata.OpDescribe, metadata.ResourceTopic, r.Topic)
	}, h.replicaOfRequest(&r.Topic, &r.TopicID, &r.Partition)), func(_ context.Context, rep *broker.Replica) (transport.Message, error) {
		return rep.Part.ReplicaState(&r)
	})
}

func (h *Handler) registerBroker(req *transport.Request) transport.Reply {
	var r transport.RegisterBrokerRequest
	return serveWith(req, &r, h.controller, func(ctx context.Context, c *controller.Controller) (transport.Message, error) {
		meta, err := c.Register(ctx, &r)
		if err != nil {
			return nil, err
		}
		return metadataBlob(meta)
	})
}

func metadataBlob(meta *metadata.Cluster) (transport.Message, error) {
	blob, err := metadata.Marshal(meta)
	if err != nil {
		return nil, err
	}
	return &transport.MetadataBlob{Metadata: blob}, nil
}

func (h *Handler) updateMetadata(req *transport.Request) transport.Reply {
	var r transport.MetadataBlob
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	if h.cfg.Controller() != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: broker %d is the active controller; it takes no metadata from others", transport.ErrInvalidRequest, h.cfg.ID))
	}
	return func(ctx context.Context) (transport.Message, error) {
		meta, err := metadata.Parse(r.Metadata, "UpdateMetadata from "+req.RemoteAddr)
		if err != nil {
			return nil, err
		}
		// Older than what this broker holds: say so, so that a controller
		// whose metadata went back in time learns it. The newer metadata
		// may still be being applied (a push of the next change overtook
		// this one): the answer waits for that, since the controller takes
		// it to mean this broker has the change, its replicas open.
		if cur := h.cfg.Replicas.Metadata(); cur != nil && meta.Epoch < cur.Epoch && meta.ClusterID == cur.ClusterID {
			if err := h.cfg.Replicas.WaitReconciled(ctx, meta.Epoch); err != nil {
				return nil, fmt.Errorf("broker %d is still applying metadata epoch %d: %w", h.cfg.ID, cur.Epoch, err)
			}
			return nil, fmt.Errorf("%w: broker %d holds metadata epoch %d, newer than the pushed epoch %d", transport.ErrStaleMetadata, h.cfg.ID, cur.Epoch, meta.Epoch)
		}
		return nil, h.cfg.ApplyMetadata(meta, "UpdateMetadata from "+req.RemoteAddr)
	}
}

func (h *Handler) fetchMetadata(req *transport.Request) transport.Reply {
	var r transport.FetchMetadataRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	c.NoteBroker(r.BrokerID, r.Addr)
	return func(ctx context.Context) (transport.Message, error) {
		c.ClaimedEpoch(ctx, r.BrokerID, r.KnownEpoch)
		if err := c.Refusal(); err != nil {
			return nil, err
		}
		meta := c.Metadata()
		if meta.Epoch <= r.KnownEpoch {
			return &transport.MetadataBlob{}, nil
		}
		return metadataBlob(meta)
	}
}

func (h *Handler) describeCluster(req *transport.Request) transport.Reply {
	if err := decode(req, &transport.Empty{}); err != nil {
		return transport.Immediate(nil, err)
	}
	resp := &transport.DescribeClusterResponse{NodeID: h.cfg.ID, RootID: h.cfg.RootID}
	if c := h.cfg.Controller(); c != nil {
		if err := c.Refusal(); err != nil {
			resp.Controller = err.Error()
		}
	}
	if meta := h.cfg.Replicas.Metadata(); meta != nil {
		blob, err := metadata.Marshal(meta)
		if err != nil {
			return transport.Immediate(nil, err)
		}
		resp.Metadata = blob
	}
	resp.Members = h.cfg.Members()
	return transport.Immediate(resp, nil)
}

func (h *Handler) catchUp(req *transport.Request) transport.Reply {
	var r transport.CatchUpRequest
	return serveWith(req, &r, h.leaderOfRequest(&r.Topic, &r.TopicID, &r.Partition), func(ctx context.Context, rep *broker.Replica) (transport.Message, error) {
		st := rep.Part.State()
		from, to, err := rep.Part.CatchUp(ctx, r.Broker)
		if err != nil {
			return nil, err
		}
		h.cfg.Audit(ctx, transport.HistoryEvent{Time: time.Now().UTC(), Requester: req.RemoteAddr, ChangeResult: transport.ChangeResult{
			Topic: r.Topic, Partition: r.Partition, Action: transport.ActionCatchUp,
			OldLeader: st.Leader, NewLeader: st.Leader, OldEpoch: st.LeaderEpoch, NewEpoch: st.LeaderEpoch,
			OldActive: st.Active, NewActive: st.Active, CopiedTo: to,
		}})
		return &transport.CatchUpResponse{FromOffset: from, ToOffset: to}, nil
	})
}

// leaderOf finds this broker's replica of a partition that it leads, for
// requests only a leader serves.
func (h *Handler) leaderOf(topic, id string, partition int32) (*broker.Replica, error) {
	t, rep, err := h.cfg.Replicas.Lookup(topic, id, partition)
	if err != nil {
		return nil, err
	}
	if rep == nil || rep.Part.State().Leader != h.cfg.ID {
		return nil, notLeader(t, partition)
	}
	return rep, nil
}

// replicaOf finds this broker's replica of a partition for replica-level
// requests.
func (h *Handler) replicaOf(topic, id string, partition int32) (*broker.Replica, error) {
	_, rep, err := h.cfg.Replicas.Lookup(topic, id, partition)
	if errors.Is(err, transport.ErrUnknownTopicID) || err == nil && rep == nil {
		// Another broker names a topic or replica this one does not hold:
		// its metadata may be behind (a push it missed). It catches up now
		// rather than at its next poll; the caller retries.
		go h.cfg.RefreshMetadata(context.Background())
	}
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, fmt.Errorf("%w: broker %d holds no replica of %s/%d", transport.ErrUnknownPartition, h.cfg.ID, topic, partition)
	}
	return rep, nil
}

func (h *Handler) replicaDigest(req *transport.Request) transport.Reply {
	var r transport.ReplicaDigestRequest
	return serveWith(req, &r, allowing(func() error {
		return h.allow(req, metadata.OpDescribe, metadata.ResourceTopic, r.Topic)
	}, h.replicaOfRequest(&r.Topic, &r.TopicID, &r.Partition)), func(ctx context.Context, rep *broker.Replica) (transport.Message, error) {
		sum, n, err := rep.Part.Digest(ctx, r.From, r.To, r.Verify)
		if err != nil {
			return nil, err
		}
		return &transport.ReplicaDigestResponse{Digest: sum, Batches: int32(n)}, nil
	})
}

func (h *Handler) replicaBatches(req *transport.Request) transport.Reply {
	var r transport.ReplicaBatchesRequest
	return serveWith(req, &r, h.replicaOfRequest(&r.Topic, &r.TopicID, &r.Partition), func(_ context.Context, rep *broker.Replica) (transport.Message, error) {
		bs, err := rep.Part.Batches(&r)
		if err != nil {
			return nil, err
		}
		return &transport.ReplicaBatchesResponse{Batches: bs}, nil
	})
}

func (h *Handler) truncateReplica(req *transport.Request) transport.Reply {
	var r transport.TruncateReplicaRequest
	return serveWith(req, &r, h.replicaOfRequest(&r.Topic, &r.TopicID, &r.Partition), func(ctx context.Context, rep *broker.Replica) (transport.Message, error) {
		return nil, rep.Part.Truncate(ctx, &r)
	})
}

func (h *Handler) recoverReplica(req *transport.Request) transport.Reply {
	var r transport.CatchUpRequest
	return serveWith(req, &r, h.leaderOfRequest(&r.Topic, &r.TopicID, &r.Partition), func(ctx context.Context, rep *broker.Replica) (transport.Message, error) {
		var res replication.RecoverResult
		var err error
		if r.Throttle > 0 {
			// A replica being added by a move: paced with the node's other
			// move copies.
			res, err = rep.Part.RecoverFollowerPaced(ctx, r.Broker, h.cfg.Replicas.MovePacer(r.Throttle), r.Throttle)
		} else {
			res, err = rep.Part.RecoverFollower(ctx, r.Broker)
		}
		if err != nil {
			return nil, err
		}
		return &transport.RecoverReplicaResponse{PreviousEnd: res.PreviousEnd, CommonPrefix: res.CommonPrefix, CopiedTo: res.CopiedTo}, nil
	})
}

// moveProgress answers how far this leader's copy of a partition to a
// replica being added has come (a CatchUpRequest names it).
func (h *Handler) moveProgress(req *transport.Request) transport.Reply {
	var r transport.CatchUpRequest
	return serveWith(req, &r, h.leaderOfRequest(&r.Topic, &r.TopicID, &r.Partition), func(ctx context.Context, rep *broker.Replica) (transport.Message, error) {
		return jsonReply(rep.Part.CopyProgress(r.Broker), nil)
	})
}

func (h *Handler) resetReplica(req *transport.Request) transport.Reply {
	var r transport.TruncateReplicaRequest
	if err := decode(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	return func(context.Context) (transport.Message, error) {
		meta := h.cfg.Replicas.Metadata()
		if meta == nil {
			return nil, fmt.Errorf("%w: no metadata", transport.ErrNotReady)
		}
		if t := meta.Topic(r.Topic); t != nil && int(r.Partition) < len(t.Partitions) && r.Partition >= 0 &&
			t.Partitions[r.Partition].LeaderEpoch > r.LeaderEpoch {
			return nil, fmt.Errorf("%w: reset of %s/%d from epoch %d, metadata has %d", transport.ErrStaleEpoch, r.Topic, r.Partition, r.LeaderEpoch, t.Partitions[r.Partition].LeaderEpoch)
		}
		return nil, h.cfg.Replicas.ResetReplica(r.Topic, r.TopicID, r.Partition, r.Offset)
	}
}

func (h *Handler) auditEvent(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	var ev transport.HistoryEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: audit event: %v", transport.ErrInvalidRequest, err))
	}
	return func(context.Context) (transport.Message, error) {
		return nil, c.Record(ev)
	}
}
