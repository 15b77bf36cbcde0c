package node

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"gostream/kafkaapi"
	"gostream/metadata"
	"gostream/rpcapi"
	"gostream/transport"
)

// listenKafka binds the node's Kafka listeners.
func (n *Node) listenKafka() ([]net.Listener, error) {
	var lns []net.Listener
	for _, l := range n.kafka {
		ln, err := net.Listen("tcp", l.Listen)
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			return nil, fmt.Errorf("%w on kafka listener %s (%s): %w", ErrCannotListen, l.Name, l.Listen, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// serveKafka serves Kafka's protocol on each listener (package kafkaapi),
// each with its own connection limits, in goroutines that run starts, and
// returns the servers for the node to close.
func (n *Node) serveKafka(lns []net.Listener, run func(func(context.Context) error)) []*kafkaapi.Server {
	var servers []*kafkaapi.Server
	for i, ln := range lns {
		l := n.kafka[i]
		log := n.logger.Named("kafka").With("listener", l.Name)
		limits := transport.NewConnLimiter(transport.ConnLimits{
			MaxConns: n.cfg.MaxConns, MaxConnsPerAddr: n.cfg.MaxConnsPerAddr, Logger: log,
			OnRefused: func(r transport.Refusal) { n.refusals.record("kafka", r) },
		})
		s := kafkaapi.New(kafkaapi.Config{
			Broker: n.cfg.ID, Listener: l.Name, Core: n.core, Endpoints: kafkaEndpoints,
			MaxRequestBytes: transport.FrameLimit(n.cfg.MaxBatchBytes), IdleTimeout: n.cfg.IdleTimeout,
			Classify: rpcapi.WireError, Logger: log,
		})
		servers = append(servers, s)
		limited := transport.LimitListener(ln, limits)
		run(func(context.Context) error {
			if err := s.Serve(limited); err != nil {
				return fmt.Errorf("kafka server on %s: %w", ln.Addr(), err)
			}
			return nil
		})
	}
	return servers
}

// kafkaEndpoints are the brokers' addresses on a Kafka listener, as the
// metadata has them; a broker without that listener is left out.
func kafkaEndpoints(meta *metadata.Cluster, listener string) []kafkaapi.Endpoint {
	var out []kafkaapi.Endpoint
	for _, b := range meta.Brokers {
		addr, ok := b.KafkaEndpoint(listener)
		if !ok {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		out = append(out, kafkaapi.Endpoint{Broker: b.ID, Host: host, Port: int32(p)})
	}
	return out
}

func kafkaAddrs(lns []net.Listener) string {
	var parts []string
	for _, ln := range lns {
		parts = append(parts, ln.Addr().String())
	}
	return strings.Join(parts, ",")
}
