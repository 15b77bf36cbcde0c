package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/security"
	"gostream/transport"
)

// The security of docs/security.md with real processes: TLS, mutual TLS,
// gossip encryption, tokens and ACLs on a cluster of three candidates.

// startSecure starts a secure cluster of nodes nodes, all candidates of
// the controller.
func startSecure(t *testing.T, nodes int) *Cluster {
	t.Helper()
	return startClusterWith(t, Config{Nodes: nodes, Candidates: nodes, Secure: true})
}

// ctlWith runs gostream-ctl against c with env instead of the admin's
// credentials.
func ctlWith(t *testing.T, c *Cluster, env []string, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.CtlCommand(ctx, args...)
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), env...)
	res, err := ctlResult(cmd)
	require.NoError(t, err)
	t.Logf("ctl %s (env %v) -> exit %d\n%s%s", strings.Join(args, " "), env, res.Exit, res.Stdout, res.Stderr)
	return res
}

// addToken makes a token for principal, adds it to the tokens file, has
// every node reload (SIGHUP), and returns a file holding the token.
func addToken(t *testing.T, c *Cluster, principal string) string {
	t.Helper()
	token, line, err := security.NewToken(principal)
	require.NoError(t, err)
	f, err := os.OpenFile(c.Secure.TokensFile, os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = fmt.Fprintln(f, line)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	file := filepath.Join(t.TempDir(), principal+".token")
	require.NoError(t, os.WriteFile(file, []byte(token), 0o600))
	// Each node says so in its log once it has read the file again.
	reloadSecurity(t, c)
	return file
}

// as is the environment of gostream-ctl for the holder of tokenFile.
func as(c *Cluster, tokenFile string) []string {
	return []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile, "GOSTREAM_TOKEN_FILE=" + tokenFile}
}

// TestSecureClusterServes: with TLS on every link, mutual TLS between the
// nodes, gossip encryption and tokens, the cluster works for its
// administrator as a plaintext one does: topics, produce and consume,
// cluster status (HTTPS), a Durable Streams stream through a node that
// does not lead it, gossip; the liveness check stays open.
func TestSecureClusterServes(t *testing.T) {
	c := startSecure(t, 3)
	ctlOK(t, c, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "3")
	ctlOKIn(t, c, "a\nb\nc\n", "produce", "orders", "--key", "k")
	out := ctlOK(t, c, "consume", "orders", "--from-beginning", "-o", "json").Stdout
	assert.Equal(t, 3, strings.Count(out, `"value"`), out)
	st := ctlOK(t, c, "cluster", "status", "-o", "json").Stdout
	var status struct {
		Brokers []struct {
			ID     int32  `json:"id"`
			Gossip string `json:"gossip"`
		} `json:"brokers"`
	}
	require.NoError(t, json.Unmarshal([]byte(st), &status), st)
	require.Len(t, status.Brokers, 3)
	for _, b := range status.Brokers {
		assert.Equal(t, "alive", b.Gossip, "broker %d in the encrypted gossip", b.ID)
	}

	// Durable Streams over HTTPS with a bearer token, through every node.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c.Secure.TLS()}}
	do := func(method, node, path, body string) (int, string) {
		req, err := http.NewRequest(method, "https://"+c.Node(mustAtoi32(node)).HTTP+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+c.Secure.AdminToken)
		if method == http.MethodPut || method == http.MethodPost {
			req.Header.Set("Content-Type", "text/plain")
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := do(http.MethodPut, "1", "/v1/stream/chat/room", "")
	require.Equal(t, http.StatusCreated, code, body)
	for _, node := range []string{"2", "3"} {
		code, body = do(http.MethodPost, node, "/v1/stream/chat/room", "hi from "+node)
		require.Equal(t, http.StatusNoContent, code, body)
	}
	code, body = do(http.MethodGet, "2", "/v1/stream/chat/room?offset=-1", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "hi from 2hi from 3", body)

	// Liveness probes carry no token; the rest needs one.
	plainTLS := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.Secure.TLS()}}
	resp, err := plainTLS.Get("https://" + c.Node(1).HTTP + "/api/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, path := range []string{"/metrics", "/api/status", "/v1/stream/chat/room?offset=-1"} {
		resp, err := plainTLS.Get("https://" + c.Node(1).HTTP + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", path)
	}
	// Plain HTTP to the HTTPS listener is told so.
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + c.Node(1).HTTP + "/api/health")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(b), "HTTPS")
}

