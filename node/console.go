package node

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"

	"gostream/client"
	"gostream/console"
	"gostream/httpapi"
	"gostream/metadata"
)

// console builds the web console (docs/console.md): a front end that
// reads and changes the cluster through a client of its own, opened as
// this node on first use, after checking each request's principal with
// this node's authorizer.
// The returned func closes the console and then that client, once the
// HTTP server is done.
func (n *Node) console(log hclog.Logger) (*console.Server, func()) {
	cc := &consoleClient{n: n, log: log}
	cfg := console.Config{
		NodeID:    n.cfg.ID,
		Version:   n.cfg.Version,
		Client:    cc.get,
		Security:  n.cfg.Security.AuthOn(),
		Principal: httpapi.Principal,
		Logger:    log,
		// The charts sample this node's own counters from its start.
		Counters:       n.metrics.consoleCounters,
		SeriesInterval: n.cfg.UISeriesInterval,
		Registerer:     n.metrics.registry,
	}
	if n.sec.Authorizing() {
		cfg.Authorize = func(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error {
			return n.sec.Authorize(principal, op, rt, name)
		}
	}
	srv := console.New(cfg)
	return srv, func() {
		srv.Close()
		cc.close()
	}
}

// consoleClient is the console's client of the cluster, opened when first
// asked for: at start the node may not serve yet.
type consoleClient struct {
	n   *Node
	log hclog.Logger

	mu sync.Mutex
	c  *client.Client
}

func (cc *consoleClient) get(ctx context.Context) (*client.Client, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.c != nil {
		return cc.c, nil
	}
	cfg := client.Config{Bootstrap: []string{cc.n.cfg.Advertise}, Logger: cc.log.Named("client")}
	if tc := cc.n.sec.ClientTLS(); tc != nil {
		cfg.TLS = tc()
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cc.c = c
	return c, nil
}

func (cc *consoleClient) close() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.c != nil {
		cc.c.Close()
		cc.c = nil
	}
}
