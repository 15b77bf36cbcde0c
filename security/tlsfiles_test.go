package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// testCA is a CA whose certificate is written to dir/name.crt.
type testCA struct {
	*CA
	dir    string
	caFile string
}

func newTestCA(t testing.TB, dir, name string) *testCA {
	t.Helper()
	ca, err := NewCA(name, time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(dir, name+".crt")
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o644))
	return &testCA{CA: ca, dir: dir, caFile: caFile}
}

// issue writes a certificate for name, valid for localhost and 127.0.0.1
// for an hour, as dir/file.crt and dir/file.key, and returns their paths.
func (ca *testCA) issue(t testing.TB, name, file string) (certFile, keyFile string) {
	t.Helper()
	return ca.issueWith(t, IssueOptions{Name: name, Hosts: []string{"localhost", "127.0.0.1"}, NotAfter: time.Now().Add(time.Hour)}, file)
}

func (ca *testCA) issueWith(t testing.TB, o IssueOptions, file string) (certFile, keyFile string) {
	t.Helper()
	is, err := ca.Issue(o)
	require.NoError(t, err)
	require.NoError(t, is.WriteFiles(ca.dir, file))
	return filepath.Join(ca.dir, file+".crt"), filepath.Join(ca.dir, file+".key")
}

// copyFile copies src over dst, as an operator replaces a certificate.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, data, 0o600))
}

func TestLoadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	notAfter := time.Now().Add(time.Hour).Truncate(time.Second)
	certFile, keyFile := ca.issueWith(t, IssueOptions{Name: "node1", Hosts: []string{"localhost"}, NotAfter: notAfter}, "node1")

	f, err := LoadTLSFiles(certFile, keyFile, ca.caFile, ClientAuthRequest)
	require.NoError(t, err)
	assert.Equal(t, "node1", f.Name())
	assert.True(t, f.HasCA())
	assert.True(t, notAfter.Equal(f.NotAfter()), "NotAfter %s, want %s", f.NotAfter(), notAfter)

	noCA, err := LoadTLSFiles(certFile, keyFile, "", ClientAuthNone)
	require.NoError(t, err)
	assert.Equal(t, "node1", noCA.Name())
	assert.False(t, noCA.HasCA())

	// A client with only a CA (it verifies servers, presents nothing).
	caOnly, err := LoadTLSFiles("", "", ca.caFile, ClientAuthRequest)
	require.NoError(t, err)
	assert.Equal(t, "", caOnly.Name())
	assert.True(t, caOnly.HasCA())
	assert.True(t, caOnly.NotAfter().IsZero())
}

func TestLoadTLSFilesRefuses(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := ca.issue(t, "node1", "node1")
	_, otherKey := ca.issue(t, "node2", "node2")
	expiredCert, expiredKey := ca.issueWith(t, IssueOptions{Name: "old", NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}, "expired")
	futureCert, futureKey := ca.issueWith(t, IssueOptions{Name: "new", NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(2 * time.Hour)}, "future")
	notPEM := writeFile(t, dir, "not-pem.crt", "this is not a certificate\n")
	keyAsCA := writeFile(t, dir, "key-as-ca.crt", readString(t, keyFile))
	empty := writeFile(t, dir, "empty.crt", "")

	tests := []struct {
		name                      string
		certFile, keyFile, caFile string
		want                      string // in the error
	}{
		{"expired", expiredCert, expiredKey, ca.caFile, "expired"},
		{"not yet valid", futureCert, futureKey, ca.caFile, "not valid before"},
		{"certificate without its key", certFile, "", ca.caFile, "--tls-key"},
		{"key without its certificate", "", keyFile, ca.caFile, "--tls-cert"},
		{"key of another certificate", certFile, otherKey, ca.caFile, certFile},
		{"certificate not PEM", notPEM, keyFile, ca.caFile, notPEM},
		{"certificate missing", filepath.Join(dir, "absent.crt"), keyFile, ca.caFile, "absent.crt"},
		{"CA not PEM", certFile, keyFile, notPEM, "no PEM certificate"},
		{"CA file holds a key", certFile, keyFile, keyAsCA, "no PEM certificate"},
		{"CA file empty", certFile, keyFile, empty, "no PEM certificate"},
		{"CA file missing", certFile, keyFile, filepath.Join(dir, "absent-ca.crt"), "absent-ca.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := LoadTLSFiles(tt.certFile, tt.keyFile, tt.caFile, ClientAuthRequest)
			require.ErrorIs(t, err, ErrTLSFiles)
			assert.Contains(t, err.Error(), tt.want)
			assert.Nil(t, f)
		})
	}
}