func mustAtoi32(s string) int32 {
	var n int32
	fmt.Sscan(s, &n)
	return n
}

// ctlOKIn is ctlOK with stdin.
func ctlOKIn(t *testing.T, c *Cluster, stdin string, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, stdin, args...)
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "gostream-ctl %v: %s%s", args, res.Stdout, res.Stderr)
	return res
}

// TestSecureRefusals: a plaintext client, a CA or a client certificate
// of another cluster, an expired certificate, a wrong or missing token:
// each is refused with a clear error on the client's side (exit 2, the
// error's name first), a bounded line in the node's log, and the node
// serves everyone else.
func TestSecureRefusals(t *testing.T) {
	c := startSecure(t, 3)
	ctlOK(t, c, "topic", "create", "t", "--partitions", "1", "--replication-factor", "3")

	other, err := newSecure(filepath.Join(t.TempDir(), "other"), 1)
	require.NoError(t, err)
	require.NoError(t, other.Issue("mallory", nil, time.Now().Add(time.Hour)))
	require.NoError(t, c.Secure.Issue("stale", nil, time.Now().Add(-time.Minute)))
	wrong := filepath.Join(t.TempDir(), "wrong.token")
	require.NoError(t, os.WriteFile(wrong, []byte("not-a-token"), 0o600))

	for _, tc := range []struct {
		name string
		env  []string
		exit int
		says []string
	}{
		{"plaintext", nil, 2, []string{"TLSMismatch", "accepts only TLS", "--tls-ca"}},
		{"another cluster's CA", []string{"GOSTREAM_TLS_CA=" + other.CAFile, "GOSTREAM_TOKEN_FILE=" + c.Secure.TokenFile}, 2,
			[]string{"Unauthenticated", "does not verify"}},
		{"client certificate of another CA", []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile, "GOSTREAM_TLS_CERT=" + other.File("mallory.crt"), "GOSTREAM_TLS_KEY=" + other.File("mallory.key")}, 2,
			[]string{"Unauthenticated", "refused this client"}},
		{"expired client certificate", []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile, "GOSTREAM_TLS_CERT=" + c.Secure.File("stale.crt"), "GOSTREAM_TLS_KEY=" + c.Secure.File("stale.key")}, 1,
			[]string{"InvalidFlag", "expired"}},
		{"wrong token", []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile, "GOSTREAM_TOKEN_FILE=" + wrong}, 2,
			[]string{"Unauthenticated", "not recognized"}},
		{"no token, no certificate", []string{"GOSTREAM_TLS_CA=" + c.Secure.CAFile}, 2,
			[]string{"Unauthenticated", "token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := ctlWith(t, c, tc.env, "topic", "list")
			assert.Equal(t, tc.exit, res.Exit)
			for _, s := range tc.says {
				assert.Contains(t, res.Stderr, s)
			}
			assert.True(t, strings.HasPrefix(res.Stderr, tc.says[0]+":"), "the error's name first: %s", res.Stderr)
			assert.Less(t, time.Since(start), 8*time.Second, "refused at once, not after retries")
			assert.NotContains(t, res.Stdout, "t ", "nothing listed")
		})
	}

	// The node refuses an expired client certificate itself too (the
	// client above refused to send it).
	pair, err := tls.LoadX509KeyPair(c.Secure.File("stale.crt"), c.Secure.File("stale.key"))
	require.NoError(t, err)
	cfg := c.Secure.TLS()
	cfg.Certificates = []tls.Certificate{pair}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		_, err = transport.Dial(ctx, c.Node(1).RPC, transport.ConnConfig{TLS: func() *tls.Config { return cfg }})
		require.ErrorIs(t, err, transport.ErrUnauthenticated)
	}
	assert.Contains(t, err.Error(), "expired certificate")

	// HTTPS handshakes that fail are counted and logged once a minute too.
	otherTLS := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: other.TLS()}}
	for range 20 {
		if resp, err := otherTLS.Get("https://" + c.Node(1).HTTP + "/api/health"); err == nil {
			resp.Body.Close()
			t.Fatal("a client of another CA was served")
		}
	}

	// Every refusal above is in node logs at most once a minute per
	// source and kind.
	for _, n := range c.Nodes {
		log := n.LogTail(2000)
		assert.LessOrEqual(t, strings.Count(log, "TLS handshake failed"), 2, "node %d", n.ID)
		assert.LessOrEqual(t, strings.Count(log, "a token was refused"), 1, "node %d", n.ID)
		assert.NotContains(t, log, "http: TLS handshake error", "node %d", n.ID)
	}
	assert.Equal(t, 1, strings.Count(c.Node(1).LogTail(2000), "HTTPS handshake failed"))
	unauthenticated := 0
	for _, n := range c.Nodes {
		k := strings.Count(n.LogTail(2000), "a request without authentication was refused")
		assert.LessOrEqual(t, k, 1, "node %d: once a minute per source", n.ID)
		unauthenticated += k
	}
	assert.GreaterOrEqual(t, unauthenticated, 1, "the request without a token is in a node's log")
	assert.Contains(t, c.Node(1).LogTail(2000), "TLS handshake failed")

	// And the cluster serves everyone else.
	ctlOKIn(t, c, "after\n", "produce", "t")
	assert.Contains(t, ctlOK(t, c, "consume", "t", "--from-beginning").Stdout, "after")
	body, err := c.Node(1).HTTPGet("/metrics")
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`gostream_authentication_failures_total\{kind="tls"\} [1-9]`), string(body))
}

