package kafkaapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/groups"
	"gostream/transport"
)

// serverAssignors are the names of ConsumerGroupHeartbeat's server
// assignors taken: Kafka's two, and none. Whichever a member names, the
// assignment is the coordinator's own (range per topic, handed over
// incrementally; docs/kafka-groups.md, "The new protocol").
var serverAssignors = map[string]bool{"uniform": true, "range": true}

// consumerGroupHeartbeat serves Kafka's ConsumerGroupHeartbeat (KIP-848)
// as a member of gostream's own group protocol: topic ids in, topic ids
// out, what the request leaves out taken as unchanged.
func (s *Server) consumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code *kerr.Error, err error) (kmsg.Response, error) {
		resp.ErrorCode, resp.MemberEpoch = code.Code, req.MemberEpoch
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		s.log.Debug("ConsumerGroupHeartbeat refused", "group", req.Group, "member", req.MemberID, "epoch", req.MemberEpoch, "err", err)
		return resp, nil
	}
	switch {
	case req.SubscribedTopicRegex != nil:
		return fail(kerr.InvalidRequest, errors.New("a subscription by regular expression is not served; name the topics"))
	case req.ServerAssignor != nil && !serverAssignors[*req.ServerAssignor]:
		return fail(kerr.UnsupportedAssignor, fmt.Errorf("server assignor %q: the assignors are uniform and range (both are the coordinator's own range assignment)", *req.ServerAssignor))
	}
	b := groups.ConsumerBeat{Group: req.Group, MemberID: req.MemberID, Epoch: req.MemberEpoch, Topics: req.SubscribedTopicNames}
	if req.InstanceID != nil {
		b.InstanceID = *req.InstanceID
	}
	if st, ok := ctx.Value(connKey{}).(*connState); ok {
		b.Host = "/" + st.host
	}
	principal := principalOf(ctx)
	var names map[[16]byte]string
	if req.Topics != nil {
		b.Owned = []transport.TopicPartitions{}
		names = s.topicNames(principal)
		for _, t := range req.Topics {
			// A topic this principal cannot see, or that is gone: it owns
			// nothing of it any more.
			if name, ok := names[t.TopicID]; ok {
				b.Owned = append(b.Owned, transport.TopicPartitions{Topic: name, Partitions: t.Partitions})
			}
		}
	}
	got, err := s.cfg.Core.ConsumerGroupHeartbeat(ctx, principal, b)
	switch {
	case errors.Is(err, groups.ErrFencedMember):
		return fail(kerr.FencedMemberEpoch, err)
	case errors.Is(err, groups.ErrFencedInstanceID) && req.MemberEpoch == transport.JoinEpoch:
		return fail(kerr.UnreleasedInstanceID, err)
	case err != nil:
		code := kerr.ErrorForCode(s.groupCode(err, false))
		return fail(code.(*kerr.Error), err)
	}
	resp.MemberID = kmsg.StringPtr(got.MemberID)
	resp.MemberEpoch = got.MemberEpoch
	resp.HeartbeatIntervalMillis = got.HeartbeatIntervalMs
	switch req.MemberEpoch {
	case groups.KafkaLeaveEpoch, groups.KafkaStaticLeaveEpoch:
		resp.MemberEpoch = req.MemberEpoch
		return resp, nil
	}
	// What the member may own now, every time: a client takes an
	// assignment equal to the one it has as no change.
	ids := map[string][16]byte{}
	for id, name := range names {
		ids[name] = id
	}
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, tp := range got.Assigned {
		id, ok := ids[tp.Topic]
		if !ok {
			id, ok = s.topicIDOf(principal, tp.Topic)
		}
		if !ok {
			continue
		}
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID, at.Partitions = id, tp.Partitions
		a.Topics = append(a.Topics, at)
	}
	resp.Assignment = &a
	return resp, nil
}

// topicNames maps the ids of the topics principal may describe to their
// names.
func (s *Server) topicNames(principal string) map[[16]byte]string {
	_, views, err := s.cfg.Core.Metadata(principal, nil)
	if err != nil {
		return nil
	}
	out := make(map[[16]byte]string, len(views))
	for _, v := range views {
		out[topicID(v.ID)] = v.Name
	}
	return out
}

// topicIDOf is the Kafka id of a topic principal may describe.
func (s *Server) topicIDOf(principal, topic string) ([16]byte, bool) {
	_, views, err := s.cfg.Core.Metadata(principal, []string{topic})
	if err != nil || len(views) == 0 {
		return [16]byte{}, false
	}
	id := topicID(views[0].ID)
	return id, id != [16]byte{}
}