func readString(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// Reload takes a certificate written over the files; a broken or
// invalid one is an error and the one loaded before stays in use.
func TestTLSFilesReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := ca.issue(t, "node1", "live")
	f, err := LoadTLSFiles(certFile, keyFile, ca.caFile, ClientAuthRequest)
	require.NoError(t, err)
	require.Equal(t, "node1", f.Name())

	served := func() string {
		c, err := f.ServerConfig().GetConfigForClient(&tls.ClientHelloInfo{})
		require.NoError(t, err)
		require.Len(t, c.Certificates, 1)
		leaf, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
		require.NoError(t, err)
		return leaf.Subject.CommonName
	}
	require.Equal(t, "node1", served())

	// A new certificate and key over the same paths.
	newCert, newKey := ca.issue(t, "node1-renewed", "renewed")
	copyFile(t, newCert, certFile)
	copyFile(t, newKey, keyFile)
	require.NoError(t, f.Reload())
	assert.Equal(t, "node1-renewed", f.Name())
	assert.Equal(t, "node1-renewed", served(), "a handshake after the reload serves the new certificate")

	// Broken files: each reload fails and the renewed certificate stays.
	otherCert, _ := ca.issue(t, "half-written", "half")
	expiredCert, expiredKey := ca.issueWith(t, IssueOptions{Name: "expired", NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}, "expired")
	tests := []struct {
		name  string
		write func()
	}{
		{"garbage certificate", func() { writeFile(t, dir, "live.crt", "garbage") }},
		{"certificate without its new key", func() { copyFile(t, otherCert, certFile); copyFile(t, newKey, keyFile) }},
		{"expired certificate", func() { copyFile(t, expiredCert, certFile); copyFile(t, expiredKey, keyFile) }},
		{"CA file not PEM", func() {
			copyFile(t, newCert, certFile)
			copyFile(t, newKey, keyFile)
			writeFile(t, dir, "ca.crt", "not a CA")
		}},
		{"files removed", func() { require.NoError(t, os.Remove(certFile)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.write()
			require.ErrorIs(t, f.Reload(), ErrTLSFiles)
			assert.Equal(t, "node1-renewed", f.Name())
			assert.Equal(t, "node1-renewed", served())
			assert.True(t, f.HasCA())
		})
	}
}

func TestServerConfigClientAuth(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := ca.issue(t, "node1", "node1")
	tests := []struct {
		name   string
		caFile string
		auth   ClientAuth
		want   tls.ClientAuthType
	}{
		{"CA, request", ca.caFile, ClientAuthRequest, tls.VerifyClientCertIfGiven},
		{"CA, require", ca.caFile, ClientAuthRequire, tls.RequireAndVerifyClientCert},
		{"no CA", "", ClientAuthNone, tls.NoClientCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := LoadTLSFiles(certFile, keyFile, tt.caFile, tt.auth)
			require.NoError(t, err)
			sc := f.ServerConfig("http/1.1")
			assert.Equal(t, uint16(tls.VersionTLS12), sc.MinVersion)
			require.NotNil(t, sc.GetConfigForClient)
			c, err := sc.GetConfigForClient(&tls.ClientHelloInfo{})
			require.NoError(t, err)
			assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion)
			assert.Equal(t, tt.want, c.ClientAuth)
			assert.Equal(t, tt.caFile != "", c.ClientCAs != nil, "ClientCAs")
			assert.Equal(t, []string{"http/1.1"}, c.NextProtos)
			require.Len(t, c.Certificates, 1)
		})
	}
}

