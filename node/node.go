package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gostream/httpapi"
	"gostream/metadata"
	"gostream/storage"
	"gostream/transport"
)

// ShutdownTimeout is how long Run waits, once ctx is canceled, for in-flight
// HTTP requests before it closes their connections.
const ShutdownTimeout = 10 * time.Second

// ErrCannotListen is matched by the error Run returns when it cannot bind one
// of the node's addresses (already in use, not a local address, no
// permission).
var ErrCannotListen = errors.New("node: cannot listen")

// ErrMultiNode is returned for a --controller that names another node:
// joining a multi-node cluster arrives with the cluster issue.
var ErrMultiNode = errors.New("node: joining another controller is not supported yet")

// Node is one running gostream process: its storage root, its replicas, the
// controller when it is the controller, and its RPC and HTTP servers.
type Node struct {
	cfg        Config
	logger     hclog.Logger
	root       *storage.Root
	metrics    *metrics
	broker     *broker
	controller *controller // nil unless this node is the controller
}

// Run runs one node until ctx is canceled; see the package documentation for
// what it promises. It returns nil after a clean stop.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("node", cfg.ID)
	if cfg.Controllers[0].ID != cfg.ID {
		return fmt.Errorf("%w: --controller names broker %d; today every node is a cluster of one", ErrMultiNode, cfg.Controllers[0].ID)
	}

	root, err := storage.OpenRoot(cfg.DataDir, cfg.ID, "", log.Named("storage"))
	if err != nil {
		return fmt.Errorf("open storage root %s: %w", cfg.DataDir, err)
	}
	n := &Node{cfg: cfg, logger: log, root: root, metrics: newMetrics()}
	logOpts := cfg.Log
	logOpts.OnSync = func(d time.Duration) { n.metrics.fsyncDuration.Observe(d.Seconds()) }
	n.broker = newBroker(cfg.ID, root, logOpts, log.Named("broker"), n.metrics)

	err = n.start()
	if err == nil {
		err = n.serve(ctx)
	}
	if cerr := n.broker.close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close logs: %w", cerr))
	}
	if cerr := root.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close storage root: %w", cerr))
	}
	if err != nil {
		return err
	}
	log.Info("node stopped")
	return nil
}

// start loads the metadata (as controller) and opens this node's replicas.
func (n *Node) start() error {
	self := metadata.Broker{ID: n.cfg.ID, Addr: n.cfg.Advertise, HTTP: n.cfg.HTTP, Gossip: n.cfg.Gossip}
	c, err := openController(n.cfg.DataDir, self, n.logger.Named("controller"), n.broker.applyMetadata)
	if err != nil {
		return err
	}
	n.controller = c
	return n.broker.applyMetadata(c.Metadata())
}

// serve binds the node's servers and runs them until ctx is canceled or one
// of them fails.
func (n *Node) serve(ctx context.Context) error {
	cfg, log := n.cfg, n.logger
	rpcLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("%w on rpc address %s: %w", ErrCannotListen, cfg.Listen, err)
	}
	httpLn, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		rpcLn.Close()
		return fmt.Errorf("%w on http address %s: %w", ErrCannotListen, cfg.HTTP, err)
	}
	rpc := transport.NewServer(transport.ServerConfig{
		MaxFrameBytes: cfg.MaxFrameBytes,
		Logger:        log.Named("rpc"),
		OnConn:        func(d int) { n.metrics.connections.Add(float64(d)) },
	}, &rpcHandler{n: n})
	httpLog := log.Named("http")
	srv := &http.Server{
		Handler: httpapi.New(httpapi.Config{
			NodeID:  cfg.ID,
			Logger:  httpLog,
			Metrics: promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}),
			Status:  func() any { return n.status() },
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          httpLog.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}

	g := newGroup(ctx)
	g.run(func(context.Context) error {
		if err := rpc.Serve(rpcLn); err != nil {
			return fmt.Errorf("rpc server on %s: %w", rpcLn.Addr(), err)
		}
		return nil
	})
	g.run(func(context.Context) error {
		if err := srv.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server on %s: %w", httpLn.Addr(), err)
		}
		return nil
	})
	g.run(func(ctx context.Context) error {
		t := time.NewTicker(cfg.RetentionInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n.broker.applyRetention(ctx)
			case <-ctx.Done():
				return nil
			}
		}
	})
	g.run(func(ctx context.Context) error {
		<-ctx.Done()
		log.Info("node stopping", "reason", context.Cause(ctx))
		rpc.Close()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// Requests still running after the timeout are cut off.
			srv.Close()
			return fmt.Errorf("http server shutdown: %w", err)
		}
		return nil
	})

	meta := n.broker.metadata()
	log.Info("node started",
		"cluster", meta.ClusterID,
		"data_dir", n.root.Dir(),
		"rpc", rpcLn.Addr().String(),
		"http", httpLn.Addr().String(),
		"controller", fmt.Sprint(cfg.Controllers),
	)
	return g.wait()
}