// TestAuthorization: ACLs decide what a principal may do, default deny;
// they are cluster metadata, so every node enforces the same; without
// describe a principal cannot tell a topic that exists from one that does
// not; the operator's commands need operate on the cluster; denials are
// counted and logged at a bounded rate.
func TestAuthorization(t *testing.T) {
	c := startSecure(t, 3)
	ctlOK(t, c, "topic", "create", "orders", "--partitions", "1", "--replication-factor", "3")
	ctlOKIn(t, c, "first\n", "produce", "orders")
	alice := as(c, addToken(t, c, "alice"))

	hw := func() string {
		out := ctlOK(t, c, "topic", "describe", "orders", "-o", "json").Stdout
		return regexp.MustCompile(`"high_watermark":\d+`).FindString(out)
	}
	before := hw()

	// Nothing allowed: the topic cannot be seen, and a topic that does
	// not exist is refused with the same words.
	res := ctlWith(t, c, alice, "topic", "list")
	assert.Equal(t, 0, res.Exit, res.Stderr)
	assert.NotContains(t, res.Stdout, "orders")
	exists := ctlWith(t, c, alice, "topic", "describe", "orders")
	missing := ctlWith(t, c, alice, "topic", "describe", "nosuch")
	assert.Equal(t, 2, exists.Exit)
	assert.Equal(t, 2, missing.Exit)
	assert.Contains(t, exists.Stderr, "Unauthorized")
	assert.Equal(t, exists.Stderr, strings.ReplaceAll(missing.Stderr, "nosuch", "orders"), "the same answer whether the topic exists or not")
	res = ctlWith(t, c, alice, "produce", "orders", "sneaky")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "Unauthorized:"), res.Stderr)
	// The cluster's state is refused as what it is, at once.
	for _, args := range [][]string{{"cluster", "status"}, {"broker", "list"}, {"controller", "status"}, {"cluster", "history"}} {
		r := ctlWith(t, c, alice, args...)
		assert.Equal(t, 2, r.Exit, "%v", args)
		assert.True(t, strings.HasPrefix(r.Stderr, "Unauthorized:"), "%v: %s", args, r.Stderr)
	}
	// Groups it may not describe are left out, not refused.
	ctlOK(t, c, "consume", "orders", "--group", "billing", "--partition", "0", "--from-beginning")
	r := ctlWith(t, c, alice, "group", "list")
	assert.Equal(t, 0, r.Exit, r.Stderr)
	assert.NotContains(t, r.Stdout, "billing")

	// Read, not write: it sees and reads, it cannot append.
	ctlOK(t, c, "acl", "add", "--principal", "alice", "--topic", "orders", "--operation", "read")
	res = ctlWith(t, c, alice, "consume", "orders", "--from-beginning")
	assert.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "first")
	res = ctlWith(t, c, alice, "produce", "orders", "sneaky")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "Unauthorized:"), res.Stderr)
	assert.Contains(t, res.Stderr, `principal "alice" may not write topic "orders"`)
	assert.NotContains(t, res.Stderr, "outcome unknown", "refused before anything was written")
	assert.Equal(t, before, hw(), "nothing was written")

	// A member of a group it may not read stops at once, saying why.
	start := time.Now()
	res = ctlWith(t, c, alice, "consume", "orders", "--group", "billing", "--timeout", "5s")
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "Unauthorized")
	assert.Less(t, time.Since(start), 20*time.Second)
	ctlOK(t, c, "acl", "add", "--principal", "alice", "--group", "billing", "--operation", "read")
	res = ctlWith(t, c, alice, "consume", "orders", "--group", "billing", "--partition", "0", "--from-beginning")
	assert.Equal(t, 0, res.Exit, res.Stderr)
	r = ctlWith(t, c, alice, "group", "list")
	assert.Contains(t, r.Stdout, "billing")
	// The group's description leaves out a topic alice may not describe.
	ctlOK(t, c, "topic", "create", "hidden", "--partitions", "1", "--replication-factor", "3")
	ctlOKIn(t, c, "h\n", "produce", "hidden")
	ctlOK(t, c, "consume", "hidden", "--group", "billing", "--partition", "0", "--from-beginning")
	assert.Contains(t, ctlOK(t, c, "group", "describe", "billing", "-o", "json").Stdout, `"topic":"hidden"`)
	r = ctlWith(t, c, alice, "group", "describe", "billing", "-o", "json")
	assert.Equal(t, 0, r.Exit, r.Stderr)
	assert.Contains(t, r.Stdout, `"topic":"orders"`)
	assert.NotContains(t, r.Stdout, "hidden")

	// Create on the cluster creates any topic; the creator need not see it.
	bob := as(c, addToken(t, c, "bob"))
	ctlOK(t, c, "acl", "add", "--principal", "bob", "--cluster", "--operation", "create")
	res = ctlWith(t, c, bob, "topic", "create", "bobs", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, ctlOK(t, c, "topic", "list").Stdout, "bobs")

	// Every node enforces the ACLs it holds: each answers alice alone.
	for _, n := range c.Nodes {
		r := ctlWith(t, c, alice, "topic", "describe", "orders", "--bootstrap", n.Addr())
		assert.Equal(t, 0, r.Exit, "node %d: %s", n.ID, r.Stderr)
	}

	// The operator's commands need operate on the cluster.
	for _, args := range [][]string{
		{"failover", "--broker", "2", "--dry-run"},
		{"recover", "--broker", "2"},
		{"elect-leaders"},
		{"catch-up", "--topic", "orders", "--partition", "0", "--broker", "2"},
		{"topic", "delete", "orders"},
		{"group", "reset-offsets", "g", "--topic", "orders", "--to-earliest", "--execute"},
		{"controller", "transfer", "--to", "2"},
		{"acl", "add", "--principal", "alice", "--cluster", "--operation", "operate"},
	} {
		r := ctlWith(t, c, alice, args...)
		assert.Equal(t, 2, r.Exit, "%v", args)
		assert.Contains(t, r.Stderr, "Unauthorized", "%v", args)
	}
	ctlOK(t, c, "acl", "add", "--principal", "alice", "--cluster", "--operation", "operate")
	res = ctlWith(t, c, alice, "elect-leaders", "--dry-run")
	assert.Equal(t, 0, res.Exit, res.Stderr)
	res = ctlWith(t, c, alice, "failover", "--broker", "2", "--dry-run")
	assert.Contains(t, res.Stderr+res.Stdout, "LeaderStillAvailable", "allowed now, and refused for what it is")
	list := ctlOK(t, c, "acl", "list", "--principal", "alice", "-o", "json").Stdout
	assert.Contains(t, list, `"operation":"operate"`)
	assert.Contains(t, list, `"operation":"read"`)
	// Who granted what is in the audit trail.
	hist := ctlOK(t, c, "cluster", "history", "-o", "json").Stdout
	assert.Contains(t, hist, `"action":"acl-add"`)
	assert.Contains(t, hist, `alice may operate the cluster`)
	assert.Contains(t, hist, `alice may read topic \"orders\"`)

	// A burst of denials: every one counted, one log line.
	n1 := c.Node(1)
	logBefore := strings.Count(n1.LogTail(5000), `request denied`)
	conn, err := transport.Dial(context.Background(), n1.RPC, transport.ConnConfig{TLS: c.Secure.TLS, Token: tokenOf(t, alice)})
	require.NoError(t, err)
	defer conn.Close()
	for range 50 {
		err := conn.Call(context.Background(), transport.APIMetadata, &transport.MetadataRequest{Topics: []string{"secret"}}, &transport.MetadataResponse{})
		require.ErrorIs(t, err, transport.ErrUnauthorized)
	}
	logAfter := strings.Count(n1.LogTail(5000), `request denied`)
	assert.LessOrEqual(t, logAfter-logBefore, 1, "denials are logged once a minute per principal")
	body, err := n1.HTTPGet("/metrics")
	require.NoError(t, err)
	m := regexp.MustCompile(`gostream_authorization_denied_total\{operation="describe",resource_type="topic"\} (\d+)`).FindStringSubmatch(string(body))
	require.NotNil(t, m)
	assert.GreaterOrEqual(t, mustAtoi32(m[1]), int32(50))

	// Requests only nodes make are refused to a principal that is not one.
	err = conn.Call(context.Background(), transport.APIRegisterBroker, &transport.RegisterBrokerRequest{ID: 9, Addr: "127.0.0.1:1"}, &transport.MetadataBlob{})
	assert.ErrorIs(t, err, transport.ErrUnauthorized)
	err = conn.Call(context.Background(), transport.APIReplicate, &transport.ReplicateRequest{Topic: "orders"}, &transport.ReplicateResponse{})
	assert.ErrorIs(t, err, transport.ErrUnauthorized)
}

