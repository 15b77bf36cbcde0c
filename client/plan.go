package client

import (
	"context"
	"fmt"

	"gostream/transport"
)

// The planners' requests and plans have one definition, in package
// transport; these names are the client's for them.
// (MovePlan and PlannedMove are in moves.go.)
type (
	PlanRequest = transport.PlanRequest
	PlanSummary = transport.PlanSummary
	BrokerLoad  = transport.BrokerLoad
)

// PlanRebalance asks the controller for the moves that even out rack
// spread, replicas, preferred leaders and bytes per broker over topics
// (every topic when none), onto the brokers that answer. It moves
// nothing: the plan is for `partition reassign --plan`. A topic that does
// not exist is transport.ErrUnknownTopic. It is retried as reads are.
func (c *Client) PlanRebalance(ctx context.Context, topics ...string) (MovePlan, error) {
	var p MovePlan
	if err := c.operatorJSON(ctx, transport.APIPlanMoves, true, PlanRequest{Kind: transport.PlanRebalance, Topics: topics}, &p); err != nil {
		return MovePlan{}, fmt.Errorf("plan a rebalance: %w", err)
	}
	return p, nil
}

// PlanDecommission asks the controller for the moves that take every
// replica off broker, each to a broker the partition does not hold. The
// controller refuses with transport.ErrInvalidReplication, naming the
// partitions, when the brokers left cannot keep a partition's replica
// count, and with transport.ErrUnknownBroker for a broker not registered.
// It moves nothing and is retried as reads are.
func (c *Client) PlanDecommission(ctx context.Context, broker int32) (MovePlan, error) {
	var p MovePlan
	if err := c.operatorJSON(ctx, transport.APIPlanMoves, true, PlanRequest{Kind: transport.PlanDecommission, Broker: broker}, &p); err != nil {
		return MovePlan{}, fmt.Errorf("plan the decommission of broker %d: %w", broker, err)
	}
	return p, nil
}
