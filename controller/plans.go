package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"gostream/controller/plan"
	"gostream/metadata"
	"gostream/transport"
)

// sizesTimeout bounds asking one broker for its replicas' sizes.
const sizesTimeout = 5 * time.Second

// PlanMoves plans a rebalance or a decommission (package plan) over the
// metadata as it is, with each partition's size as its brokers report it
// (its leader's log, else the largest replica's). It moves nothing: the
// plan is for `partition reassign --plan`. The brokers that do not answer
// get no replica in the plan, and a note names them. Errors: a request
// of another kind, or a decommission that names no broker, matches
// ErrInvalidRequest; a topic that does not exist, metadata.ErrUnknownTopic;
// an unregistered broker, plan.ErrUnknownBroker; a decommission the
// brokers left cannot take, plan.ErrNotEnoughBrokers.
func (c *Controller) PlanMoves(ctx context.Context, req transport.PlanRequest) (*transport.MovePlan, error) {
	switch req.Kind {
	case transport.PlanRebalance:
		if req.Broker != 0 {
			return nil, fmt.Errorf("%w: a rebalance names no broker (broker %d given)", ErrInvalidRequest, req.Broker)
		}
	case transport.PlanDecommission:
		if req.Broker <= 0 {
			return nil, fmt.Errorf("%w: a decommission names the broker to empty", ErrInvalidRequest)
		}
		if len(req.Topics) > 0 {
			return nil, fmt.Errorf("%w: a decommission moves every replica off its broker: it takes no topics", ErrInvalidRequest)
		}
	default:
		return nil, fmt.Errorf("%w: plan kind %q: want %s or %s", ErrInvalidRequest, req.Kind, transport.PlanRebalance, transport.PlanDecommission)
	}
	if err := c.Refusal(); err != nil {
		return nil, err
	}
	meta := c.Metadata()
	for _, t := range req.Topics {
		if meta.Topic(t) == nil {
			return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, t)
		}
	}
	sizes, live, silent := c.partitionSizes(ctx, meta, req.Topics)
	if live == nil {
		live = []int32{} // none answers: nothing may move (nil would be every broker)
	}
	in := plan.Input{Cluster: meta, Sizes: sizes, Targets: live, Topics: req.Topics}
	var p transport.MovePlan
	var err error
	if req.Kind == transport.PlanRebalance {
		p, err = plan.Rebalance(in)
	} else {
		p, err = plan.Decommission(in, req.Broker)
	}
	if err != nil {
		return nil, err
	}
	if len(silent) > 0 {
		note := fmt.Sprintf("%s %s: no replica is planned onto %s, and the partitions only %s count as empty",
			brokerList(silent), doNot(silent), them(silent), holds(silent))
		p.Summary.Notes = append([]string{note}, p.Summary.Notes...)
	}
	return &p, nil
}

func them(ids []int32) string {
	if len(ids) == 1 {
		return "it"
	}
	return "them"
}

func holds(ids []int32) string {
	if len(ids) == 1 {
		return "it holds"
	}
	return "they hold"
}

// partitionSizes asks every registered broker, at once, for the sizes of
// its replicas (of topics, all when empty), and returns each partition's
// size (its leader's replica, else the largest reported), the brokers
// that answered and those that did not, each in id order.
func (c *Controller) partitionSizes(ctx context.Context, meta *metadata.Cluster, topics []string) (sizes map[plan.Key]int64, live, silent []int32) {
	data, err := json.Marshal(transport.ReplicaSizesRequest{Topics: topics})
	if err != nil {
		panic("controller: encode a ReplicaSizesRequest: " + err.Error()) // plain strings always encode
	}
	led := map[plan.Key]int64{}
	largest := map[plan.Key]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range meta.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, sizesTimeout)
			defer cancel()
			var resp transport.JSONMessage
			var rs transport.ReplicaSizes
			err := c.cfg.Pool.Call(cctx, b.Addr, transport.APIReplicaSizes, &transport.JSONMessage{Data: data}, &resp)
			if err == nil {
				err = json.Unmarshal(resp.Data, &rs)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				c.logger.Debug("replica sizes not known", "peer", b.ID, "err", err)
				silent = append(silent, b.ID)
				return
			}
			live = append(live, b.ID)
			for _, r := range rs.Replicas {
				t := meta.Topic(r.Topic)
				if t == nil || r.TopicID != "" && t.ID != "" && r.TopicID != t.ID || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
					continue // another incarnation, or gone since
				}
				k := plan.Key{Topic: r.Topic, Partition: r.Partition}
				if r.Leader {
					led[k] = r.Bytes
				}
				largest[k] = max(largest[k], r.Bytes)
			}
		}()
	}
	wg.Wait()
	for k, n := range led {
		largest[k] = n
	}
	slices.Sort(live)
	slices.Sort(silent)
	return largest, live, silent
}
