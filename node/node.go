package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"gostream/broker"
	"gostream/console"
	"gostream/controller"
	"gostream/controller/quorum"
	"gostream/durable"
	"gostream/groups"
	"gostream/httpapi"
	"gostream/listeners"
	"gostream/metadata"
	"gostream/producers"
	"gostream/rpcapi"
	"gostream/security/guard"
	"gostream/storage"
	"gostream/streams"
	"gostream/transport"
)

// ShutdownTimeout is how long Run waits, once ctx is canceled, for in-flight
// HTTP requests before it closes their connections.
const ShutdownTimeout = 10 * time.Second

// resumeInterval is how often the logs that failed try to resume.
const resumeInterval = 2 * time.Second

// joinWithoutController is how long a broker that cannot reach the
// controller waits before it joins gossip anyway.
const joinWithoutController = 10 * time.Second

// ErrCannotListen is matched by the error Run returns when it cannot bind one
// of the node's addresses (already in use, not a local address, no
// permission).
var ErrCannotListen = errors.New("node: cannot listen")

// Node is one running gostream process: its storage root, its replicas, the
// controller when it is the controller, and its RPC, gossip and HTTP
// servers.
type Node struct {
	cfg     Config
	logger  hclog.Logger
	root    *storage.Root
	metrics *metrics
	broker  *broker.Replicas
	// core is what the front ends call: the operations, authorized.
	core *broker.Broker
	// kafka are the Kafka protocol's listeners (kafka.go).
	kafka []listeners.Listener
	pool  *transport.Pool
	// controller is the single controller when this node is it, or this
	// candidate's controller (active or not) when --controller lists
	// several candidates and this node among them; nil otherwise.
	controller *controller.Controller
	candidacy  *controller.Candidacy // nil unless this node is a candidate of several
	gossip     *gossip
	refusals   *refusals
	coords     *groups.Host
	producers  *producers.Host
	streams    *streams.Server
	dsMetrics  *streams.Metrics
	sec        *guard.Guard

	// registered is closed once the controller has accepted this broker.
	registered chan struct{}

	// pushes sends each broker the controller's metadata; see pushers.
	pushes *pushers

	// refresh shares one metadata fetch among the requests that ask for
	// one at once (refreshMetadata); refreshed is when the last ended.
	refresh   singleflight.Group
	refreshed atomic.Int64
}

// isController reports whether this node is the single controller.
func (n *Node) isController() bool {
	return len(n.cfg.Controllers) == 1 && n.cfg.Controllers[0].ID == n.cfg.ID
}

// selfBroker is this node as the metadata lists it.
func (n *Node) selfBroker() metadata.Broker {
	return metadata.Broker{ID: n.cfg.ID, Addr: n.cfg.Advertise, HTTP: n.cfg.HTTP, Gossip: n.cfg.Gossip,
		Kafka: metadata.FormatEndpoints(listeners.Advertised(n.kafka)), Listeners: n.rpcEndpoints(), RootID: n.root.Stamp().RootID, Rack: n.cfg.Rack}
}

// activeController is this node's controller if it makes changes now: the
// single controller, or the active candidate; nil otherwise.
func (n *Node) activeController() *controller.Controller {
	if c := n.controller; c != nil && c.Active() {
		return c
	}
	return nil
}

