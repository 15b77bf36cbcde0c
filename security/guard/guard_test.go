package guard

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gostream/security"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// testSecurity is a Guard over TLS files (a CA file that trusts
// two CAs, and a node certificate), as NewGuard makes one.
func testSecurity(t *testing.T, caFile, certFile, keyFile string) *Guard {
	t.Helper()
	files, err := security.LoadTLSFiles(certFile, keyFile, caFile, security.ClientAuthRequest)
	require.NoError(t, err)
	s := &Guard{
		cfg:          Config{TLSCert: certFile, TLSKey: keyFile, TLSCA: caFile},
		tls:          files,
		denied:       transport.NewRateLog(nil, 0),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"kind"}),
	}
	s.live = transport.NewSessions(s.Stands, nil)
	return s
}

// An HTTP connection kept open between requests does not outlive its
// client certificate: after a reload that drops the certificate's CA, the
// next request on the same connection is refused (Unauthenticated, 401
// from the HTTP front end); past the certificate's NotAfter too. A
// certificate that still verifies goes on, on its kept connection.
func TestHTTPClientCertificateOnAKeptConnection(t *testing.T) {
	dir := t.TempDir()
	ca, err := security.NewCA("cluster CA", time.Hour)
	require.NoError(t, err)
	other, err := security.NewCA("other CA", time.Hour)
	require.NoError(t, err)
	issue := func(c *security.CA, name string, hosts []string, notAfter time.Time) {
		is, err := c.Issue(security.IssueOptions{Name: name, Hosts: hosts, NotAfter: notAfter})
		require.NoError(t, err)
		require.NoError(t, is.WriteFiles(dir, name))
	}
	issue(ca, "node1", []string{"127.0.0.1"}, time.Now().Add(time.Hour))
	issue(ca, "steady", nil, time.Now().Add(time.Hour))
	issue(other, "outsider", nil, time.Now().Add(time.Hour))
	notAfter := time.Now().Add(3 * time.Second).Truncate(time.Second)
	issue(ca, "brief", nil, notAfter)
	caFile := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(caFile, append(append([]byte{}, ca.PEM...), other.PEM...), 0o644))
	s := testSecurity(t, caFile, filepath.Join(dir, "node1.crt"), filepath.Join(dir, "node1.key"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := s.HTTPPrincipal(r); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}),
		ConnContext: s.ConnContext,
	}
	go srv.Serve(tls.NewListener(ln, s.ServerTLS("http/1.1")))
	t.Cleanup(func() { srv.Close() })

	client := func(name string) func() (status int, reused bool) {
		cfg, err := security.ClientTLS(caFile, filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		require.NoError(t, err)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		return func() (int, bool) {
			var reused bool
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ln.Addr().String()+"/", nil)
			require.NoError(t, err)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode, reused
		}
	}
	steady, outsider, brief := client("steady"), client("outsider"), client("brief")
	for name, get := range map[string]func() (int, bool){"steady": steady, "outsider": outsider, "brief": brief} {
		status, _ := get()
		require.Equal(t, http.StatusNoContent, status, name)
	}

	// The other CA leaves the file; the node reloads (Guard.Reload).
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o644))
	require.NoError(t, s.tls.Reload())
	s.reloads.Add(1)
	status, reused := outsider()
	assert.True(t, reused, "the same connection")
	assert.Equal(t, http.StatusUnauthorized, status, "a certificate whose CA was dropped")
	status, reused = steady()
	assert.True(t, reused)
	assert.Equal(t, http.StatusNoContent, status, "a certificate that still verifies")

	// The brief certificate's requests go on until its NotAfter, on one
	// connection, and are refused from then on.
	require.Eventually(t, func() bool {
		status, reused = brief()
		require.True(t, reused, "the same connection")
		return status == http.StatusUnauthorized
	}, time.Until(notAfter)+5*time.Second, 50*time.Millisecond, "refused past the certificate's NotAfter")
	assert.False(t, time.Now().Before(notAfter), "not before its NotAfter")
}
