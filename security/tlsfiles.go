package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// ClientAuth is what a TLS listener asks of its clients (--tls-client-auth).
type ClientAuth string

// The values of --tls-client-auth.
const (
	// ClientAuthNone asks clients for nothing. Only without a CA.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequest asks for a certificate and verifies one that is
	// presented; it authenticates its holder.
	ClientAuthRequest ClientAuth = "request"
	// ClientAuthRequire refuses a connection without a certificate that
	// verifies.
	ClientAuthRequire ClientAuth = "require"
)

// ParseClientAuth reads --tls-client-auth.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch a := ClientAuth(s); a {
	case ClientAuthNone, ClientAuthRequest, ClientAuthRequire:
		return a, nil
	}
	return "", fmt.Errorf("want none, request or require")
}

// TLSFiles are a node's certificate, key and CA, as PEM files, and what
// was loaded from them last. Reload reads them again; the configs it
// hands out read the latest load at each handshake, so new connections
// use reloaded files; VerifyClient checks an open connection's client
// certificate against the latest load (the node ends those that no
// longer verify). Safe for concurrent use.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	ClientAuth                ClientAuth
	cur                       atomic.Pointer[tlsLoaded]
}

type tlsLoaded struct {
	cert *tls.Certificate // nil without CertFile
	leaf *x509.Certificate
	pool *x509.CertPool // nil without CAFile
}

// ErrTLSFiles is matched by every error of loading TLS files.
var ErrTLSFiles = errors.New("security: TLS files")

// LoadTLSFiles loads the files: certFile and keyFile (both or neither),
// and caFile (optional). A certificate that is expired or not yet valid
// is refused, as are files that are not PEM.
func LoadTLSFiles(certFile, keyFile, caFile string, auth ClientAuth) (*TLSFiles, error) {
	f := &TLSFiles{CertFile: certFile, KeyFile: keyFile, CAFile: caFile, ClientAuth: auth}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Reload reads the files again. On an error it keeps what it had.
func (f *TLSFiles) Reload() error { return f.ReloadChecked(nil) }

// ReloadChecked is Reload that also keeps what it had when check, given
// the new certificate's name, refuses it.
func (f *TLSFiles) ReloadChecked(check func(name string) error) error {
	l, err := loadTLS(f.CertFile, f.KeyFile, f.CAFile, time.Now())
	if err != nil {
		return err
	}
	if check != nil && l.leaf != nil {
		if err := check(l.leaf.Subject.CommonName); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrTLSFiles, f.CertFile, err)
		}
	}
	f.cur.Store(l)
	return nil
}

func loadTLS(certFile, keyFile, caFile string, now time.Time) (*tlsLoaded, error) {
	l := &tlsLoaded{}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: a certificate needs its key and a key its certificate (--tls-cert and --tls-key)", ErrTLSFiles)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s, %s: %v", ErrTLSFiles, certFile, keyFile, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrTLSFiles, certFile, err)
		}
		if now.After(leaf.NotAfter) {
			return nil, fmt.Errorf("%w: %s expired at %s", ErrTLSFiles, certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(leaf.NotBefore) {
			return nil, fmt.Errorf("%w: %s is not valid before %s", ErrTLSFiles, certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
		}
		pair.Leaf = leaf
		l.cert, l.leaf = &pair, leaf
	}
	if caFile != "" {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTLSFiles, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrTLSFiles, caFile)
		}
		l.pool = pool
	}
	return l, nil
}

// Name is the Common Name of the loaded certificate: the principal this
// node is to the others; "" without one.
func (f *TLSFiles) Name() string {
	if l := f.cur.Load(); l != nil && l.leaf != nil {
		return l.leaf.Subject.CommonName
	}
	return ""
}

// NotAfter is when the loaded certificate expires (zero without one).
func (f *TLSFiles) NotAfter() time.Time {
	if l := f.cur.Load(); l != nil && l.leaf != nil {
		return l.leaf.NotAfter
	}
	return time.Time{}
}

// ErrCertificate is matched by the errors of VerifyClient.
var ErrCertificate = errors.New("security: client certificate")

// VerifyClient checks a client certificate chain as a TLS handshake
// verified it (leaf first, the CA that was trusted last), against the CA
// loaded last, at now: what a node
// asks again about its open connections after a reload. An error says
// why it no longer verifies (expired, or no longer signed by a CA the
// file holds); nil without a CA, where no client certificate is
// verified in the first place.
func (f *TLSFiles) VerifyClient(chain []*x509.Certificate, now time.Time) error {
	l := f.cur.Load()
	if l == nil || l.pool == nil || len(chain) == 0 {
		return nil
	}
	inter := x509.NewCertPool()
	for i := 1; i < len(chain)-1; i++ {
		inter.AddCert(chain[i])
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: l.pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCertificate, err)
	}
	return nil
}

// HasCA reports whether a CA was loaded.
func (f *TLSFiles) HasCA() bool {
	l := f.cur.Load()
	return l != nil && l.pool != nil
}

// ServerConfig is the listener's configuration: each handshake takes the
// files loaded last. alpn, if given, is offered as the application
// protocols (the HTTP listener offers http/1.1).
func (f *TLSFiles) ServerConfig(alpn ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := f.cur.Load()
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: alpn}
			if l.cert != nil {
				c.Certificates = []tls.Certificate{*l.cert}
			}
			c.ClientAuth = tls.NoClientCert
			if l.pool != nil {
				c.ClientCAs = l.pool
				c.ClientAuth = tls.VerifyClientCertIfGiven
				if f.ClientAuth == ClientAuthRequire {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// ClientConfig is the configuration of a connection this node dials, as
// the files loaded last say: its certificate (mutual TLS) and the CA it
// verifies the server with.
func (f *TLSFiles) ClientConfig() *tls.Config {
	l := f.cur.Load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: l.pool}
	if l.cert != nil {
		c.Certificates = []tls.Certificate{*l.cert}
	}
	return c
}

// ClientTLS builds a client's TLS configuration from files: the CA that
// verifies the nodes (required) and, optionally, a client certificate and
// its key. It is what gostream-ctl's --tls-ca, --tls-cert and --tls-key
// give.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, fmt.Errorf("%w: a TLS client needs the cluster's CA (--tls-ca)", ErrTLSFiles)
	}
	l, err := loadTLS(certFile, keyFile, caFile, time.Now())
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: l.pool}
	if l.cert != nil {
		c.Certificates = []tls.Certificate{*l.cert}
	}
	return c, nil
}
