package node

import (
	"context"

	"gostream/controller"
	"gostream/metadata"
	"gostream/replication"
	"gostream/streams"
	"gostream/transport"
)

// newStreams makes the node's Durable Streams server
// (docs/durable-streams.md) over the broker's replicas, the pool and the
// controller.
func (n *Node) newStreams(m *streams.Metrics) *streams.Server {
	return streams.New(streams.Config{
		Broker:          n.cfg.ID,
		Metadata:        func() *metadata.Cluster { return n.broker.Metadata() },
		RefreshMetadata: n.refreshMetadata,
		Lookup: func(topic, id string) (*metadata.Topic, *replication.Partition, error) {
			t, rep, err := n.broker.Lookup(topic, id, 0)
			if rep == nil {
				return t, nil, err
			}
			return t, rep.Part, err
		},
		Call: n.pool.Call,
		Controller: func() *controller.Controller {
			return n.activeController()
		},
		CallController: func(ctx context.Context, api transport.API, req, resp transport.Message) (string, error) {
			c, err := n.callController(ctx, api, req, resp)
			return c.String(), err
		},
		ReplicationFactor: n.cfg.DS.ReplicationFactor,
		ForwardTimeout:    n.cfg.DS.ForwardTimeout,
		Authorizer:        n.sec,
		OnTails:           m.Tails,
		Logger:            n.logger.Named("streams"),
	})
}
