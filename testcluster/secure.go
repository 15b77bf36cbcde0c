package testcluster

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gostream/client"
	"gostream/security"
	"gostream/transport"
)

// Secure is what Config.Secure makes for a cluster (docs/security.md): a
// CA, a certificate per node (principal nodeK) valid for every loopback
// address the harness uses, one for the operator (admin), a gossip key,
// and a tokens file that accepts the admin token. Nodes run with TLS,
// mutual TLS, gossip encryption and authentication on, node1..nodeN and
// admin as superusers; the harness's own clients and gostream-ctl use
// the admin token over TLS.
type Secure struct {
	Dir        string
	CA         *security.CA
	CAFile     string
	GossipKey  string // file
	TokensFile string
	AdminToken string
	TokenFile  string // holds AdminToken, for gostream-ctl --token-file
	tls        *tls.Config
}

// secureHosts are the addresses node certificates are valid for: every
// loopback address a node may bind or be dialed at (127.0.0.k in a
// network namespace, the proxy's).
func secureHosts() []string {
	hosts := []string{"localhost", "::1", clientSource}
	for k := 1; k <= 16; k++ {
		hosts = append(hosts, fmt.Sprintf("127.0.0.%d", k))
	}
	return hosts
}

// newSecure writes the files of a secure cluster of nodes nodes into dir.
func newSecure(dir string, nodes int) (*Secure, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := security.NewCA("testcluster CA", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	s := &Secure{Dir: dir, CA: ca, CAFile: filepath.Join(dir, "ca.crt"), GossipKey: filepath.Join(dir, "gossip.key"),
		TokensFile: filepath.Join(dir, "tokens"), TokenFile: filepath.Join(dir, "admin.token")}
	if err := os.WriteFile(s.CAFile, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	for k := 1; k <= nodes; k++ {
		if err := s.Issue(fmt.Sprintf("node%d", k), secureHosts(), time.Now().Add(24*time.Hour)); err != nil {
			return nil, err
		}
	}
	if err := s.Issue("admin", nil, time.Now().Add(24*time.Hour)); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.GossipKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	token, line, err := security.NewToken("admin")
	if err != nil {
		return nil, err
	}
	s.AdminToken = token
	if err := os.WriteFile(s.TokensFile, []byte(line+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.TokenFile, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	s.tls, err = security.ClientTLS(s.CAFile, "", "")
	return s, err
}

// Issue writes dir/name.crt and dir/name.key, signed by the cluster's CA.
func (s *Secure) Issue(name string, hosts []string, notAfter time.Time) error {
	is, err := s.CA.Issue(security.IssueOptions{Name: name, Hosts: hosts, NotAfter: notAfter})
	if err != nil {
		return err
	}
	return is.WriteFiles(s.Dir, name)
}

// File is the path of a file in the secure directory.
func (s *Secure) File(name string) string { return filepath.Join(s.Dir, name) }

// nodeArgs are the security flags of node id.
func (s *Secure) nodeArgs(id int32, nodes int) []string {
	supers := []string{"admin"}
	for k := 1; k <= nodes; k++ {
		supers = append(supers, fmt.Sprintf("node%d", k))
	}
	name := fmt.Sprintf("node%d", id)
	return []string{
		"--tls-cert", s.File(name + ".crt"), "--tls-key", s.File(name + ".key"), "--tls-ca", s.CAFile,
		"--gossip-key-file", s.GossipKey, "--auth-tokens-file", s.TokensFile, "--superusers", strings.Join(supers, ","),
	}
}

// TLS is the TLS configuration of the harness's clients: the CA, no
// client certificate (they authenticate with the admin token).
func (s *Secure) TLS() *tls.Config { return s.tls.Clone() }

// Secured is cfg as the harness's clients of c use it: over TLS with the
// admin token when c is secure, as it is otherwise.
func (c *Cluster) Secured(cfg client.Config) client.Config {
	if s := c.Secure; s != nil {
		cfg.TLS, cfg.Token = s.TLS(), s.AdminToken
	}
	return cfg
}

// connConfig is the transport configuration of the harness's own RPC
// connections to a node.
func (s *Secure) connConfig() transport.ConnConfig {
	if s == nil {
		return transport.ConnConfig{}
	}
	return transport.ConnConfig{TLS: s.TLS, Token: s.AdminToken}
}

// ctlEnv is the environment that makes gostream-ctl use the admin token
// over TLS.
func (s *Secure) ctlEnv() []string {
	if s == nil {
		return nil
	}
	return []string{"GOSTREAM_TLS_CA=" + s.CAFile, "GOSTREAM_TOKEN_FILE=" + s.TokenFile}
}

// httpGet sends GET url as the admin, over TLS when secure.
func (s *Secure) httpGet(hostPort, path string, timeout time.Duration) (*http.Response, error) {
	if s == nil {
		c := http.Client{Timeout: timeout}
		return c.Get("http://" + hostPort + path)
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+hostPort+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	c := http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: s.TLS()}}
	return c.Do(req)
}
