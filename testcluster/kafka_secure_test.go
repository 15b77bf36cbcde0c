package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
