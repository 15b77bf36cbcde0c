package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gostream/controller"
	"gostream/metadata"
	"gostream/transport"
)

// adminWait bounds a stream's topic change at the controller, besides
// ForwardTimeout.
const adminWait = 10 * time.Second

// createTopic asks the controller for the topic of a stream: created, or
// the one there.
func (s *Server) createTopic(ctx context.Context, topic string, st *metadata.Stream) (*controller.StreamResult, error) {
	if c := s.cfg.Controller(); c != nil {
		return c.CreateStream(ctx, topic, s.cfg.ReplicationFactor, st)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return s.admin(ctx, &transport.StreamAdminRequest{Op: "create", Topic: topic, ReplicationFactor: int32(s.cfg.ReplicationFactor), Stream: raw})
}

// deleteTopic asks the controller to delete a stream's topic: the
// incarnation id, or with id "" whichever is there.
func (s *Server) deleteTopic(ctx context.Context, topic, id string) (*controller.StreamResult, error) {
	if c := s.cfg.Controller(); c != nil {
		return c.DeleteStream(ctx, topic, id)
	}
	return s.admin(ctx, &transport.StreamAdminRequest{Op: "delete", Topic: topic, TopicID: id})
}

// admin sends a stream's topic change to the controller.
func (s *Server) admin(ctx context.Context, req *transport.StreamAdminRequest) (*controller.StreamResult, error) {
	var resp transport.StreamAdminResponse
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ForwardTimeout+adminWait)
	defer cancel()
	if ctrl, err := s.cfg.CallController(cctx, transport.APIStreamAdmin, req, &resp); err != nil {
		return nil, fmt.Errorf("ask the controller %s: %w", ctrl, err)
	}
	var res controller.StreamResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return nil, fmt.Errorf("%w: the controller's answer: %v", transport.ErrMalformed, err)
	}
	return &res, nil
}

// ServeAdmin does a stream's topic change another broker asked c, the
// active controller, for (transport.APIStreamAdmin).
func ServeAdmin(ctx context.Context, c *controller.Controller, r *transport.StreamAdminRequest) (*transport.StreamAdminResponse, error) {
	var res *controller.StreamResult
	var err error
	switch r.Op {
	case "create":
		st := &metadata.Stream{}
		if err := json.Unmarshal(r.Stream, st); err != nil {
			return nil, fmt.Errorf("%w: stream metadata: %v", transport.ErrInvalidRequest, err)
		}
		res, err = c.CreateStream(ctx, r.Topic, int(r.ReplicationFactor), st)
	case "delete":
		res, err = c.DeleteStream(ctx, r.Topic, r.TopicID)
	default:
		err = fmt.Errorf("%w: stream admin operation %q", transport.ErrInvalidRequest, r.Op)
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &transport.StreamAdminResponse{Result: raw}, nil
}
