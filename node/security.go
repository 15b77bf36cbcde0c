package node

import (
	"errors"

	"gostream/metadata"
	"gostream/security/guard"
)

// SecurityConfig configures TLS, gossip encryption, authentication and
// authorization (docs/security.md). Its zero value is none of them.
type SecurityConfig = guard.Config

// ErrSecurityFiles is matched by the errors of loading the TLS, tokens and
// gossip key files at start.
var ErrSecurityFiles = guard.ErrFiles

// loadSecurity reads the files the config names into the node's guard
// (guard.Guard), which its listeners ask who a client is and what it
// may do.
func (n *Node) loadSecurity() error {
	cfg := n.cfg.Security
	g, err := guard.NewGuard(cfg, guard.GuardOptions{
		ACLs: func() []metadata.ACL {
			if m := n.broker.Metadata(); m != nil {
				return m.ACLs
			}
			return nil
		},
		ReloadGossipKeys: func() error {
			if n.gossip == nil {
				return nil
			}
			return n.gossip.reloadKeys(cfg.GossipKeyFile)
		},
		Registry: n.metrics.registry,
		Logger:   n.logger,
	})
	if err != nil {
		return securityFieldError(err)
	}
	n.sec = g
	return nil
}

// securityFieldError names a guard.ConfigError's field as Config does
// (Security.X), for the command line to name its flag.
func securityFieldError(err error) error {
	var ce *guard.ConfigError
	if errors.As(err, &ce) {
		return &FieldError{Field: "Security." + ce.Field, Value: ce.Value, Reason: ce.Reason}
	}
	return err
}
