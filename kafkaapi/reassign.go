package kafkaapi

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/metadata"
	"gostream/transport"
)

// Kafka's partition reassignments (KIP-455) are gostream's moves
// (docs/reassignment.md): AlterPartitionReassignments starts a move per
// partition at the default throttle, or with null replicas cancels one;
// ListPartitionReassignments lists the moves under way with the replicas
// they add and remove. Each partition is its own request to the
// controller, as Kafka treats them, with its own error. A partition that
// is moving already is REASSIGNMENT_IN_PROGRESS: gostream does not
// replace a move's target under way (cancel it, then move again).

// alterPartitionAssignments serves AlterPartitionReassignments (45).
func (s *Server) alterPartitionAssignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(req.TimeoutMillis))
	defer cancel()
	principal := principalOf(ctx)
	// One look first: who may ask, and what moves now.
	st, err := s.cfg.Core.ReassignStatus(ctx, principal, "")
	if err != nil {
		code := s.reassignCode(err)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(err.Error())
		for _, t := range req.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	meta, _, _ := s.cfg.Core.Metadata(principal, nil)
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			fail := func(code int16, msg string) { rp.ErrorCode, rp.ErrorMessage = code, kmsg.StringPtr(msg) }
			moving := slices.ContainsFunc(st.Moves, func(m transport.MoveStatus) bool { return m.Topic == t.Topic && m.Partition == p.Partition })
			one := transport.MovePlan{Version: transport.MovePlanVersion, Partitions: []transport.PlannedMove{{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas}}}
			switch {
			case p.Replicas == nil && !moving:
				fail(kerr.NoReassignmentInProgress.Code, "the partition is not being moved")
			case p.Replicas == nil:
				if _, err := s.cfg.Core.Reassign(ctx, principal, transport.ReassignRequest{Plan: one, Cancel: true, Requester: principal}); err != nil {
					fail(s.reassignCode(err), err.Error())
				}
			case moving:
				fail(kerr.ReassignmentInProgress.Code, "the partition is being moved already; cancel that move (null replicas) before another")
			case req.Version >= 1 && !req.AllowReplicationFactorChange && changesCount(meta, t.Topic, p.Partition, len(p.Replicas)):
				fail(kerr.InvalidReplicationFactor.Code, "the new replicas change the replication factor, and the request does not allow it")
			default:
				if _, err := s.cfg.Core.Reassign(ctx, principal, transport.ReassignRequest{Plan: one, Execute: true, Requester: principal}); err != nil {
					fail(s.reassignCode(err), err.Error())
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// changesCount reports whether n replicas is another count than the
// partition has (false when the partition is not known: the move is
// refused for that itself).
func changesCount(meta *metadata.Cluster, topic string, p int32, n int) bool {
	if meta == nil {
		return false
	}
	t := meta.Topic(topic)
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return false
	}
	return len(t.Partitions[p].Replicas) != n
}

// reassignCode is the Kafka code of a move's refusal: a plan that names
// brokers wrongly is INVALID_REPLICA_ASSIGNMENT, a refusal to the
// principal CLUSTER_AUTHORIZATION_FAILED (moves are the cluster's).
func (s *Server) reassignCode(err error) int16 {
	if s.cfg.Classify != nil {
		err = s.cfg.Classify(err)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.Code {
		case transport.CodeUnknownBroker, transport.CodeInvalidReplication, transport.CodeInvalidRequest, transport.CodeBrokerNotAvailable:
			return kerr.InvalidReplicaAssignment.Code
		case transport.CodeUnauthorized:
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return s.code(err)
}

// listPartitionReassignments serves ListPartitionReassignments (46).
func (s *Server) listPartitionReassignments(ctx context.Context, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	st, err := s.cfg.Core.ReassignStatus(ctx, principalOf(ctx), "")
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.reassignCode(err), kmsg.StringPtr(err.Error())
		return resp, nil
	}
	asked := func(topic string, p int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == topic && (t.Partitions == nil || slices.Contains(t.Partitions, p)) {
				return true
			}
		}
		return false
	}
	for _, m := range st.Moves {
		if !asked(m.Topic, m.Partition) {
			continue
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != m.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = m.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = m.Partition
		rp.Replicas = append(slices.Clone(m.Target), without(m.From, m.Target)...)
		rp.AddingReplicas = without(m.Target, m.From)
		rp.RemovingReplicas = without(m.From, m.Target)
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp, nil
}

// without is the brokers of a not in b, in a's order; never nil, as
// Kafka's arrays are not.
func without(a, b []int32) []int32 {
	out := []int32{}
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}
