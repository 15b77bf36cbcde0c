package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gostream/security"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// A secure cluster's Kafka listeners speak TLS with the nodes'
// certificates and take SASL/PLAIN (a principal and its token) and
// SASL/OAUTHBEARER (the token); the ACLs apply to what the principal
// asks, as for the native protocol. Before authentication nothing but
// ApiVersions and SASL is served; a wrong token is refused; kcat
// (librdkafka) works with SASL_SSL.
func TestKafkaTLSAndSASL(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, Secure: true})
	ctlOK(t, c, "topic", "create", "sec", "--partitions", "2", "--replication-factor", "3")
	ctlOK(t, c, "topic", "create", "other", "--partitions", "1", "--replication-factor", "3")
	pem, err := os.ReadFile(c.Secure.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seeds := []string{c.Node(1).Kafka, c.Node(2).Kafka}
	client := func(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		o := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(tlsCfg.Clone()), kgo.RequestRetries(2),
			kgo.RetryTimeout(5 * time.Second)}, opts...)
		if m != nil {
			o = append(o, kgo.SASL(m))
		}
		cl, err := kgo.NewClient(o...)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	admin := plain.Auth{User: "admin", Pass: c.Secure.AdminToken}.AsMechanism()

	// PLAIN, as admin (a superuser): produce (idempotent) and read back.
	pr := client(admin)
	require.NoError(t, pr.ProduceSync(ctx, &kgo.Record{Topic: "sec", Key: []byte("k"), Value: []byte("over tls")}).FirstErr())
	// OAUTHBEARER with the same token.
	bearer := client(oauth.Auth{Token: c.Secure.AdminToken}.AsMechanism(), kgo.ConsumeTopics("sec"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := bearer.PollFetches(ctx)
	require.NoError(t, fs.Err0())
	require.Equal(t, 1, fs.NumRecords())
	assert.Equal(t, "over tls", string(fs.Records()[0].Value))

	// A principal whose ACLs allow writing to sec only.
	aliceToken, err := os.ReadFile(addToken(t, c, "alice"))
	require.NoError(t, err)
	ctlOK(t, c, "acl", "add", "--principal", "alice", "--topic", "sec", "--operation", "write", "--operation", "describe")
	alice := client(plain.Auth{User: "alice", Pass: string(aliceToken)}.AsMechanism(), kgo.DisableIdempotentWrite())
	require.NoError(t, alice.ProduceSync(ctx, &kgo.Record{Topic: "sec", Value: []byte("alice's")}).FirstErr())
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("not hers")}).FirstErr()
	require.Error(t, err)
	assert.ErrorIs(t, err, kerr.TopicAuthorizationFailed, "%v", err)

	// alice's token under another name, a wrong token, and no SASL at
	// all: nothing is served.
	for name, m := range map[string]sasl.Mechanism{
		"another name": plain.Auth{User: "bob", Pass: string(aliceToken)}.AsMechanism(),
		"wrong token":  plain.Auth{User: "admin", Pass: "not-a-token"}.AsMechanism(),
		"no SASL":      nil,
	} {
		cl := client(m)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		err := cl.Ping(pctx)
		pcancel()
		assert.Error(t, err, name)
	}

	// Plaintext on a TLS listener: the handshake fails, nothing else.
	plainCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(1))
	require.NoError(t, err)
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	assert.Error(t, plainCl.Ping(pctx))
	pcancel()
	plainCl.Close()

	// librdkafka with SASL_SSL.
	kcat := kcatPath(t)
	out, err := exec.CommandContext(ctx, kcat, "-b", c.Node(3).Kafka, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+c.Secure.CAFile,
		"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=admin", "-X", "sasl.password="+c.Secure.AdminToken,
		"-t", "sec", "-C", "-e", "-o", "beginning", "-f", "%s\\n").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "over tls")
	assert.Contains(t, string(out), "alice's")
	assert.False(t, strings.Contains(string(out), "not hers"))
}

// kafkaCall sends req on c as correlation id corr and decodes the
// answer into resp (header v0: none of the requests used is flexible).
func kafkaCall(c net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len("revoke")+len(body)))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	frame = binary.BigEndian.AppendUint16(frame, uint16(len("revoke")))
	frame = append(append(frame, "revoke"...), body...)
	if _, err := c.Write(frame); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(buf[4:])
}

