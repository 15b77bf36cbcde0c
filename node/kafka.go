package node

import (
	"context"
	"fmt"
	"net"
	"strings"

	"gostream/kafkaapi"
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
			Broker: n.cfg.ID, Listener: l.Name, Core: n.core,
			MaxRequestBytes: transport.FrameLimit(n.cfg.MaxBatchBytes), IdleTimeout: n.cfg.IdleTimeout,
			Classify: rpcapi.WireError, AutoCreate: n.autoCreate(), Security: n.kafkaSecurity(), Logger: log,
			Observe: n.metrics.observeKafka,
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

func kafkaAddrs(lns []net.Listener) string {
	var parts []string
	for _, ln := range lns {
		parts = append(parts, ln.Addr().String())
	}
	return strings.Join(parts, ",")
}

// autoCreate is the Kafka listeners' topic auto-creation, nil when off.
func (n *Node) autoCreate() *kafkaapi.AutoCreate {
	a := n.cfg.AutoCreate
	if !a.Enabled {
		return nil
	}
	return &kafkaapi.AutoCreate{Partitions: a.Partitions, ReplicationFactor: a.ReplicationFactor}
}

// kafkaSecurity is what the Kafka listeners ask of clients: TLS with the
// node's certificate when it has one (a verified client certificate
// names the principal), SASL PLAIN and OAUTHBEARER with its tokens,
// authentication before anything but ApiVersions and SASL when it is on,
// and connections ended when their credential stops standing.
func (n *Node) kafkaSecurity() kafkaapi.Security {
	sec := kafkaapi.Security{TLS: n.sec.ServerTLS(), Required: n.cfg.Security.AuthOn(), Sessions: n.sec.KafkaSessions()}
	if n.sec.HasTokens() {
		sec.Token = n.sec.Authenticate
	}
	return sec
}