// Run runs one node until ctx is canceled; see the package documentation for
// what it promises. It returns nil after a clean stop.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if err := cfg.checkControllerAddr(); err != nil {
		return err
	}
	log := cfg.Logger.With("node", cfg.ID)

	// The security files first: a node refused for them must not have
	// stamped a new storage root.
	nodeMetrics := newMetrics()
	n := &Node{cfg: cfg, logger: log, metrics: nodeMetrics}
	n.kafka, _ = parseKafkaListeners(cfg) // validated above
	if err := n.loadSecurity(); err != nil {
		return err
	}
	root, err := storage.OpenRoot(cfg.DataDir, cfg.ID, "", log.Named("storage"))
	if err != nil {
		return fmt.Errorf("open storage root %s: %w", cfg.DataDir, err)
	}
	n.root = root
	n.pool = transport.NewPool(transport.ConnConfig{LocalIP: net.ParseIP(cfg.DialSource), TLS: n.sec.ClientTLS()})
	n.refusals = newRefusals(n.metrics)
	n.coords = n.newGroupHost()
	n.producers = producers.New(producers.Config{AckWait: broker.MaxAckWait, Logger: log.Named("producers")})
	n.dsMetrics = streams.NewMetrics(n.metrics.registry)
	n.streams = n.newStreams(n.dsMetrics)
	n.pushes = newPushers(cfg.ID, n.pool, n.activeController, n.logger)
	n.registered = make(chan struct{})
	logOpts := cfg.Log
	logOpts.OnSync = n.metrics.observeFsync
	ps := &peers{pool: n.pool, metadata: func() *metadata.Cluster { return n.broker.Metadata() }}
	rcfg := broker.ReplicasConfig{Broker: cfg.ID, Root: root, LogOptions: logOpts, Defaults: cfg.topicDefaults(), Peers: ps.peer,
		CheckpointHW: true, Logger: log.Named("broker"), OnHosted: func(n int) { nodeMetrics.partitions.Set(float64(n)) },
		OnStaleEpoch: nodeMetrics.staleEpochs.Inc}
	if !n.isController() {
		// Every broker but the single controller caches the metadata, and
		// after a restart leads nothing until the controller answers it.
		rcfg.Cache = metadata.NewStore(filepath.Join(cfg.DataDir, "metadata.json"))
		rcfg.AwaitingController = true
	}
	n.broker = broker.NewReplicas(rcfg)
	n.core = broker.New(broker.Config{Broker: cfg.ID, Replicas: n.broker, MaxBatchBytes: cfg.MaxBatchBytes, Authorizer: n.sec,
		OnProduced: func(bytes int, records int64, replicated time.Duration) {
			if replicated > 0 {
				nodeMetrics.replication.Observe(replicated.Seconds())
			}
			nodeMetrics.bytesIn.Add(float64(bytes))
			nodeMetrics.producedRecords.Add(uint64(records))
		},
		OnFetched: func(bytes int, records int64, fromFile bool) {
			nodeMetrics.bytesOut.Add(float64(bytes))
			if fromFile {
				nodeMetrics.bytesSent.Add(float64(bytes))
			}
			nodeMetrics.fetchedRecords.Add(uint64(records))
		},
		ActiveController: func() (*controller.Controller, error) {
			if c := n.activeController(); c != nil {
				return c, nil
			}
			return nil, n.notControllerError()
		},
		CallController: func(ctx context.Context, api transport.API, req, resp transport.Message) error {
			ctrl, err := n.callController(ctx, api, req, resp)
			if err != nil {
				return fmt.Errorf("ask the controller %s: %w", ctrl, err)
			}
			return nil
		},
		Groups: n.coords, OffsetsPartitions: cfg.OffsetsPartitions, Producers: n.producers})
	n.metrics.registry.MustRegister(newReplicationCollector(cfg.ID, n.broker), groups.NewCollector(n.coords))

	err = n.start()
	if err == nil {
		err = n.serve(ctx)
	}
	if cerr := n.closeCandidacy(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("stop the controller group: %w", cerr))
	}
	if cerr := n.broker.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close logs: %w", cerr))
	}
	n.pool.Close()
	if cerr := root.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close storage root: %w", cerr))
	}
	if err != nil {
		return err
	}
	log.Info("node stopped")
	return nil
}

