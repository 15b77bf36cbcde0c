package client

import (
	"context"
	"fmt"

	"gostream/transport"
)

// The autopilot's lease (docs/autopilot.md) has one definition, in
// package transport; these names are the client's for it.
type (
	AutopilotLeaseRequest  = transport.AutopilotLeaseRequest
	AutopilotLeaseResponse = transport.AutopilotLeaseResponse
)

// AutopilotLease asks the active controller for the autopilot's lease
// for req.Holder: to take it or renew it for req.TTLMillis, or with
// req.Release to give it back. The answer says who holds it and until
// when, by the controller's clock; Granted when req.Holder does. Asking
// twice has the effect of asking once, so the request is sent again when
// its answer is lost, as reads are. It is bounded by ctx.
func (c *Client) AutopilotLease(ctx context.Context, req AutopilotLeaseRequest) (AutopilotLeaseResponse, error) {
	var resp AutopilotLeaseResponse
	if err := c.operatorJSON(ctx, transport.APIAutopilotLease, true, req, &resp); err != nil {
		return AutopilotLeaseResponse{}, fmt.Errorf("autopilot lease: %w", err)
	}
	return resp, nil
}
