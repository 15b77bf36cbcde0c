package transport

import (
	"crypto/tls"
	"crypto/x509"
)

// APIAuthenticate proves who a connection is: a client sends it first,
// with a bearer token, and every later request of the connection is that
// principal's. The transport serves it itself (ServerConfig.Authenticate);
// it never reaches the Handler.
const APIAuthenticate API = 44

func init() {
	apiNames[APIAuthenticate] = "Authenticate"
}

// MaxTokenBytes bounds the token of an AuthenticateRequest: tokens are
// 32 random bytes, written as 43 to 64 characters.
const MaxTokenBytes = 512

// AuthenticateRequest carries a bearer token.
type AuthenticateRequest struct {
	Token string
}

// Encode implements Message.
func (r *AuthenticateRequest) Encode(e *Encoder) { e.String(r.Token) }

// Decode implements Message.
func (r *AuthenticateRequest) Decode(d *Decoder) { r.Token = d.String() }

// AuthenticateResponse names the principal the connection now is.
type AuthenticateResponse struct {
	Principal string
}

// Encode implements Message.
func (r *AuthenticateResponse) Encode(e *Encoder) { e.String(r.Principal) }

// Decode implements Message.
func (r *AuthenticateResponse) Decode(d *Decoder) { r.Principal = d.String() }

// CertPrincipal is the principal a TLS connection's client certificate
// names: the Common Name of its leaf, if the certificate was verified
// against the server's CA; "" otherwise.
func CertPrincipal(st tls.ConnectionState) string {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	return leafName(st.PeerCertificates[0])
}

func leafName(c *x509.Certificate) string { return c.Subject.CommonName }
