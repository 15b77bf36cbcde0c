package client

import (
	"context"
	"fmt"

	"gostream/transport"
)

// Moving replicas (docs/reassignment.md): the requests and answers have
// one definition, in package transport; these names are the client's.
type (
	MovePlan        = transport.MovePlan
	PlannedMove     = transport.PlannedMove
	ReassignRequest = transport.ReassignRequest
	ReassignStatus  = transport.ReassignStatus
	MoveStatus      = transport.MoveStatus
	CopyStatus      = transport.CopyStatus
)

// Reassign asks the controller to move the replicas of the partitions of
// req.Plan (a dry run unless req.Execute), or with req.Cancel to roll
// back their moves under way. The plan is checked whole: one wrong
// partition refuses it all, and the error names every one. Started
// moves go on in the background; ReassignStatus follows them.
func (c *Client) Reassign(ctx context.Context, req ReassignRequest) (ChangeReport, error) {
	if req.Plan.Version == 0 {
		req.Plan.Version = transport.MovePlanVersion
	}
	what := "reassign"
	if req.Cancel {
		what = "cancel the moves"
	}
	var rep ChangeReport
	if err := c.operatorJSON(ctx, transport.APIReassign, !req.Execute && !req.Cancel, req, &rep); err != nil {
		return ChangeReport{}, fmt.Errorf("%s: %w", what, err)
	}
	return rep, nil
}

// ReassignStatus lists the moves under way (of topic, or of every topic
// when empty), with each copy's progress as its leader counts it.
func (c *Client) ReassignStatus(ctx context.Context, topic string) (ReassignStatus, error) {
	var st ReassignStatus
	if err := c.operatorCall(ctx, transport.APIReassignStatus, transport.ReassignStatusRequest{Topic: topic}, &st); err != nil {
		return ReassignStatus{}, fmt.Errorf("reassign status: %w", err)
	}
	return st, nil
}
