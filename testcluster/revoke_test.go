package testcluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/durable"
	"gostream/security"
)

// Revocation (docs/security.md, "Credentials that stop standing"): the
// connections a token opened end when a reload drops the token, those a
// client certificate opened end at its NotAfter and when a reload drops
// its CA; everything else goes on.

// revokeBound is how long a test waits for a connection to end after its
// credential fell: the docs promise at once (within a second); this is
// that with room for a loaded machine, and well below what ends a live
// read anyway (a long-poll's 20 s, an SSE connection's 60 s).
const revokeBound = 15 * time.Second

// endedLine is what a node logs, once per reload, when it ended
// connections.
const endedLine = "ended the connections whose credentials no longer stand"

// follower is a gostream-ctl consume --follow running beside the test.
type follower struct {
	name           string
	stdout, stderr *lockedBuffer
	done           chan struct{}
	exit           int
}

// follow starts gostream-ctl consume TOPIC --from-beginning --follow with
// env as its credentials.
func follow(t *testing.T, c *Cluster, name string, env []string, topic string) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := c.CtlCommand(ctx, "consume", topic, "--from-beginning", "--follow")
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), env...)
	f := &follower{name: name, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = f.stdout, f.stderr
	require.NoError(t, cmd.Start())
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			f.exit = ee.ExitCode()
		} else if err != nil {
			f.exit = -1
		}
		close(f.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
		t.Logf("follow %s: exit %d\nstdout:\n%s\nstderr:\n%s", f.name, f.exit, f.stdout, f.stderr)
	})
	return f
}

// prints waits for the follower to print value.
func (f *follower) prints(t *testing.T, value string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(f.stdout.String(), value) }, within, 50*time.Millisecond,
		"follow %s prints %q; stdout:\n%s\nstderr:\n%s", f.name, value, f.stdout, f.stderr)
}

// ended reports whether the follower exited within d.
func (f *follower) ended(d time.Duration) bool {
	select {
	case <-f.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (f *follower) running() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// liveRead is a Durable Streams live read (SSE or long-poll) running
// beside the test.
type liveRead struct {
	body   *lockedBuffer
	status chan int   // the response's status, once it has one
	done   chan error // the body's end: nil at its end, else why not
}

// startLive sends GET path (after /v1/stream/) with auth's credentials
// to node n over TLS, and reads the response's body as it comes.
func startLive(t *testing.T, c *Cluster, n *Node, path string, cfg *tls.Config, token string) *liveRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.HTTP+durable.Prefix+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	l := &liveRead{body: &lockedBuffer{}, status: make(chan int, 1), done: make(chan error, 1)}
	go func() {
		resp, err := hc.Do(req)
		if err != nil {
			l.status <- 0
			l.done <- err
			return
		}
		defer resp.Body.Close()
		l.status <- resp.StatusCode
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			l.body.Write([]byte(line))
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				l.done <- err
				return
			}
		}
	}()
	return l
}

// reloadSecurity signals this test's running nodes (SIGHUP, by their
// process ids) and waits until each has logged a reload since.
func reloadSecurity(t *testing.T, c *Cluster) {
	t.Helper()
	before := map[int32]int{}
	var running []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			running = append(running, n)
			before[n.ID] = strings.Count(n.LogTail(100000), "security files reloaded")
		}
	}
	for _, n := range running {
		require.NoError(t, n.signal(syscall.SIGHUP))
	}
	for _, n := range running {
		require.Eventually(t, func() bool {
			return strings.Count(n.LogTail(100000), "security files reloaded") > before[n.ID]
		}, 10*time.Second, 20*time.Millisecond, "node %d reloaded", n.ID)
	}
}

