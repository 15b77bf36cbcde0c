package kafkaapi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The SASL messages: PLAIN's principal must own its token, OAUTHBEARER's
// token names the principal; anything malformed, or before a handshake,
// is refused and leaves the connection without a principal.
func TestSASLMessages(t *testing.T) {
	s := New(Config{Security: Security{Required: true, Token: func(token string) (string, error) {
		if token == "alice-token" {
			return "alice", nil
		}
		return "", errors.New("the token is not recognized")
	}}})
	for _, c := range []struct {
		mech, msg, principal string
	}{
		{mechPlain, "\x00alice\x00alice-token", "alice"},
		{mechPlain, "alice\x00alice\x00alice-token", "alice"},
		{mechPlain, "bob\x00alice\x00alice-token", ""},
		{mechPlain, "\x00bob\x00alice-token", ""},
		{mechPlain, "\x00alice\x00wrong", ""},
		{mechPlain, "alice-token", ""},
		{mechOAuthBearer, "n,,\x01auth=Bearer alice-token\x01\x01", "alice"},
		{mechOAuthBearer, "n,,\x01auth=bearer alice-token\x01host=x\x01\x01", "alice"},
		{mechOAuthBearer, "n,,\x01auth=Basic alice-token\x01\x01", ""},
		{mechOAuthBearer, "n,,\x01\x01", ""},
		{"", "\x00alice\x00alice-token", ""},
	} {
		st := &connState{tls: true, mech: c.mech}
		err := s.authenticate(st, []byte(c.msg))
		assert.Equal(t, c.principal, st.principal, "%s %q", c.mech, c.msg)
		assert.Equal(t, c.principal == "", err != nil, "%s %q: %v", c.mech, c.msg, err)
	}

	// Handshakes: nothing offered without TLS; an unknown mechanism; and
	// SaslAuthenticate before a v1 handshake.
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, "PLAIN"
	plain := &connState{}
	resp := s.saslHandshake(plain, req).(*kmsg.SASLHandshakeResponse)
	assert.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode, "no SASL in the clear")
	assert.Empty(t, resp.SupportedMechanisms)
	secure := &connState{tls: true}
	req.Mechanism = "SCRAM-SHA-256"
	resp = s.saslHandshake(secure, req).(*kmsg.SASLHandshakeResponse)
	assert.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode)
	assert.Equal(t, []string{mechPlain, mechOAuthBearer}, resp.SupportedMechanisms)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00alice-token")
	aresp, err := s.saslAuthenticate(secure, auth)
	assert.NoError(t, err)
	assert.Equal(t, kerr.IllegalSaslState.Code, aresp.(*kmsg.SASLAuthenticateResponse).ErrorCode)
	req.Mechanism = "plain"
	resp = s.saslHandshake(secure, req).(*kmsg.SASLHandshakeResponse)
	assert.Zero(t, resp.ErrorCode)
	aresp, err = s.saslAuthenticate(secure, auth)
	assert.NoError(t, err)
	assert.Zero(t, aresp.(*kmsg.SASLAuthenticateResponse).ErrorCode)
	assert.Equal(t, "alice", secure.principal)

	// Before a principal only ApiVersions and SASL are admitted.
	none := &connState{tls: true}
	assert.True(t, s.admitted(none, kmsg.SASLHandshake.Int16()))
	assert.False(t, s.admitted(none, kmsg.Metadata.Int16()))
	assert.True(t, s.admitted(secure, kmsg.Metadata.Int16()))
}