func TestParseClientAuth(t *testing.T) {
	for _, s := range []string{"none", "request", "require"} {
		got, err := ParseClientAuth(s)
		require.NoError(t, err)
		assert.Equal(t, ClientAuth(s), got)
	}
	for _, s := range []string{"", "Require", "verify", "optional"} {
		_, err := ParseClientAuth(s)
		assert.Error(t, err, "%q", s)
	}
}

func TestClientTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := ca.issue(t, "admin", "admin")

	_, err := ClientTLS("", certFile, keyFile)
	require.ErrorIs(t, err, ErrTLSFiles, "a TLS client needs the CA")
	assert.Contains(t, err.Error(), "--tls-ca")

	c, err := ClientTLS(ca.caFile, "", "")
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion)
	assert.NotNil(t, c.RootCAs)
	assert.Empty(t, c.Certificates)
	assert.False(t, c.InsecureSkipVerify)

	c, err = ClientTLS(ca.caFile, certFile, keyFile)
	require.NoError(t, err)
	assert.NotNil(t, c.RootCAs)
	require.Len(t, c.Certificates, 1)

	for _, tt := range []struct{ name, ca, cert, key string }{
		{"certificate without key", ca.caFile, certFile, ""},
		{"key without certificate", ca.caFile, "", keyFile},
		{"CA not PEM", writeFile(t, dir, "bad-ca", "x"), "", ""},
		{"CA missing", filepath.Join(dir, "absent"), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ClientTLS(tt.ca, tt.cert, tt.key)
			require.ErrorIs(t, err, ErrTLSFiles)
			assert.Nil(t, c)
		})
	}
}

// handshakeResult is what each side of a handshake saw.
type handshakeResult struct {
	serverErr, clientErr error
	server, client       tls.ConnectionState
}

// handshake runs a TLS handshake between a server with serverCfg and a
// client with clientCfg over loopback TCP. The server writes one byte
// after a handshake that succeeded, and the client reads it, so that a
// client certificate the server refuses after the client's side of a
// TLS 1.3 handshake is over shows as an error on the client too.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) handshakeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	type serverSide struct {
		err   error
		state tls.ConnectionState
	}
	done := make(chan serverSide, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- serverSide{err: err}
			return
		}
		defer nc.Close()
		tc := tls.Server(nc, serverCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			done <- serverSide{err: err}
			return
		}
		_, err = tc.Write([]byte{1})
		done <- serverSide{err: err, state: tc.ConnectionState()}
	}()

	var res handshakeResult
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	deadline, _ := ctx.Deadline()
	require.NoError(t, nc.SetDeadline(deadline))
	tc := tls.Client(nc, clientCfg)
	res.clientErr = tc.HandshakeContext(ctx)
	if res.clientErr == nil {
		res.client = tc.ConnectionState()
		_, res.clientErr = io.ReadFull(tc, make([]byte, 1))
	}
	nc.Close() // a server still waiting for the client's certificate gives up
	s := <-done
	res.serverErr, res.server = s.err, s.state
	return res
}

func TestHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	other := newTestCA(t, dir, "other-ca")
	nodeCert, nodeKey := ca.issue(t, "node1", "node1")
	adminCert, adminKey := ca.issue(t, "admin", "admin")
	strangerCert, strangerKey := other.issue(t, "admin", "stranger")

	server := func(auth ClientAuth) *tls.Config {
		f, err := LoadTLSFiles(nodeCert, nodeKey, ca.caFile, auth)
		require.NoError(t, err)
		return f.ServerConfig()
	}
	client := func(caFile, cert, key string) *tls.Config {
		c, err := ClientTLS(caFile, cert, key)
		require.NoError(t, err)
		c.ServerName = "localhost"
		return c
	}
	// present makes the client present cert whatever the server asks
	// for: crypto/tls on its own withholds a certificate whose issuer is
	// not among the CAs the server names, and a client that does not is
	// what the server must be proof against.
	present := func(c *tls.Config, certFile, keyFile string) *tls.Config {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		return c
	}
	// A client certificate ClientTLS would refuse to load.
	withCert := func(c *tls.Config, o IssueOptions) *tls.Config {
		is, err := ca.Issue(o)
		require.NoError(t, err)
		pair, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
		require.NoError(t, err)
		c.Certificates = []tls.Certificate{pair}
		return c
	}

	tests := []struct {
		name      string
		server    *tls.Config
		client    *tls.Config
		ok        bool
		principal string // the server's CertPrincipal, when ok
	}{
		{"client certificate, request", server(ClientAuthRequest), client(ca.caFile, adminCert, adminKey), true, "admin"},
		{"client certificate, require", server(ClientAuthRequire), client(ca.caFile, adminCert, adminKey), true, "admin"},
		{"node to node", server(ClientAuthRequire), client(ca.caFile, nodeCert, nodeKey), true, "node1"},
		{"no client certificate, request", server(ClientAuthRequest), client(ca.caFile, "", ""), true, ""},
		{"no client certificate, require", server(ClientAuthRequire), client(ca.caFile, "", ""), false, ""},
		{"client certificate of another CA, request", server(ClientAuthRequest), present(client(ca.caFile, "", ""), strangerCert, strangerKey), false, ""},
		{"client certificate of another CA, require", server(ClientAuthRequire), present(client(ca.caFile, "", ""), strangerCert, strangerKey), false, ""},
		// crypto/tls withholds it: no principal, not "admin".
		{"client certificate of another CA, withheld, request", server(ClientAuthRequest), client(ca.caFile, strangerCert, strangerKey), true, ""},
		{"client certificate of another CA, withheld, require", server(ClientAuthRequire), client(ca.caFile, strangerCert, strangerKey), false, ""},
		{"client certificate of the CA, presented by GetClientCertificate", server(ClientAuthRequest), present(client(ca.caFile, "", ""), adminCert, adminKey), true, "admin"},
		{"expired client certificate", server(ClientAuthRequest),
			withCert(client(ca.caFile, "", ""), IssueOptions{Name: "admin", NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}), false, ""},
		{"client certificate not yet valid", server(ClientAuthRequest),
			withCert(client(ca.caFile, "", ""), IssueOptions{Name: "admin", NotBefore: time.Now().Add(time.Hour), NotAfter: time.Now().Add(2 * time.Hour)}), false, ""},
		{"TLS 1.1 client", server(ClientAuthRequest), func() *tls.Config {
			c := client(ca.caFile, adminCert, adminKey)
			c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			return c
		}(), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := handshake(t, tt.server, tt.client)
			if !tt.ok {
				assert.Error(t, res.serverErr, "the server's handshake")
				assert.Error(t, res.clientErr, "the client's side")
				return
			}
			require.NoError(t, res.serverErr)
			require.NoError(t, res.clientErr)
			assert.Equal(t, tt.principal, transport.CertPrincipal(res.server))
			assert.GreaterOrEqual(t, res.server.Version, uint16(tls.VersionTLS12))
			require.NotEmpty(t, res.client.PeerCertificates)
			assert.Equal(t, "node1", res.client.PeerCertificates[0].Subject.CommonName)
		})
	}
}

// The client verifies the node: a server certificate of another CA, or
// one that does not name the host the client dialed, fails.
func TestHandshakeVerifiesTheServer(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	other := newTestCA(t, dir, "other-ca")
	nodeCert, nodeKey := ca.issue(t, "node1", "node1")
	f, err := LoadTLSFiles(nodeCert, nodeKey, ca.caFile, ClientAuthRequest)
	require.NoError(t, err)

	c, err := ClientTLS(other.caFile, "", "")
	require.NoError(t, err)
	c.ServerName = "localhost"
	res := handshake(t, f.ServerConfig(), c)
	var verr *tls.CertificateVerificationError
	assert.True(t, errors.As(res.clientErr, &verr), "a server of another CA: %v", res.clientErr)

	c, err = ClientTLS(ca.caFile, "", "")
	require.NoError(t, err)
	c.ServerName = "node7.example.com"
	res = handshake(t, f.ServerConfig(), c)
	assert.True(t, errors.As(res.clientErr, &verr), "a name the certificate does not hold: %v", res.clientErr)
}

