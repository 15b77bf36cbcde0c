package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gostream/metadata"
	"gostream/transport"
)

// New replicas go only to brokers that answer: a topic or stream created
// while a broker is down would otherwise have partitions led by it, or
// followed by it, that cannot take a write until an operator fails them
// over, and a create that returns "1 of its 2 partitions cannot serve"
// has made a topic anyway. Gossip does not decide this: the controller
// asks each registered broker itself, at once, as a replace does
// (answersAs), just before it places the replicas.

// answering asks every broker registered in meta, at once, whether it
// answers as itself, and returns those that do and those that do not,
// each in id order. This node's own broker answers without a call.
func (c *Controller) answering(ctx context.Context, meta *metadata.Cluster) (live, silent []int32) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range meta.Brokers {
		if b.ID == c.cfg.Self.ID {
			live = append(live, b.ID)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := c.answersAs(ctx, b)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				live = append(live, b.ID)
			} else {
				silent = append(silent, b.ID)
			}
		}()
	}
	wg.Wait()
	slices.Sort(live)
	slices.Sort(silent)
	return live, silent
}

// placeable returns the brokers that answer, to place rf replicas of
// what on, or an error matching wire that names the brokers that do not
// answer when fewer than rf answer. Nothing is created then.
func (c *Controller) placeable(ctx context.Context, what string, rf int, wire error) ([]int32, error) {
	meta := c.Metadata()
	if rf > len(meta.Brokers) {
		// Not an outage: Place says so.
		return meta.BrokerIDs(), nil
	}
	live, silent := c.answering(ctx, meta)
	if len(live) >= rf {
		if len(silent) > 0 {
			c.logger.Info("placing new replicas on the brokers that answer", "what", what, "silent", silent)
		}
		return live, nil
	}
	return nil, fmt.Errorf("%w: %s needs %d brokers that answer, and %d of the %d registered do (%s %s): start them again, or ask for a replication factor of at most %d; nothing was created",
		wire, what, rf, len(live), len(meta.Brokers), brokerList(silent), doNot(silent), len(live))
}

func doNot(ids []int32) string {
	if len(ids) == 1 {
		return "does not answer"
	}
	return "do not answer"
}

func brokerList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	if len(s) == 1 {
		return "broker " + s[0]
	}
	return "brokers " + strings.Join(s, ", ")
}

// notAnswering is the refusal of an internal topic that waits for its
// brokers: retriable, as its users (group coordinators, Durable Streams)
// ask again.
var notAnswering = transport.ErrNotReady
