package kafkaapi

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/groups"
	"gostream/transport"
)

// Consumer groups (docs/kafka-groups.md): FindCoordinator from any node;
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and
// OffsetFetch by the group's coordinator, the leader of its partition of
// __consumer_offsets.

// groupCodes are Kafka's codes for the coordinator's refusals.
var groupCodes = []struct {
	err  error
	code *kerr.Error
}{
	{groups.ErrMemberIDRequired, kerr.MemberIDRequired},
	{groups.ErrIllegalGeneration, kerr.IllegalGeneration},
	{groups.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{groups.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{groups.ErrGroupFull, kerr.GroupMaxSizeReached},
	{groups.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{groups.ErrUnknownMember, kerr.UnknownMemberID},
	{groups.ErrFencedInstanceID, kerr.FencedInstanceID},
	// A commit at an epoch that is not its member's now, or of a
	// partition it does not own (gostream's own membership, which
	// ConsumerGroupHeartbeat's members have): the client learns its epoch
	// and assignment at its next heartbeat.
	{groups.ErrFencedMember, kerr.StaleMemberEpoch},
	{groups.ErrNotOwner, kerr.StaleMemberEpoch},
	{groups.ErrNotCoordinator, kerr.NotCoordinator},
	{groups.ErrCoordinatorLoading, kerr.CoordinatorLoadInProgress},
	{groups.ErrCoordinatorFailed, kerr.CoordinatorNotAvailable},
	{groups.ErrInvalidGroupName, kerr.InvalidGroupID},
	{groups.ErrAssignmentTooLarge, kerr.UnknownServerError},
	{groups.ErrMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{groups.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{groups.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{groups.ErrInvalidOffset, kerr.OffsetOutOfRange},
	{groups.ErrOffsetRegression, kerr.OffsetOutOfRange},
	{groups.ErrGroupNotEmpty, kerr.NonEmptyGroup},
	{groups.ErrUnknownGroup, kerr.GroupIDNotFound},
	{groups.ErrGroupSubscribed, kerr.GroupSubscribedToTopic},
	{groups.ErrInvalidRequest, kerr.InvalidRequest},
	{transport.ErrNotCoordinator, kerr.NotCoordinator},
	{transport.ErrInvalidGroupName, kerr.InvalidGroupID},
}

// groupCode is the Kafka code of a group request's error: unauthorized
// is GROUP_AUTHORIZATION_FAILED (topic, for a commit's offset: per
// offset), and what the coordinator could not write or confirm is
// COORDINATOR_NOT_AVAILABLE, so the client looks for the coordinator
// again.
func (s *Server) groupCode(err error, topic bool) int16 {
	if err == nil {
		return 0
	}
	for _, g := range groupCodes {
		if errors.Is(err, g.err) {
			return g.code.Code
		}
	}
	if errors.Is(err, transport.ErrUnauthorized) || s.code(err) == kerr.TopicAuthorizationFailed.Code {
		if topic {
			return kerr.TopicAuthorizationFailed.Code
		}
		return kerr.GroupAuthorizationFailed.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return kerr.CoordinatorNotAvailable.Code
	}
	if c := s.code(err); c == kerr.UnknownTopicOrPartition.Code || c == kerr.InvalidRequest.Code {
		return c
	}
	s.log.Debug("a group request failed", "err", err)
	return kerr.CoordinatorNotAvailable.Code
}

// findCoordinator names each group's coordinator, at its endpoint on
// this listener. A coordinator not known yet (no leader, the offsets
// topic being created) is COORDINATOR_NOT_AVAILABLE, which every client
// retries.
func (s *Server) findCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = key, -1, -1
		if req.CoordinatorType != 0 {
			c.ErrorCode = kerr.InvalidRequest.Code
			c.ErrorMessage = kmsg.StringPtr("only group coordinators: gostream has no transactions")
		} else if err := s.coordinatorOf(ctx, key, &c); err != nil {
			c.ErrorCode = s.groupCode(err, false)
			if c.ErrorCode == kerr.NotCoordinator.Code {
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
			c.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return resp, nil
}

// errNoCoordinator: the group's coordinator is not known, or has no
// endpoint on this listener.
var errNoCoordinator = errors.New("kafkaapi: the group's coordinator is not available")

func (s *Server) coordinatorOf(ctx context.Context, group string, c *kmsg.FindCoordinatorResponseCoordinator) error {
	fc, err := s.cfg.Core.FindCoordinator(ctx, principalOf(ctx), group)
	if err != nil {
		return err
	}
	meta, _, err := s.cfg.Core.Metadata(principalOf(ctx), []string{})
	if err != nil || fc.Leader < 0 {
		return errNoCoordinator
	}
	for _, e := range s.cfg.Endpoints(meta, s.cfg.Listener) {
		if e.Broker == fc.Leader {
			c.NodeID, c.Host, c.Port = e.Broker, e.Host, e.Port
			return nil
		}
	}
	return errNoCoordinator
}

// nullableFrom is s as a nullable string, null when empty.
func nullableFrom(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// joinGroup answers a JoinGroup once the member's join phase completed.
func (s *Server) joinGroup(ctx context.Context, clientID string, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	j := groups.ClassicJoin{Group: req.Group, MemberID: req.MemberID, ProtocolType: req.ProtocolType,
		SessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond, RequireMemberID: req.Version >= 4}
	if req.Version >= 1 {
		j.RebalanceTime = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.InstanceID != nil {
		j.InstanceID = *req.InstanceID
	}
	j.ClientID = clientID
	if st, ok := ctx.Value(connKey{}).(*connState); ok {
		j.ClientHost = "/" + st.host
	}
	for _, p := range req.Protocols {
		j.Protocols = append(j.Protocols, groups.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	res, err := s.cfg.Core.JoinGroup(ctx, principalOf(ctx), j)
	resp.MemberID = res.MemberID
	if err != nil {
		resp.ErrorCode = s.groupCode(err, false)
		resp.Generation = -1
		if req.Version < 7 {
			resp.Protocol = kmsg.StringPtr("")
		}
		s.log.Debug("JoinGroup refused", "group", req.Group, "member", req.MemberID, "err", err)
		return resp, nil
	}
	resp.Generation, resp.LeaderID = res.Generation, res.Leader
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, nullableFrom(m.InstanceID)
		if len(m.Protocols) > 0 {
			rm.ProtocolMetadata = m.Protocols[0].Metadata
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// emptyConsumerAssignment is the consumer protocol's assignment of no
// partitions (version 0, no topics, no user data): what a member of a
// "consumer" group the leader gave nothing gets, as franz-go cannot read
// an assignment of no bytes.
var emptyConsumerAssignment = []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}

// syncGroup answers a SyncGroup once the generation's assignments are set
// and acknowledged.
func (s *Server) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	sy := groups.ClassicSync{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.InstanceID != nil {
		sy.InstanceID = *req.InstanceID
	}
	if req.ProtocolType != nil {
		sy.ProtocolType = *req.ProtocolType
	}
	if req.Protocol != nil {
		sy.Protocol = *req.Protocol
	}
	if len(req.GroupAssignment) > 0 {
		sy.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			sy.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	res, err := s.cfg.Core.SyncGroup(ctx, principalOf(ctx), sy)
	if err != nil {
		resp.ErrorCode = s.groupCode(err, false)
		resp.MemberAssignment = []byte{}
		s.log.Debug("SyncGroup refused", "group", req.Group, "member", req.MemberID, "err", err)
		return resp, nil
	}
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr(res.ProtocolType), kmsg.StringPtr(res.Protocol)
	resp.MemberAssignment = res.Assignment
	if len(res.Assignment) == 0 && res.ProtocolType == "consumer" {
		resp.MemberAssignment = slices.Clone(emptyConsumerAssignment)
	}
	return resp, nil
}

func (s *Server) heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	resp.ErrorCode = s.groupCode(s.cfg.Core.KafkaHeartbeat(ctx, principalOf(ctx), req.Group, req.MemberID, instance, req.Generation), false)
	return resp, nil
}

func (s *Server) leaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var leaving []groups.ClassicLeaving
	if req.Version < 3 {
		leaving = []groups.ClassicLeaving{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			l := groups.ClassicLeaving{MemberID: m.MemberID}
			if m.InstanceID != nil {
				l.InstanceID = *m.InstanceID
			}
			leaving = append(leaving, l)
		}
	}
	errs, err := s.cfg.Core.LeaveGroup(ctx, principalOf(ctx), req.Group, leaving)
	if err != nil {
		resp.ErrorCode = s.groupCode(err, false)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = s.groupCode(errs[0], false)
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, s.groupCode(errs[i], false)
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// offsetCommit begins an OffsetCommit: its offsets are checked and
// appended now, in the order the connection's requests are read, and
// made durable while the requests after it are read and begun; its
// answer is written in its turn (a client's commits to several groups on
// one connection are replicated together, not one after another).
func (s *Server) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) reply {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	cm := groups.ClassicCommit{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation}
	if req.Version == 0 {
		cm.Generation = -1
	}
	if req.InstanceID != nil {
		cm.InstanceID = *req.InstanceID
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := groups.ClassicOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			cm.Offsets = append(cm.Offsets, o)
		}
	}
	wait, err := s.cfg.Core.BeginKafkaCommit(ctx, principalOf(ctx), cm)
	if err != nil {
		return func(context.Context) (response, error) { return kresp(s.offsetCommitAnswer(req, resp, nil, err)), nil }
	}
	// The wait runs now, beside the requests read after this one: the
	// leader's own fsync of the offsets is made in it, so a commit
	// waited for only in its turn would not be durable before the
	// answers ahead of it are written. It ends with the connection
	// (ctx) at the latest.
	var (
		errs []error
		werr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		errs, werr = wait(ctx)
	}()
	return func(context.Context) (response, error) {
		<-done
		return kresp(s.offsetCommitAnswer(req, resp, errs, werr)), nil
	}
}

// offsetCommitAnswer fills resp in: err for every offset of req, else
// errs, one per offset.
func (s *Server) offsetCommitAnswer(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, errs []error, err error) *kmsg.OffsetCommitResponse {
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			if err != nil {
				rp.ErrorCode = s.groupCode(err, false)
			} else {
				rp.ErrorCode = s.groupCode(errs[i], true)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if err != nil {
		s.log.Debug("OffsetCommit refused", "group", req.Group, "member", req.MemberID, "generation", req.Generation, "err", err)
	}
	return resp
}

// offsetFetch answers each group's committed offsets of the partitions
// asked (of every partition committed, with no topics named): -1 for a
// partition with none, and for a group that does not exist.
func (s *Server) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var topics map[string][]int32
			if g.Topics != nil {
				topics = map[string][]int32{}
				for _, t := range g.Topics {
					topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
				}
			}
			parts, err := s.fetchOffsets(ctx, g.Group, topics)
			rg.ErrorCode = s.groupCode(err, false)
			for _, pt := range parts {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = pt.topic
				for _, p := range pt.parts {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, -1, kmsg.StringPtr(p.Metadata)
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	var topics map[string][]int32
	if req.Topics != nil || req.Version < 2 {
		topics = map[string][]int32{}
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
	}
	parts, err := s.fetchOffsets(ctx, req.Group, topics)
	code := s.groupCode(err, false)
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	for _, pt := range parts {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = pt.topic
		for _, p := range pt.parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, -1, kmsg.StringPtr(p.Metadata)
			if req.Version < 2 {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

type fetchedOffsets struct {
	topic string
	parts []transport.CommittedOffset
}

// fetchOffsets is group's committed offsets of the partitions named
// (nil: every partition committed), each partition named and not
// committed at -1. On an error, the partitions named, at -1.
func (s *Server) fetchOffsets(ctx context.Context, group string, topics map[string][]int32) ([]fetchedOffsets, error) {
	req := &transport.OffsetFetchRequest{Group: group}
	for t := range topics {
		req.Topics = append(req.Topics, t)
	}
	slices.Sort(req.Topics)
	resp, err := s.cfg.Core.CommittedOffsets(ctx, principalOf(ctx), req)
	committed := map[string]map[int32]transport.CommittedOffset{}
	var order []string
	if err == nil {
		for _, o := range resp.Offsets {
			if committed[o.Topic] == nil {
				committed[o.Topic] = map[int32]transport.CommittedOffset{}
				order = append(order, o.Topic)
			}
			committed[o.Topic][o.Partition] = o
		}
	}
	if topics == nil {
		var out []fetchedOffsets
		for _, t := range order {
			ft := fetchedOffsets{topic: t}
			for _, p := range slices.Sorted(maps.Keys(committed[t])) {
				ft.parts = append(ft.parts, committed[t][p])
			}
			out = append(out, ft)
		}
		return out, err
	}
	var out []fetchedOffsets
	for _, t := range req.Topics {
		ft := fetchedOffsets{topic: t}
		for _, p := range topics[t] {
			o, ok := committed[t][p]
			if !ok {
				o = transport.CommittedOffset{Topic: t, Partition: p, Offset: -1}
			}
			ft.parts = append(ft.parts, o)
		}
		out = append(out, ft)
	}
	return out, err
}

// listGroups lists the groups this node coordinates; clients ask every
// node. A state filter (v4) keeps the groups in those states.
func (s *Server) listGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	gs, err := s.cfg.Core.KafkaGroups(ctx, principalOf(ctx))
	if err != nil {
		resp.ErrorCode = s.groupCode(err, false)
		return resp, nil
	}
	for _, g := range gs {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(st string) bool { return strings.EqualFold(strings.TrimSpace(st), g.State) }) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = g.Name, g.ProtocolType, g.State
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// describeGroups describes each group: an unknown one is Dead, with no
// error (as Kafka answers up to v5).
func (s *Server) describeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		g, err := s.cfg.Core.KafkaDescribeGroup(ctx, principalOf(ctx), name)
		switch {
		case errors.Is(err, groups.ErrUnknownGroup):
			rg.State = "Dead"
		case err != nil:
			rg.ErrorCode = s.groupCode(err, false)
		default:
			rg.State, rg.ProtocolType, rg.Protocol = g.State, g.ProtocolType, g.Protocol
			for _, m := range g.Members {
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, nullableFrom(m.InstanceID), m.ClientID, m.ClientHost
				rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
				if rm.ProtocolMetadata == nil {
					rm.ProtocolMetadata = []byte{}
				}
				if rm.MemberAssignment == nil {
					rm.MemberAssignment = []byte{}
				}
				rg.Members = append(rg.Members, rm)
			}
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// deleteGroups deletes each group that has no members, with its
// committed offsets.
func (s *Server) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		rg.ErrorCode = s.groupCode(s.cfg.Core.DeleteGroup(ctx, principalOf(ctx), name), false)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// offsetDelete deletes a group's committed offsets of the partitions
// named: an error for the group (and no topics), or one per partition.
func (s *Server) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	var tps []groups.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, groups.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	errs, err := s.cfg.Core.KafkaDeleteOffsets(ctx, principalOf(ctx), req.Group, tps)
	if err != nil {
		resp.ErrorCode = s.groupCode(err, false)
		s.log.Debug("OffsetDelete refused", "group", req.Group, "err", err)
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, s.groupCode(errs[i], true)
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