// After a reload, new handshakes use the new files: the new certificate
// is served, and client certificates verify against the new CA only.
func TestHandshakeAfterReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	next := newTestCA(t, dir, "next-ca")
	certFile, keyFile := ca.issue(t, "node1", "live")
	caFile := filepath.Join(dir, "live-ca.crt")
	copyFile(t, ca.caFile, caFile)
	f, err := LoadTLSFiles(certFile, keyFile, caFile, ClientAuthRequire)
	require.NoError(t, err)
	serverCfg := f.ServerConfig()

	oldAdminCert, oldAdminKey := ca.issue(t, "admin", "old-admin")
	newAdminCert, newAdminKey := next.issue(t, "admin2", "new-admin")
	client := func(caFile, cert, key string) *tls.Config {
		c, err := ClientTLS(caFile, cert, key)
		require.NoError(t, err)
		c.ServerName = "127.0.0.1"
		return c
	}

	res := handshake(t, serverCfg, client(ca.caFile, oldAdminCert, oldAdminKey))
	require.NoError(t, res.serverErr)
	require.NoError(t, res.clientErr)
	assert.Equal(t, "admin", transport.CertPrincipal(res.server))

	renewedCert, renewedKey := next.issue(t, "node1-next", "renewed")
	copyFile(t, renewedCert, certFile)
	copyFile(t, renewedKey, keyFile)
	copyFile(t, next.caFile, caFile)
	require.NoError(t, f.Reload())

	res = handshake(t, serverCfg, client(next.caFile, newAdminCert, newAdminKey))
	require.NoError(t, res.serverErr)
	require.NoError(t, res.clientErr)
	assert.Equal(t, "admin2", transport.CertPrincipal(res.server))
	require.NotEmpty(t, res.client.PeerCertificates)
	assert.Equal(t, "node1-next", res.client.PeerCertificates[0].Subject.CommonName)

	res = handshake(t, serverCfg, client(next.caFile, oldAdminCert, oldAdminKey))
	assert.Error(t, res.serverErr, "a client certificate of the CA that was replaced")
}

// VerifyClient verifies again, against the CA loaded last, a client
// chain that a handshake verified: it stands while its CA is in the file
// and it has not expired; a reload that drops its CA, or a moment past
// its NotAfter, and it no longer does. Without a CA there is nothing to
// verify against, and nothing is refused.
func TestVerifyClientAfterReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	other := newTestCA(t, dir, "other-ca")
	nodeCert, nodeKey := ca.issue(t, "node1", "node1")
	outCert, outKey := other.issue(t, "outsider", "outsider")
	bundle := filepath.Join(dir, "bundle.crt")
	require.NoError(t, os.WriteFile(bundle, append(append([]byte{}, ca.PEM...), other.PEM...), 0o644))
	files, err := LoadTLSFiles(nodeCert, nodeKey, bundle, ClientAuthRequest)
	require.NoError(t, err)

	client, err := ClientTLS(bundle, outCert, outKey)
	require.NoError(t, err)
	client.ServerName = "127.0.0.1"
	res := handshake(t, files.ServerConfig(), client)
	require.NoError(t, res.serverErr)
	require.NotEmpty(t, res.server.VerifiedChains)
	chain := res.server.VerifiedChains[0]
	require.NoError(t, files.VerifyClient(chain, time.Now()))
	err = files.VerifyClient(chain, chain[0].NotAfter.Add(time.Second))
	assert.ErrorIs(t, err, ErrCertificate, "past its NotAfter")
	t.Log(err)

	copyFile(t, ca.caFile, bundle) // the other CA leaves the file
	require.NoError(t, files.Reload())
	err = files.VerifyClient(chain, time.Now())
	assert.ErrorIs(t, err, ErrCertificate, "its CA is no longer trusted")
	t.Log(err)

	noCA, err := LoadTLSFiles(nodeCert, nodeKey, "", ClientAuthNone)
	require.NoError(t, err)
	assert.NoError(t, noCA.VerifyClient(chain, time.Now()))
}
