// Package security holds what a node and its clients need to prove who
// they are and to decide what a principal may do (docs/security.md):
//
//   - TLSFiles: a certificate, its key and the cluster's CA read from PEM
//     files, reloaded on demand (SIGHUP), the server and client
//     tls.Configs built from whatever was loaded last, and the check,
//     again, of an open connection's client certificate against it;
//   - Tokens: the bearer tokens file (principals and the SHA-256 of each
//     token), the lookup of a token or of its hash (what a node asks
//     again, after a reload, about its open connections), and the making
//     of a new token;
//   - GossipKeys: the gossip encryption keys file;
//   - Authorizer: superusers and the ACLs of the cluster metadata, the
//     one place that says whether a principal may do an operation on a
//     resource;
//   - the development CA of `gostream-ctl cert init` (certs.go);
//
// Nothing here reads the network. Package security/guard puts these
// together for a node (its Guard), and the node wires that into its
// listeners and the transport.
//
// Invariants:
//
//   - Default deny: the empty principal (no one authenticated) may do
//     nothing, a superuser anything, anyone else what an ACL of the
//     metadata of the moment allows.
//   - Tokens holds only the SHA-256 of each token, as its file does; a
//     lookup compares every entry in constant time, and one hash names
//     one principal.
//   - A reload that fails (or whose new certificate's name the check
//     refuses) keeps what was loaded; a certificate (the CA's aside)
//     that is expired or not yet valid is never loaded.
//   - Each handshake takes the TLS files loaded last, at TLS 1.2 or
//     above; with a CA, a client certificate is verified against it
//     (and required under ClientAuthRequire).
//
// It imports metadata (the ACLs and the principal rule) and nothing else
// of gostream.
package security
