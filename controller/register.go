package controller

import (
	"context"
	"fmt"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// Register records a broker's addresses (persisted only when they changed)
// and returns the metadata. A broker id belongs to one storage root: the
// first registration binds the id to the root that made it (and the
// binding is persisted), and the id is refused from any other root with
// ErrDuplicateBroker, naming both, until the operator replaces the broker
// (ReplaceBroker). A registration from the bound root at another address
// is a broker that moved, unless the registered address still answers as
// that broker with that root: then it is a copy of the root running beside
// it, refused too. A broker whose root names another cluster is refused
// with ErrStampMismatch.
func (c *Controller) Register(ctx context.Context, req *transport.RegisterBrokerRequest) (*metadata.Cluster, error) {
	if req.ID <= 0 || req.Addr == "" {
		return nil, fmt.Errorf("%w: broker id %d, address %q", ErrInvalidRequest, req.ID, req.Addr)
	}
	if req.Rack != "" {
		if err := metadata.ValidateRack(req.Rack); err != nil {
			return nil, fmt.Errorf("%w: broker %d: %v", ErrInvalidRequest, req.ID, err)
		}
	}
	cur := c.Metadata()
	c.NoteBroker(req.ID, req.Addr)
	if req.ClusterID != "" && cur.ClusterID != "" && req.ClusterID != cur.ClusterID {
		return nil, fmt.Errorf("%w: broker %d's storage belongs to cluster %q, this is cluster %q", ErrStampMismatch, req.ID, req.ClusterID, cur.ClusterID)
	}
	c.ClaimedEpoch(ctx, req.ID, req.MetadataEpoch)
	if err := c.Refusal(); err != nil {
		return nil, err
	}
	if old, ok := cur.Broker(req.ID); ok && old.RootID != "" {
		switch {
		case req.RootID != old.RootID:
			state := "which does not answer"
			if c.answersAs(ctx, old) {
				state = "which answers"
			}
			return nil, fmt.Errorf("%w: broker %d is registered with storage root %s at %s, %s; this node (%s) has storage root %s. "+
				"A broker id belongs to one storage root: give this node its own --id, or, if broker %d's disk is lost for good, "+
				"stop it and run gostream-ctl broker replace %d", ErrDuplicateBroker,
				req.ID, old.RootID, old.Addr, state, req.Addr, rootIDOrNone(req.RootID), req.ID, req.ID)
		case req.Addr != old.Addr && c.answersAs(ctx, old):
			return nil, fmt.Errorf("%w: broker %d with storage root %s answers at %s, and this node (%s) claims the same root: "+
				"is its data directory a copy? A storage root may run in one process only", ErrDuplicateBroker,
				req.ID, old.RootID, old.Addr, req.Addr)
		}
	}
	b := metadata.Broker{ID: req.ID, Addr: req.Addr, HTTP: req.HTTP, Gossip: req.Gossip, Kafka: req.Kafka, Listeners: req.Listeners, RootID: req.RootID, Rack: req.Rack}
	err := c.change(ctx, fmt.Sprintf("register broker %d", req.ID), func(m *metadata.Cluster) error {
		if old, ok := m.Broker(b.ID); ok && old == b {
			return errNoChange
		}
		if old, ok := m.Broker(b.ID); ok && old.RootID == "" && b.RootID != "" {
			c.logger.Info("broker bound to its storage root", "peer", b.ID, "root_id", b.RootID, "addr", b.Addr)
		}
		m.PutBroker(b)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Metadata(), nil
}

func rootIDOrNone(id string) string {
	if id == "" {
		return "(none: a node of an older version)"
	}
	return id
}

// identityTimeout bounds asking a broker who it is.
const identityTimeout = 1500 * time.Millisecond

// answersAs reports whether b's registered address answers as broker b.ID
// with b's storage root: the broker b names is alive there.
func (c *Controller) answersAs(ctx context.Context, b metadata.Broker) bool {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	var resp transport.DescribeClusterResponse
	if err := c.cfg.Pool.Call(ctx, b.Addr, transport.APIDescribeCluster, &transport.Empty{}, &resp); err != nil {
		return false
	}
	return resp.NodeID == b.ID && (b.RootID == "" || resp.RootID == b.RootID)
}