// start loads the metadata: as the single controller, its own file;
// otherwise the cached copy, if any, so the node serves at once while it
// registers; a candidate also opens its member of the controller group.
func (n *Node) start() error {
	if self, ok := n.cfg.selfCandidate(); ok && !n.isController() {
		return n.startCandidate(self)
	}
	if n.isController() {
		c, err := controller.Open(controller.Config{
			Dir: filepath.Join(n.cfg.DataDir, "controller"), RootCluster: n.root.Stamp().ClusterID, Self: n.selfBroker(),
			Logger: n.logger.Named("controller"), Apply: n.broker.ApplyMetadata, Push: n.pushMetadata, Pool: n.pool,
			WireError: rpcapi.WireError,
		})
		if err != nil {
			return err
		}
		n.controller = c
		// Metadata older than a broker's (an old copy put back) must not
		// reach this node's replicas either: they would open replicas of
		// topics deleted since, and lead by old epochs.
		c.VerifyEpochs(context.Background())
		if err := c.Refusal(); err != nil {
			n.logger.Error("the controller refuses every change; this node serves no replica until its metadata is restored", "err", err)
			return nil
		}
		return n.broker.ApplyMetadata(c.Metadata())
	}
	return n.startBroker()
}

// startBroker applies the broker's cached metadata, if any.
func (n *Node) startBroker() error {
	meta, err := n.broker.CachedMetadata()
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("cached metadata: %w", err)
	}
	return n.broker.ApplyMetadata(meta)
}

