package client

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/transport"
)

// ControllerStatus is one node's part in the controller group
// (docs/controller-raft.md): its mode (single controller, candidate, or
// none) and, for a candidate, its Raft state.
type ControllerStatus = transport.ControllerStatus

// ControllerMember is one member of the controller group.
type ControllerMember = transport.ControllerMember

// ControllerStatus asks the node at addr for its part in the controller
// group. It is one request, not retried.
func (c *Client) ControllerStatus(ctx context.Context, addr string) (ControllerStatus, error) {
	if c.closed() {
		return ControllerStatus{}, ErrClosed
	}
	var resp transport.JSONMessage
	if err := c.call(ctx, addr, 0, transport.APIControllerStatus, &transport.JSONMessage{Data: []byte("{}")}, &resp); err != nil {
		return ControllerStatus{}, fmt.Errorf("controller status of %s: %w", addr, err)
	}
	var st ControllerStatus
	if err := json.Unmarshal(resp.Data, &st); err != nil {
		return ControllerStatus{}, fmt.Errorf("controller status of %s: decode: %w", addr, err)
	}
	return st, nil
}

// ChangeController asks the active controller to transfer the active role
// (transport.ControllerTransfer to req.ID), or to add or remove a
// candidate: a Raft membership change, refused when it would leave the
// group without a quorum. It is sent like the operator commands, and
// returns the active controller's status after the change.
func (c *Client) ChangeController(ctx context.Context, req transport.ControllerChangeRequest) (ControllerStatus, error) {
	var st ControllerStatus
	if err := c.operatorCall(ctx, transport.APIControllerChange, req, &st); err != nil {
		return ControllerStatus{}, fmt.Errorf("controller %s: %w", req.Op, err)
	}
	return st, nil
}