// tokenOf reads the token of a ctl environment built by as.
func tokenOf(t *testing.T, env []string) string {
	for _, kv := range env {
		if f, ok := strings.CutPrefix(kv, "GOSTREAM_TOKEN_FILE="); ok {
			tok, err := security.ReadTokenFile(f)
			require.NoError(t, err)
			return tok
		}
	}
	t.Fatal("no token file")
	return ""
}

// TestNodeWithoutTheClusterCertificate: a node whose certificate another
// CA signed cannot register, replicate or fetch metadata; the cluster
// goes on without it, and its log says why.
func TestNodeWithoutTheClusterCertificate(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Candidates: 3, Secure: true})
	other, err := newSecure(filepath.Join(t.TempDir(), "other"), 4)
	require.NoError(t, err)
	cl := newClient(t, c)
	createTopic(t, cl, "kept", 1, 3)

	// Node 4 slot: the cluster's CA to trust, another CA's certificate.
	n4 := &Node{ID: 4, DataDir: filepath.Join(c.Dir(), "node4"), bin: c.Bins.Node, logPath: filepath.Join(c.Dir(), "node4.log"),
		logf: t.Logf, host: "127.0.0.1", sec: c.Secure}
	require.NoError(t, c.freshAddrs(n4))
	n4.Args = []string{"--tls-cert", other.File("node4.crt"), "--tls-key", other.File("node4.key"), "--tls-ca", c.Secure.CAFile,
		"--gossip-key-file", c.Secure.GossipKey, "--auth-tokens-file", c.Secure.TokensFile, "--superusers", "node1,node2,node3,node4,admin"}
	t.Cleanup(func() { n4.Kill() })
	var join []string
	for _, n := range c.Nodes {
		join = append(join, n.Gossip)
	}
	require.NoError(t, n4.Start(c.Controller(), join))
	require.Eventually(t, func() bool {
		return strings.Contains(n4.LogTail(200), "cannot register with the controller yet")
	}, 30*time.Second, 100*time.Millisecond, "node 4 tries and fails to register")
	assert.Contains(t, n4.LogTail(200), "refused this client")

	res := ctlOK(t, c, "broker", "list", "-o", "json")
	assert.NotContains(t, res.Stdout, `"id":4`, "node 4 is not registered")
	for _, n := range c.Nodes {
		assert.Contains(t, n.LogTail(2000), "TLS handshake failed")
	}
	ctlOKIn(t, c, "v\n", "produce", "kept")
}

