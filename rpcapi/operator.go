package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/controller"
	"gostream/transport"
)

// Handlers of the operator APIs: each decodes its JSON request and hands
// it to the controller (package controller), which answers with a JSON
// report (transport/operator_report.go).

func (h *Handler) failover(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.FailoverRequest) (any, error) {
		return c.Failover(ctx, r)
	})
}

func (h *Handler) electLeaders(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.ElectLeadersRequest) (any, error) {
		return c.ElectLeaders(ctx, r)
	})
}

func (h *Handler) recover(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.RecoverRequest) (any, error) {
		if r.Broker <= 0 {
			return nil, fmt.Errorf("%w: name the broker to recover", transport.ErrInvalidRequest)
		}
		return c.Recover(ctx, r)
	})
}

func (h *Handler) replaceBroker(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.FailoverRequest) (any, error) {
		return c.ReplaceBroker(ctx, r)
	})
}

func (h *Handler) reassign(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.ReassignRequest) (any, error) {
		return c.Reassign(ctx, r)
	})
}

func (h *Handler) reassignStatus(req *transport.Request) transport.Reply {
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.ReassignStatusRequest) (any, error) {
		return c.ReassignStatus(ctx, r)
	})
}

func (h *Handler) restoreMetadata(req *transport.Request) transport.Reply {
	// A restore answers with its report also when it refuses: the report
	// shows the copies it found.
	return operatorCall(h, req, func(ctx context.Context, c *controller.Controller, r transport.RestoreRequest) (any, error) {
		rep, err := c.RestoreMetadata(ctx, r)
		if err != nil {
			return nil, err
		}
		return rep, nil
	})
}

func (h *Handler) history(req *transport.Request) transport.Reply {
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(context.Context) (transport.Message, error) {
		evs, err := c.History()
		if err != nil {
			return nil, err
		}
		return jsonReply(map[string]any{"events": evs}, nil)
	}
}

// requester is what every operator request carries: who asked.
type requester interface {
	transport.FailoverRequest | transport.RecoverRequest | transport.ElectLeadersRequest | transport.RestoreRequest |
		transport.ReassignRequest | transport.ReassignStatusRequest
}

// operatorCall decodes an operator request into R, names the connection
// as the requester when the request names none, and runs fn on the
// controller in the reply. An error is the answer, with its code: a
// request of one partition that failed, or a refusal of the whole request.
func operatorCall[R requester](h *Handler, req *transport.Request, fn func(context.Context, *controller.Controller, R) (any, error)) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r R
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err))
	}
	setRequester(&r, req.RemoteAddr)
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return func(ctx context.Context) (transport.Message, error) {
		return jsonReply(fn(ctx, c, r))
	}
}

func setRequester(r any, addr string) {
	var p *string
	switch r := r.(type) {
	case *transport.FailoverRequest:
		p = &r.Requester
	case *transport.RecoverRequest:
		p = &r.Requester
	case *transport.ElectLeadersRequest:
		p = &r.Requester
	case *transport.RestoreRequest:
		p = &r.Requester
	case *transport.ReassignRequest:
		p = &r.Requester
	}
	if p != nil && *p == "" {
		*p = addr
	}
}

func jsonReply(v any, err error) (transport.Message, error) {
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &transport.JSONMessage{Data: data}, nil
}