// writeTokens makes a token for each principal and writes the tokens
// file: the admin's line and theirs. It returns each one's token file.
func writeTokens(t *testing.T, c *Cluster, principals ...string) map[string]string {
	t.Helper()
	lines := []string{security.TokenLine("admin", c.Secure.AdminToken)}
	files := map[string]string{}
	for _, p := range principals {
		token, line, err := security.NewToken(p)
		require.NoError(t, err)
		lines = append(lines, line)
		files[p] = filepath.Join(t.TempDir(), p+".token")
		require.NoError(t, os.WriteFile(files[p], []byte(token), 0o600))
	}
	require.NoError(t, os.WriteFile(c.Secure.TokensFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return files
}

// endedLines counts the lines each node logged about ending connections.
func endedLines(c *Cluster) map[int32]int {
	out := map[int32]int{}
	for _, n := range c.Nodes {
		out[n.ID] = strings.Count(n.LogTail(100000), endedLine)
	}
	return out
}

// TestRevokedTokenEndsItsConnections: a consume --follow, a Durable
// Streams SSE read and a long-poll hold connections a token opened; the
// token is removed from the tokens file and every node reloads. Within
// the bound the follow exits 2 with Unauthenticated, the SSE stream ends
// and the long-poll answers 401, each node saying so in one line; the
// same reads with another token go on across the reload.
func TestRevokedTokenEndsItsConnections(t *testing.T) {
	c := startSecure(t, 3)
	ctlOK(t, c, "topic", "create", "feed", "--partitions", "1", "--replication-factor", "3")
	tokens := writeTokens(t, c, "reader", "keeper")
	reloadSecurity(t, c)
	for _, p := range []string{"reader", "keeper"} {
		ctlOK(t, c, "acl", "add", "--principal", p, "--topic", "feed", "--operation", "read")
		ctlOK(t, c, "acl", "add", "--principal", p, "--stream", "news", "--operation", "read")
	}
	code, body := dsSecure(t, c, c.Node(1), http.MethodPut, "news", "")
	require.Equal(t, http.StatusCreated, code, body)

	reader := follow(t, c, "reader", as(c, tokens["reader"]), "feed")
	keeper := follow(t, c, "keeper", as(c, tokens["keeper"]), "feed")
	ctlOKIn(t, c, "before\n", "produce", "feed")
	reader.prints(t, "before", 30*time.Second)
	keeper.prints(t, "before", 30*time.Second)

	readerToken, keeperToken := tokenOf(t, as(c, tokens["reader"])), tokenOf(t, as(c, tokens["keeper"]))
	// The live reads go to node 2, which does not lead the stream's
	// partition necessarily: wherever it is led, the read is the node's.
	readerSSE := startLive(t, c, c.Node(2), "news?offset=-1&live=sse", c.Secure.TLS(), readerToken)
	keeperSSE := startLive(t, c, c.Node(2), "news?offset=-1&live=sse", c.Secure.TLS(), keeperToken)
	code, body = dsSecure(t, c, c.Node(1), http.MethodPost, "news", "first;")
	require.Equal(t, http.StatusNoContent, code, body)
	for name, l := range map[string]*liveRead{"reader": readerSSE, "keeper": keeperSSE} {
		require.Eventually(t, func() bool { return strings.Contains(l.body.String(), "first;") }, 30*time.Second, 50*time.Millisecond,
			"%s's SSE read gets the first message: %s", name, l.body)
	}
	// A long-poll at the stream's tail waits (20 s) for the next message.
	readerPoll := startLive(t, c, c.Node(3), "news?offset=now&live=long-poll", c.Secure.TLS(), readerToken)
	require.Eventually(t, func() bool { return liveReaders(t, c, c.Node(3)) == 1 }, 30*time.Second, 20*time.Millisecond,
		"the long-poll waits on node 3")

	// Revoke: the reader's line leaves the file; every node reloads.
	writeTokensKeeping(t, c, tokens, "keeper")
	before := endedLines(c)
	revoked := time.Now()
	reloadSecurity(t, c)

	require.True(t, reader.ended(revokeBound), "the revoked reader's follow still runs %s after the reload; stdout:\n%s", revokeBound, reader.stdout)
	t.Logf("the revoked follow ended %s after the SIGHUP", time.Since(revoked).Round(time.Millisecond))
	assert.Equal(t, 2, reader.exit, "exit 2: refused")
	assert.True(t, strings.HasPrefix(reader.stderr.String(), "Unauthenticated"), "the error's name first:\n%s", reader.stderr)
	select {
	case err := <-readerSSE.done:
		assert.NoError(t, err, "the SSE stream ends")
	case <-time.After(revokeBound - time.Since(revoked)):
		t.Fatalf("the revoked reader's SSE read still runs %s after the reload: %s", revokeBound, readerSSE.body)
	}
	select {
	case status := <-readerPoll.status:
		assert.Equal(t, http.StatusUnauthorized, status, "the long-poll is answered 401: %s", readerPoll.body)
		require.NoError(t, <-readerPoll.done)
		assert.Contains(t, readerPoll.body.String(), "revoked")
	case <-time.After(max(revokeBound-time.Since(revoked), time.Second)):
		t.Fatalf("the revoked reader's long-poll is still waiting %s after the reload", revokeBound)
	}
	// Its SSE client, reconnecting, is refused.
	again := startLive(t, c, c.Node(2), "news?offset=-1&live=sse", c.Secure.TLS(), readerToken)
	assert.Equal(t, http.StatusUnauthorized, <-again.status)

	// The keeper reads on: on the connections it had, across the reload.
	ctlOKIn(t, c, "after\n", "produce", "feed")
	keeper.prints(t, "after", 30*time.Second)
	assert.True(t, keeper.running(), "the keeper's follow still runs")
	code, body = dsSecure(t, c, c.Node(1), http.MethodPost, "news", "second;")
	require.Equal(t, http.StatusNoContent, code, body)
	require.Eventually(t, func() bool { return strings.Contains(keeperSSE.body.String(), "second;") }, 30*time.Second, 50*time.Millisecond,
		"the keeper's SSE read goes on, on the connection it had: %s", keeperSSE.body)

	// Said once per node that ended any, never once per connection.
	after := endedLines(c)
	said := 0
	for _, n := range c.Nodes {
		for _, line := range strings.Split(n.LogTail(100000), "\n") {
			if strings.Contains(line, endedLine) {
				t.Logf("node %d: %s", n.ID, line)
			}
		}
		assert.LessOrEqual(t, after[n.ID]-before[n.ID], 1, "node %d logs the reload's ended connections in one line", n.ID)
		said += after[n.ID] - before[n.ID]
	}
	assert.GreaterOrEqual(t, said, 1, "a node says it ended connections")
}

// liveReaders is the number of live reads node n serves, as its metrics
// say.
func liveReaders(t *testing.T, c *Cluster, n *Node) int {
	t.Helper()
	resp, err := c.Secure.httpGet(n.HTTP, "/metrics", 10*time.Second)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^gostream_ds_live_readers (\d+)$`).FindSubmatch(b)
	require.NotNil(t, m, "gostream_ds_live_readers in node %d's metrics", n.ID)
	v, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return v
}

// writeTokensKeeping rewrites the tokens file with the admin's line and
// the lines of the principals named (their tokens as files says).
func writeTokensKeeping(t *testing.T, c *Cluster, files map[string]string, keep ...string) {
	t.Helper()
	lines := []string{security.TokenLine("admin", c.Secure.AdminToken)}
	for _, p := range keep {
		tok, err := security.ReadTokenFile(files[p])
		require.NoError(t, err)
		lines = append(lines, security.TokenLine(p, tok))
	}
	require.NoError(t, os.WriteFile(c.Secure.TokensFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
}

// dsSecure sends a Durable Streams request as the admin over TLS.
func dsSecure(t *testing.T, c *Cluster, n *Node, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+n.HTTP+durable.Prefix+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Secure.AdminToken)
	if method == http.MethodPut || method == http.MethodPost {
		req.Header.Set("Content-Type", "text/plain")
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: c.Secure.TLS()}}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// certEnv is the environment of gostream-ctl for the holder of the
// certificate name (written by Secure.Issue), without a token.
func certEnv(c *Cluster, name string) []string {
	return []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile, "GOSTREAM_TLS_CERT=" + c.Secure.File(name+".crt"),
		"GOSTREAM_TLS_KEY=" + c.Secure.File(name+".key")}
}

// certTLS is the TLS configuration of an HTTP client with the
// certificate name.
func certTLS(t *testing.T, c *Cluster, name string) *tls.Config {
	t.Helper()
	cfg, err := security.ClientTLS(c.Secure.CAFile, c.Secure.File(name+".crt"), c.Secure.File(name+".key"))
	require.NoError(t, err)
	return cfg
}

// TestCertificateConnectionsEndWithTheirCertificate: a consume --follow
// and an SSE read that authenticated with a client certificate valid for
// a few seconds end at its NotAfter (the follow exits 2 with
// Unauthenticated); one whose certificate a CA signed that a reload
// drops ends at the reload. A follow with a certificate that stays
// valid, and the nodes' own connections, go on.
func TestCertificateConnectionsEndWithTheirCertificate(t *testing.T) {
	c := startSecure(t, 3)
	ctlOK(t, c, "topic", "create", "feed", "--partitions", "1", "--replication-factor", "3")
	code, body := dsSecure(t, c, c.Node(1), http.MethodPut, "news", "")
	require.Equal(t, http.StatusCreated, code, body)
	for _, p := range []string{"brief", "steady", "outsider"} {
		ctlOK(t, c, "acl", "add", "--principal", p, "--topic", "feed", "--operation", "read")
		ctlOK(t, c, "acl", "add", "--principal", p, "--stream", "news", "--operation", "read")
	}
	require.NoError(t, c.Secure.Issue("steady", nil, time.Now().Add(24*time.Hour)))
	// A second CA the nodes trust for now, beside the cluster's.
	other, err := security.NewCA("other CA", time.Hour)
	require.NoError(t, err)
	is, err := other.Issue(security.IssueOptions{Name: "outsider", NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, is.WriteFiles(c.Secure.Dir, "outsider"))
	clusterCA, err := os.ReadFile(c.Secure.CAFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(c.Secure.CAFile, append(append([]byte{}, clusterCA...), other.PEM...), 0o644))
	reloadSecurity(t, c)

	ctlOKIn(t, c, "before\n", "produce", "feed")
	steady := follow(t, c, "steady", certEnv(c, "steady"), "feed")
	outsider := follow(t, c, "outsider", certEnv(c, "outsider"), "feed")
	steady.prints(t, "before", 30*time.Second)
	outsider.prints(t, "before", 30*time.Second)

	// The cluster's CA alone again: the outsider's connections end.
	require.NoError(t, os.WriteFile(c.Secure.CAFile, clusterCA, 0o644))
	dropped := time.Now()
	reloadSecurity(t, c)
	require.True(t, outsider.ended(revokeBound), "the outsider's follow still runs %s after its CA was dropped", revokeBound)
	t.Logf("the outsider's follow ended %s after the SIGHUP", time.Since(dropped).Round(time.Millisecond))
	assert.Equal(t, 2, outsider.exit)
	assert.True(t, strings.HasPrefix(outsider.stderr.String(), "Unauthenticated"), "the error's name first:\n%s", outsider.stderr)

	// A certificate valid for a few seconds more: its follow and its SSE
	// read work until it expires, and end then. The few seconds are
	// enough for gostream-ctl to start and read on a loaded machine.
	const validity = 20 * time.Second
	notAfter := time.Now().Add(validity).Truncate(time.Second) // certificates hold whole seconds
	require.NoError(t, c.Secure.Issue("brief", nil, notAfter))
	brief := follow(t, c, "brief", certEnv(c, "brief"), "feed")
	briefSSE := startLive(t, c, c.Node(2), "news?offset=-1&live=sse", certTLS(t, c, "brief"), "")
	brief.prints(t, "before", time.Until(notAfter))
	require.Equal(t, http.StatusOK, <-briefSSE.status, briefSSE.body)
	code, body = dsSecure(t, c, c.Node(1), http.MethodPost, "news", "first;")
	require.Equal(t, http.StatusNoContent, code, body)
	require.Eventually(t, func() bool { return strings.Contains(briefSSE.body.String(), "first;") }, time.Until(notAfter), 50*time.Millisecond,
		"the SSE read with the brief certificate reads: %s", briefSSE.body)

	require.True(t, brief.ended(time.Until(notAfter)+revokeBound), "the brief follow still runs %s after its certificate expired", revokeBound)
	t.Logf("the brief follow ended %s after its certificate's NotAfter", time.Since(notAfter).Round(time.Millisecond))
	assert.Equal(t, 2, brief.exit)
	assert.True(t, strings.HasPrefix(brief.stderr.String(), "Unauthenticated"), "the error's name first:\n%s", brief.stderr)
	select {
	case err := <-briefSSE.done:
		assert.NoError(t, err, "the SSE stream ends")
	case <-time.After(max(time.Until(notAfter)+revokeBound, time.Second)):
		t.Fatalf("the SSE read with the expired certificate still runs %s after its NotAfter: %s", revokeBound, briefSSE.body)
	}

	// Everything else goes on: the steady follow, replication between
	// the nodes (a record acknowledged by all three), the admin.
	ctlOKIn(t, c, "after\n", "produce", "feed")
	steady.prints(t, "after", 30*time.Second)
	assert.True(t, steady.running(), "the steady follow still runs")
	out := ctlOK(t, c, "topic", "describe", "feed", "-o", "json").Stdout
	assert.Contains(t, out, `"high_watermark":2`, out)
	for _, n := range c.Nodes {
		assert.True(t, n.Healthy(), fmt.Sprintf("node %d", n.ID))
	}
}