// TestGossipKeyRotation rotates the gossip key as docs/security.md says
// (install, use, remove, SIGHUP on every node each time): every node sees
// the others alive throughout; then a node that kept only the old key is
// shut out of the view, with a bounded line in the logs, and is let back
// in with the new one.
func TestGossipKeyRotation(t *testing.T) {
	c := startSecure(t, 3)
	oldKey, err := os.ReadFile(c.Secure.GossipKey)
	require.NoError(t, err)
	newKey := []byte("bmV3IGtleSBvZiAzMiBieXRlcyBmb3IgZ29zc2lwISE=\n") // 32 bytes
	_, err = security.ParseGossipKeys(newKey)
	require.NoError(t, err)

	allAlive := func() bool {
		res, err := c.Ctl(context.Background(), "", "broker", "list", "-o", "json")
		return err == nil && res.Exit == 0 && strings.Count(res.Stdout, `"gossip":"alive"`) == 3
	}
	step := func(name string, content []byte) {
		require.NoError(t, os.WriteFile(c.Secure.GossipKey, content, 0o600))
		for _, n := range c.Nodes {
			require.NoError(t, n.signal(syscall.SIGHUP))
		}
		for _, n := range c.Nodes {
			n := n
			require.Eventually(t, func() bool {
				return strings.Count(n.LogTail(2000), "gossip keys reloaded") >= reloads[name]
			}, 10*time.Second, 20*time.Millisecond, "%s: node %d reloaded its keys", name, n.ID)
		}
		// Gossip runs for a few probe rounds on the new keys.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			require.True(t, allAlive(), "%s: every node alive", name)
			time.Sleep(300 * time.Millisecond)
		}
	}
	// A node registers before gossip has found it alive everywhere: the
	// rotation starts from a view where it has.
	require.Eventually(t, allAlive, 30*time.Second, 100*time.Millisecond, "every node alive before the rotation")
	step("install", append(append([]byte{}, oldKey...), newKey...))
	step("use", append(append([]byte{}, newKey...), oldKey...))
	step("remove", newKey)

	// Node 3 with the old key alone: refused by the others.
	n3 := c.Node(3)
	require.NoError(t, n3.Stop(10*time.Second))
	oldOnly := filepath.Join(t.TempDir(), "old.key")
	require.NoError(t, os.WriteFile(oldOnly, oldKey, 0o600))
	args := n3.Args
	n3.Args = replaceFlag(args, "--gossip-key-file", oldOnly)
	require.NoError(t, c.StartNode(3))
	require.Eventually(t, func() bool {
		res, err := c.Ctl(context.Background(), "", "broker", "list", "-o", "json", "--bootstrap", c.Node(1).Addr())
		return err == nil && res.Exit == 0 && strings.Count(res.Stdout, `"gossip":"alive"`) == 2
	}, 30*time.Second, 200*time.Millisecond, "node 3 is out of the others' view")
	require.Eventually(t, func() bool {
		return strings.Contains(c.Node(1).LogTail(2000)+c.Node(2).LogTail(2000), "gossip that this node's keys cannot read")
	}, 20*time.Second, 100*time.Millisecond)
	for _, n := range c.Nodes {
		assert.LessOrEqual(t, strings.Count(n.LogTail(5000), "gossip that this node's keys cannot read"), 2, "node %d: bounded", n.ID)
	}
	require.NoError(t, n3.Stop(10*time.Second))
	n3.Args = args
	require.NoError(t, c.StartNode(3))
	require.Eventually(t, allAlive, 30*time.Second, 200*time.Millisecond, "node 3 back in the view with the new key")
}

