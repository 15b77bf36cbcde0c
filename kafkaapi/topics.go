package kafkaapi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// createTopics creates each topic on the active controller (this node
// must be it: NOT_CONTROLLER sends the client to the one Metadata names),
// with the configuration keys gostream has (their values are numbers). A
// partition count or replication factor of -1 (Kafka's "the broker's
// default") is refused: name both. ValidateOnly and manual replica
// assignments are refused, not ignored.
func (s *Server) createTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(req.TimeoutMillis))
	defer cancel()
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		rt.NumPartitions, rt.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
		fail := func(code int16, msg string) {
			rt.ErrorCode, rt.ErrorMessage = code, kmsg.StringPtr(msg)
		}
		switch {
		case req.ValidateOnly:
			fail(kerr.InvalidRequest.Code, "validate-only topic creation is not supported")
		case len(t.ReplicaAssignment) > 0:
			fail(kerr.InvalidReplicaAssignment.Code, "replicas are placed by the controller; a manual assignment is not supported")
		case t.NumPartitions <= 0 || t.ReplicationFactor <= 0:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("name the partition count and replication factor (got %d and %d)", t.NumPartitions, t.ReplicationFactor))
		default:
			cr := &transport.CreateTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
			bad := ""
			for _, c := range t.Configs {
				if c.Value == nil {
					continue
				}
				v, err := strconv.ParseInt(*c.Value, 10, 64)
				if err != nil {
					bad = fmt.Sprintf("config %s=%q: gostream's topic configs are numbers", c.Name, *c.Value)
					break
				}
				cr.Config = append(cr.Config, transport.ConfigEntry{Key: c.Name, Value: v})
			}
			if bad != "" {
				fail(kerr.InvalidConfig.Code, bad)
				break
			}
			if _, err := s.cfg.Core.CreateTopic(ctx, principalOf(ctx), cr); err != nil {
				fail(s.code(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deleteTopics deletes each topic named, on the active controller.
func (s *Server) deleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(req.TimeoutMillis))
	defer cancel()
	names := append([]string(nil), req.TopicNames...)
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		if err := s.cfg.Core.DeleteTopic(ctx, principalOf(ctx), name); err != nil {
			rt.ErrorCode, rt.ErrorMessage = s.code(err), kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// timeoutOf is a request's timeout, 30 s when it gives none.
func timeoutOf(ms int32) time.Duration {
	if ms <= 0 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}