// followController registers this broker with the controller, retrying
// until it is accepted, then polls for metadata it may have missed. It
// returns an error only when the controller refuses this broker for good.
func (n *Node) followController(ctx context.Context) error {
	stamp := n.root.Stamp()
	req := &transport.RegisterBrokerRequest{ID: n.cfg.ID, Addr: n.cfg.Advertise, HTTP: n.cfg.HTTP, Gossip: n.cfg.Gossip,
		ClusterID: stamp.ClusterID, RootID: stamp.RootID, Kafka: metadata.FormatEndpoints(listeners.Advertised(n.kafka)), Listeners: n.rpcEndpoints(),
		Rack: n.cfg.Rack}
	backoff := 200 * time.Millisecond
	warned := false
	for {
		req.MetadataEpoch = -1
		if m := n.broker.Metadata(); m != nil {
			req.MetadataEpoch = m.Epoch
		}
		var blob transport.MetadataBlob
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ctrl, err := n.callController(cctx, transport.APIRegisterBroker, req, &blob)
		cancel()
		if err == nil {
			n.broker.HeardFromController()
			err = n.applyBlob(blob.Metadata, "controller "+ctrl.String())
			if err == nil {
				n.logger.Info("registered with the controller", "controller", ctrl.String())
				if n.gossip != nil {
					n.gossip.setCluster(n.root.Stamp().ClusterID)
				}
				close(n.registered)
				break
			}
		}
		if errors.Is(err, transport.ErrStampMismatch) || errors.Is(err, storage.ErrStampMismatch) || errors.Is(err, transport.ErrDuplicateBroker) {
			return fmt.Errorf("the controller refused this broker: %w", err)
		}
		if !warned {
			n.logger.Warn("cannot register with the controller yet; retrying", "controller", ctrl.String(), "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	t := time.NewTicker(3 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := n.fetchMetadata(ctx); err != nil && ctx.Err() == nil {
			n.logger.Debug("metadata poll failed", "err", err)
		}
	}
}

// fetchMetadata asks the controller for metadata newer than this
// broker's and applies what it is given.
func (n *Node) fetchMetadata(ctx context.Context) error {
	known := int64(-1)
	if m := n.broker.Metadata(); m != nil {
		known = m.Epoch
	}
	var blob transport.MetadataBlob
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ctrl, err := n.callController(cctx, transport.APIFetchMetadata, &transport.FetchMetadataRequest{KnownEpoch: known, BrokerID: n.cfg.ID, Addr: n.cfg.Advertise}, &blob)
	if err == nil && len(blob.Metadata) > 0 {
		err = n.applyBlob(blob.Metadata, "controller "+ctrl.String())
	}
	return err
}

// refreshMinInterval spaces the fetches refreshMetadata makes.
const refreshMinInterval = 200 * time.Millisecond

// refreshMetadata brings this broker's metadata up to the controller's
// now, for a request that found it behind: another broker knows of a
// topic this one does not, or no longer. A broker that missed a push
// otherwise learns of the change only at its next poll, seconds later.
// Requests asking at once share one fetch, and fetches are at least
// refreshMinInterval apart, so a flood of requests for streams that do
// not exist costs the controller little. On the controller it does
// nothing: its metadata is the truth.
func (n *Node) refreshMetadata(ctx context.Context) error {
	if n.activeController() != nil {
		return nil
	}
	if time.Since(time.Unix(0, n.refreshed.Load())) < refreshMinInterval {
		return nil
	}
	_, err, _ := n.refresh.Do("", func() (any, error) {
		defer n.refreshed.Store(time.Now().UnixNano())
		return nil, n.fetchMetadata(context.WithoutCancel(ctx))
	})
	return err
}

// applyBlob parses, validates and applies metadata that came over the wire.
func (n *Node) applyBlob(blob []byte, source string) error {
	meta, err := metadata.Parse(blob, source)
	if err != nil {
		return err
	}
	return n.applyParsed(meta, source)
}

// applyParsed applies metadata that came over the wire, parsed.
func (n *Node) applyParsed(meta *metadata.Cluster, source string) error {
	if !n.isCandidate(meta.ControllerID) {
		return fmt.Errorf("%w: metadata from %s names controller %d, which is not among this node's controller candidates %s", transport.ErrInvalidRequest, source, meta.ControllerID, n.candidateList())
	}
	return n.broker.ApplyMetadata(meta)
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
	kafkaLns, err := n.listenKafka()
	if err != nil {
		rpcLn.Close()
		httpLn.Close()
		return err
	}
	extraLns, err := n.listenRPCNamed()
	if err != nil {
		rpcLn.Close()
		httpLn.Close()
		for _, ln := range kafkaLns {
			ln.Close()
		}
		return err
	}
	scfg := transport.ServerConfig{
		MaxBatchBytes:   cfg.MaxBatchBytes,
		MaxConns:        cfg.MaxConns,
		MaxConnsPerAddr: cfg.MaxConnsPerAddr,
		ConnMemoryBytes: cfg.ConnRequestMemory,
		MemoryBytes:     cfg.RequestMemory,
		IdleTimeout:     cfg.IdleTimeout,
		Logger:          log.Named("rpc"),
		OnConn:          func(d int) { n.metrics.connections.Add(float64(d)) },
		OnRefused:       func(r transport.Refusal) { n.refusals.record("rpc", r) },
		TLS:             n.sec.ServerTLS(),
		RequireAuth:     cfg.Security.AuthOn(),
		OnAuthFailure:   n.sec.OnAuthFailure,
	}
	if n.sec.HasTokens() {
		scfg.Authenticate = n.sec.Authenticate
	}
	if n.sec.HasTLS() {
		scfg.Recheck = n.sec.Stands
	}
	if cd := n.candidacy; cd != nil {
		// The candidates' Raft traffic shares the RPC address.
		scfg.DivertByte, scfg.Divert = quorum.Marker, cd.Divert
	}
	rpc := transport.NewServer(scfg, n.rpcHandler())
	httpLog := log.Named("http")
	httpLimits := transport.NewConnLimiter(transport.ConnLimits{
		MaxConns: cfg.MaxConns, MaxConnsPerAddr: cfg.MaxConnsPerAddr, Logger: httpLog,
		OnRefused: func(r transport.Refusal) { n.refusals.record("http", r) },
	})
	httpLn = transport.LimitListener(httpLn, httpLimits)
	// A gostream client that dialed this address by mistake is told where
	// the RPC address is, at once.
	httpLn = transport.RefuseRPCOnHTTP(httpLn, cfg.Advertise)
	if tc := n.sec.ServerTLS("http/1.1"); tc != nil {
		httpLn = tls.NewListener(httpLn, tc)
	}
	n.metrics.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gostream_request_memory_bytes", Help: "Bytes of RPC requests and responses held (the budget of --request-memory).",
		}, func() float64 { return float64(rpc.MemoryInUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gostream_open_http_connections", Help: "Open HTTP connections.",
		}, func() float64 { return float64(httpLimits.Conns()) }),
	)
	dsHandler := durable.NewHandler(n.streams, durable.Limits{
		MaxBody: cfg.DS.MaxBody, ReadChunk: cfg.DS.ReadChunk, LongPoll: cfg.DS.LongPoll,
		SSEReconnect: cfg.DS.SSEReconnect, MaxLiveReaders: cfg.DS.MaxLiveReaders,
	}, n.dsMetrics)
	hcfg := httpapi.Config{
		NodeID:   cfg.ID,
		Logger:   httpLog,
		Metrics:  promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}),
		Status:   func() any { return n.status(dsHandler.LiveReaders()) },
		Problems: n.refusals.problems,
		Streams:  dsHandler,
	}
	if n.sec.HasTLS() || cfg.Security.AuthOn() {
		hcfg.Authenticate = n.sec.HTTPPrincipal
		dsHandler.SetPrincipal(httpapi.Principal)
	}
	if n.sec.Authorizing() {
		hcfg.AllowDescribe = func(p string) error {
			return n.sec.Authorize(p, metadata.OpDescribe, metadata.ResourceCluster, "")
		}
	}
	if n.sec.HasTLS() {
		dsHandler.SetWatch(n.sec.WatchLive)
	}
	var consoleServer *console.Server
	closeConsole := func() {}
	if !cfg.UIDisabled {
		consoleServer, closeConsole = n.console(httpLog.Named("console"))
		hcfg.Console = consoleServer
	}
	srv := &http.Server{
		Handler: httpapi.New(hcfg),
		// These suit health, metrics and status, which answer at once
		// with a small body and read none, and Durable Streams appends;
		// its live reads set their own write deadlines
		// (http.ResponseController).
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(n.sec.HTTPErrorLog(httpLog), "", 0),
		ConnContext:       n.sec.ConnContext,
	}
	if consoleServer != nil {
		// The console's live tails never end by themselves: they end
		// when the shutdown begins, not when it gives up waiting.
		srv.RegisterOnShutdown(consoleServer.Shutdown)
	}

	stamp := n.root.Stamp()
	gs, err := startGossip(cfg, stamp.RootID, stamp.ClusterID, log.Named("gossip"))
	if err != nil {
		rpcLn.Close()
		httpLn.Close()
		for _, ln := range append(kafkaLns, extraLns...) {
			ln.Close()
		}
		return err
	}
	n.gossip = gs
	if n.controller != nil {
		n.controller.SetGossipPeers(gs.rpcAddrs)
	}

	g, gctx := errgroup.WithContext(ctx)
	// run starts fn in a goroutine of g: the first to return an error
	// cancels gctx for all of them, and g.Wait returns that error.
	run := func(fn func(context.Context) error) { g.Go(func() error { return fn(gctx) }) }
	run(func(ctx context.Context) error {
		// A broker joins the cluster's gossip once the controller has
		// accepted it, so that a process the controller refuses (a used
		// --id) never shows in the others' view; with the controller out
		// of reach it joins after a while anyway, for gossip to show it.
		if !n.isController() {
			select {
			case <-n.registered:
			case <-time.After(joinWithoutController):
			case <-ctx.Done():
				return nil
			}
			gs.setCluster(n.root.Stamp().ClusterID)
		}
		backoff := time.Second
		for len(cfg.Join) > 0 && gs.join(cfg.Join) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
		}
		return nil
	})
	if !n.isController() {
		run(n.followController)
	}
	if n.candidacy != nil {
		run(n.candidacy.ApplyChanges)
		run(n.candidacy.Lead)
	}
	if n.controller != nil {
		// It acts only while this node's controller is the active one.
		run(n.controller.DriveMoves)
	}
	run(n.coords.Run)
	run(n.producers.Run)
	run(n.streams.Run)
	if reload := cfg.Security.Reload; reload != nil {
		run(func(ctx context.Context) error {
			for {
				select {
				case <-reload:
					n.sec.Reload(rpc)
				case <-ctx.Done():
					return nil
				}
			}
		})
	}
	run(func(context.Context) error {
		if err := rpc.Serve(rpcLn); err != nil {
			return fmt.Errorf("rpc server on %s: %w", rpcLn.Addr(), err)
		}
		return nil
	})
	kafkaServers := n.serveKafka(kafkaLns, run)
	n.serveRPCNamed(rpc, extraLns, run)
	run(func(context.Context) error {
		if err := srv.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server on %s: %w", httpLn.Addr(), err)
		}
		return nil
	})
	run(func(ctx context.Context) error {
		t := time.NewTicker(resumeInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n.broker.ResumeFailed(ctx)
			case <-ctx.Done():
				return nil
			}
		}
	})
	run(func(ctx context.Context) error {
		t := time.NewTicker(cfg.HWCheckpointInterval)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-t.C:
				err := n.broker.CheckpointHW()
				if err != nil && !failing {
					log.Warn("cannot checkpoint the high watermarks; retrying", "err", err)
				}
				failing = err != nil
			case <-ctx.Done():
				return nil
			}
		}
	})
	run(func(ctx context.Context) error {
		t := time.NewTicker(cfg.RetentionInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n.broker.ApplyRetention(ctx)
			case <-ctx.Done():
				return nil
			}
		}
	})
	run(func(ctx context.Context) error {
		<-ctx.Done()
		log.Info("node stopping", "reason", context.Cause(ctx))
		gs.leave()
		rpc.Close()
		for _, s := range kafkaServers {
			s.Close()
		}
		// The console first: its client's connections to this node's own
		// HTTP server (idle, or dialed and never used) would hold the
		// server's shutdown (one never used, for five seconds).
		closeConsole()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// Requests still running after the timeout are cut off.
			srv.Close()
			return fmt.Errorf("http server shutdown: %w", err)
		}
		return nil
	})

	clusterID := "(not registered yet)"
	if meta := n.broker.Metadata(); meta != nil {
		clusterID = meta.ClusterID
	}
	log.Info("node started",
		"cluster", clusterID,
		"gossip", cfg.Gossip,
		"data_dir", n.root.Dir(),
		"rpc", rpcLn.Addr().String(),
		"http", httpLn.Addr().String(),
		"kafka", kafkaAddrs(kafkaLns), "rpc_listeners", n.rpcEndpoints(),
		"controller", fmt.Sprint(cfg.Controllers),
		"gomaxprocs", runtime.GOMAXPROCS(0), // the processors Go runs goroutines on (docs/operations.md)
	)
	return g.Wait()
}

// rpcHandler is the node's native RPC API over its core, replicas,
// streams and controller (rpcapi).
func (n *Node) rpcHandler() *rpcapi.Handler {
	cfg := rpcapi.Config{
		ID: n.cfg.ID, MaxBatchBytes: n.cfg.MaxBatchBytes, RootID: n.root.Stamp().RootID,
		Core: n.core, Replicas: n.broker, Streams: n.streams, Security: n.sec,
		Controller: n.activeController, NotController: n.notControllerError,
		IsController: n.isController, Candidacy: func() *controller.Candidacy { return n.candidacy },
		ControllerStatus: n.controllerStatus,
		ApplyMetadata:    n.applyParsed, RefreshMetadata: n.refreshMetadata,
		Audit:          n.audit,
		ObserveRequest: n.metrics.observeRequest,
		Logger:         n.logger,
	}
	cfg.Members = func() []transport.Member {
		var ms []transport.Member
		if n.gossip == nil {
			return nil // not started yet, or no gossip
		}
		for _, m := range n.gossip.members() {
			ms = append(ms, transport.Member{BrokerID: m.BrokerID, Gossip: m.Gossip, State: m.State, RootID: m.RootID})
		}
		return ms
	}
	return rpcapi.New(cfg)
}
