package node

import (
	"context"
	"fmt"
	"net"

	"gostream/listeners"
	"gostream/metadata"
	"gostream/transport"
)

// rpcEndpoints are the node's named RPC listeners as clients dial them
// (metadata.Broker.Listeners), "" for one bare --listen.
func (n *Node) rpcEndpoints() string {
	return metadata.FormatEndpoints(listeners.Advertised(n.cfg.rpcNamed))
}

// listenRPCNamed binds the RPC listeners after the first (which serve
// binds as --listen).
func (n *Node) listenRPCNamed() ([]net.Listener, error) {
	var lns []net.Listener
	for _, l := range n.cfg.rpcNamed[min(1, len(n.cfg.rpcNamed)):] {
		ln, err := net.Listen("tcp", l.Listen)
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			return nil, fmt.Errorf("%w on rpc listener %s (%s): %w", ErrCannotListen, l.Name, l.Listen, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// serveRPCNamed serves the native protocol on the listeners after the
// first, each request tagged with its listener's name, so that Metadata
// and FindCoordinator answer with the addresses of that listener.
func (n *Node) serveRPCNamed(rpc *transport.Server, lns []net.Listener, run func(func(context.Context) error)) {
	for i, ln := range lns {
		name := n.cfg.rpcNamed[i+1].Name
		run(func(context.Context) error {
			if err := rpc.ServeNamed(ln, name); err != nil {
				return fmt.Errorf("rpc server on %s (%s): %w", ln.Addr(), name, err)
			}
			return nil
		})
	}
}