// reloads is how many "gossip keys reloaded" lines each step leaves.
var reloads = map[string]int{"install": 1, "use": 2, "remove": 3}

func replaceFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if out[i] == flag && i+1 < len(out) {
			out[i+1] = value
		}
	}
	return out
}

// TestCertificatesReloadOnSIGHUP: a node's new certificate, written over
// its files, is used from the next handshake after SIGHUP, without a
// restart; a broken one is reported and the node keeps the old.
func TestCertificatesReloadOnSIGHUP(t *testing.T) {
	c := startSecure(t, 3)
	n1 := c.Node(1)
	serial := func() string {
		cfg := c.Secure.TLS()
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.Dial("tcp", n1.RPC, cfg)
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	require.NoError(t, c.Secure.Issue("node1", secureHosts(), time.Now().Add(48*time.Hour)))
	require.NoError(t, n1.signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return serial() != first }, 10*time.Second, 50*time.Millisecond, "the new certificate is served")
	second := serial()

	// A broken file: reported, and the node keeps the certificate it had.
	require.NoError(t, os.WriteFile(c.Secure.File("node1.crt"), []byte("not a certificate"), 0o644))
	require.NoError(t, n1.signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return strings.Contains(n1.LogTail(500), "reload of the security files failed")
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, second, serial())
	assert.True(t, n1.Running())

	// A certificate whose name is no superuser would lock this node out
	// of its peers: refused, the old one kept.
	require.NoError(t, c.Secure.Issue("intruder", secureHosts(), time.Now().Add(48*time.Hour)))
	for _, ext := range []string{".crt", ".key"} {
		data, err := os.ReadFile(c.Secure.File("intruder" + ext))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(c.Secure.File("node1"+ext), data, 0o600))
	}
	require.NoError(t, n1.signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return strings.Contains(n1.LogTail(500), `the new certificate names \"intruder\", which --superusers does not list`)
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, second, serial())
	cl := newClient(t, c)
	createTopic(t, cl, "still", 1, 3)
	require.NoError(t, c.Secure.Issue("node1", secureHosts(), time.Now().Add(48*time.Hour)))
}
