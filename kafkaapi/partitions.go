package kafkaapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/metadata"
	"gostream/transport"
)

// createPartitions grows each topic named through the core, which
// forwards the change to the active controller from any node (franz-go
// sends it to the controller, older clients to any broker), as `topic
// alter --partitions` does; ValidateOnly is its dry run. Errors are per
// topic, with Kafka's codes: a topic named twice is INVALID_REQUEST and
// nothing is done to it (answered once, as Kafka does), a count that does
// not grow the topic INVALID_PARTITIONS, replica lists that cannot be
// used INVALID_REPLICA_ASSIGNMENT, a stream's or an internal topic
// INVALID_REQUEST, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, and what
// the principal may not alter TOPIC_AUTHORIZATION_FAILED.
func (s *Server) createPartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(req.TimeoutMillis))
	defer cancel()
	named := map[string]int{}
	for _, t := range req.Topics {
		named[t.Topic]++
	}
	principal := principalOf(ctx)
	answered := map[string]bool{}
	for _, t := range req.Topics {
		if answered[t.Topic] {
			continue
		}
		answered[t.Topic] = true
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code int16, msg string) { rt.ErrorCode, rt.ErrorMessage = code, kmsg.StringPtr(msg) }
		cr := transport.CreatePartitionsRequest{Topic: t.Topic, Count: t.Count, DryRun: req.ValidateOnly, Requester: requesterOf(ctx)}
		for _, a := range t.Assignment {
			cr.Assignments = append(cr.Assignments, a.Replicas)
		}
		switch {
		case named[t.Topic] > 1:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %s is named %d times in the request", t.Topic, named[t.Topic]))
		default:
			if err := s.checkAssignments(principal, cr); err != nil {
				fail(s.growCode(err), err.Error())
				break
			}
			if _, err := s.cfg.Core.GrowTopic(ctx, principal, cr); err != nil {
				fail(s.growCode(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// checkAssignments checks a request's replica lists against this node's
// metadata, once the principal may alter the topic, so that lists that
// cannot be used are INVALID_REPLICA_ASSIGNMENT also when the controller
// is on another node (whose refusal arrives as InvalidRequest); the
// controller checks them again.
func (s *Server) checkAssignments(principal string, cr transport.CreatePartitionsRequest) error {
	if len(cr.Assignments) == 0 {
		return nil
	}
	if err := s.cfg.Core.Authorize(principal, metadata.OpAlter, metadata.ResourceTopic, cr.Topic); err != nil {
		return err
	}
	meta, _, err := s.cfg.Core.Metadata(principal, nil)
	if err != nil {
		return nil // the controller answers
	}
	t := meta.Topic(cr.Topic)
	if t == nil || int(cr.Count) <= len(t.Partitions) {
		return nil // the controller's refusal says why
	}
	return meta.CheckAssignments(cr.Assignments, len(t.Partitions), int(cr.Count), t.ReplicationFactor)
}

// growCode is the Kafka code of a refusal of createPartitions.
func (s *Server) growCode(err error) int16 {
	if errors.Is(err, metadata.ErrInvalidAssignment) {
		return kerr.InvalidReplicaAssignment.Code
	}
	return s.code(err)
}

// requesterOf names a Kafka client in the audit trail: its principal, if
// it authenticated, at its address.
func requesterOf(ctx context.Context) string {
	st, ok := ctx.Value(connKey{}).(*connState)
	if !ok {
		return "kafka client"
	}
	if st.principal != "" {
		return fmt.Sprintf("%s@%s (kafka)", st.principal, st.host)
	}
	return st.host + " (kafka)"
}