// TestKafkaRevokedTokenEndsItsConnections: two Kafka connections over
// TLS, each authenticated with SASL/PLAIN by a token of its own; the
// reader's token leaves the tokens file and the node reloads. Within the
// bound the node closes the reader's connection, saying so in its one
// line about the reload; the keeper's goes on being answered.
func TestKafkaRevokedTokenEndsItsConnections(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 1, Candidates: 1, Kafka: true, Secure: true})
	tokens := writeTokens(t, c, "reader", "keeper")
	reloadSecurity(t, c)
	pem, err := os.ReadFile(c.Secure.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))

	connect := func(principal string) net.Conn {
		t.Helper()
		token, err := security.ReadTokenFile(tokens[principal])
		require.NoError(t, err)
		conn, err := tls.Dial("tcp", c.Node(1).Kafka, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		hsResp := kmsg.NewPtrSASLHandshakeResponse()
		require.NoError(t, kafkaCall(conn, 1, hs, hsResp))
		require.Zero(t, hsResp.ErrorCode)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 1, []byte("\x00"+principal+"\x00"+token)
		authResp := kmsg.NewPtrSASLAuthenticateResponse()
		require.NoError(t, kafkaCall(conn, 2, auth, authResp))
		require.Zero(t, authResp.ErrorCode, "%v", authResp.ErrorMessage)
		return conn
	}
	metadata := func(conn net.Conn, corr int32) error {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 4
		return kafkaCall(conn, corr, req, kmsg.NewPtrMetadataResponse())
	}
	reader, keeper := connect("reader"), connect("keeper")
	require.NoError(t, metadata(reader, 3))
	require.NoError(t, metadata(keeper, 3))

	writeTokensKeeping(t, c, tokens, "keeper")
	before := endedLines(c)
	revoked := time.Now()
	reloadSecurity(t, c)
	// The reader's connection is closed by the node: a read ends.
	reader.SetDeadline(revoked.Add(revokeBound))
	_, err = reader.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the revoked reader's connection is still open %s after the reload", revokeBound)
	t.Logf("the revoked reader's connection ended %s after the SIGHUP", time.Since(revoked).Round(time.Millisecond))
	require.NoError(t, metadata(keeper, 4), "the keeper's connection is answered after the reload")
	require.Eventually(t, func() bool { return endedLines(c)[1] == before[1]+1 }, 10*time.Second, 20*time.Millisecond)
	assert.Contains(t, c.Node(1).LogTail(100000), "kafka_connections=1")
	// And the revoked token opens nothing new.
	conn, err := tls.Dial("tcp", c.Node(1).Kafka, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	require.NoError(t, kafkaCall(conn, 1, hs, kmsg.NewPtrSASLHandshakeResponse()))
	token, err := security.ReadTokenFile(tokens["reader"])
	require.NoError(t, err)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00reader\x00"+token)
	authResp := kmsg.NewPtrSASLAuthenticateResponse()
	require.NoError(t, kafkaCall(conn, 2, auth, authResp))
	assert.Equal(t, kerr.SaslAuthenticationFailed.Code, authResp.ErrorCode)
}

// Group ACLs apply to Kafka's group requests as to native ones: a
// principal that may read a topic but not the group is refused
// (GROUP_AUTHORIZATION_FAILED) and writes nothing; given read on the
// group, its franz-go group consumer reads and commits.
func TestKafkaGroupACLs(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 1, Candidates: 1, Kafka: true, Secure: true, NodeArgs: []string{"--group-initial-rebalance-delay", "0s"}})
	ctlOK(t, c, "topic", "create", "acl-t", "--partitions", "2", "--replication-factor", "1")
	ctlOKIn(t, c, "one\ntwo\n", "produce", "acl-t")
	token, err := os.ReadFile(addToken(t, c, "bob"))
	require.NoError(t, err)
	ctlOK(t, c, "acl", "add", "--principal", "bob", "--topic", "acl-t", "--operation", "read", "--operation", "describe")
	pem, err := os.ReadFile(c.Secure.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	consumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			kgo.SASL(plain.Auth{User: "bob", Pass: string(token)}.AsMechanism()), kgo.ConsumerGroup("bobs"), kgo.ConsumeTopics("acl-t"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		return cl
	}
	cl := consumer()
	var groupErr error
	for groupErr == nil && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { groupErr = err })
		if fs.NumRecords() > 0 {
			t.Fatal("bob read without read on the group")
		}
	}
	cl.Close()
	assert.ErrorIs(t, groupErr, kerr.GroupAuthorizationFailed)
	res, err := c.Ctl(ctx, "", "group", "describe", "bobs")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit, "nothing was written for the group: %s%s", res.Stdout, res.Stderr)

	ctlOK(t, c, "acl", "add", "--principal", "bob", "--group", "bobs", "--operation", "read", "--operation", "describe")
	cl = consumer()
	defer cl.Close()
	n := 0
	for n < 2 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0())
		n += fs.NumRecords()
	}
	require.Equal(t, 2, n)
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))
	assert.Contains(t, ctlOK(t, c, "group", "describe", "bobs").Stdout, "Kafka protocol type consumer")
}
