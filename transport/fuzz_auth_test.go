package transport

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authFuzzSeeds are the seed corpus of FuzzAuthenticateRequest: bodies of
// Authenticate requests and responses, and broken ones near the checks.
func authFuzzSeeds() map[string][]byte {
	token := Marshal(nil, &AuthenticateRequest{Token: "q3J1bmNoeS1yYW5kb20tdG9rZW4tb2YtMzItYnl0ZXMx"})
	return map[string][]byte{
		"token":           token,
		"principal":       Marshal(nil, &AuthenticateResponse{Principal: "node1.gostream.svc"}),
		"empty-token":     Marshal(nil, &AuthenticateRequest{}),
		"over-max-token":  Marshal(nil, &AuthenticateRequest{Token: strings.Repeat("t", MaxTokenBytes+1)}),
		"binary-token":    Marshal(nil, &AuthenticateRequest{Token: "\x00\xff\n"}),
		"empty":           {},
		"one-byte":        {0},
		"truncated":       token[:len(token)/2],
		"trailing-byte":   append(bytes.Clone(token), 0),
		"claims-too-much": {0xff, 0xff, 'a'},
	}
}

// FuzzAuthenticateRequest decodes arbitrary bytes as an AuthenticateRequest
// and as an AuthenticateResponse (a connection's first request, read
// before anything about the client is known): decoding never panics,
// fails only with ErrMalformed, and a body that decodes is the one
// encoding of its value.
func FuzzAuthenticateRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, m := range []Message{&AuthenticateRequest{}, &AuthenticateResponse{}} {
			if err := Unmarshal(body, m); err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("%T: error does not wrap ErrMalformed: %v", m, err)
				}
				continue
			}
			if again := Marshal(nil, m); !bytes.Equal(again, body) {
				t.Fatalf("%T: re-encoding differs:\n in  %x\n out %x\n value %#v", m, body, again, m)
			}
		}
	})
}

func TestAuthenticateMessagesRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&AuthenticateRequest{Token: "s3cret"},
		&AuthenticateRequest{},
		&AuthenticateResponse{Principal: "élodie"},
		&AuthenticateResponse{},
	} {
		enc := Marshal(nil, m)
		got := newLike(m)
		require.NoError(t, Unmarshal(enc, got), "%T", m)
		assert.Equal(t, m, got)
		assert.Error(t, Unmarshal(append(enc, 0), newLike(m)), "%T with a byte left over", m)
		assert.Error(t, Unmarshal(enc[:len(enc)-1], newLike(m)), "%T cut short", m)
	}
}

// TestAuthFuzzSeedCorpus keeps testdata/fuzz/FuzzAuthenticateRequest in
// step with authFuzzSeeds; run with -gen-fuzz-seeds to rewrite it.
func TestAuthFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzAuthenticateRequest")
	for name, b := range authFuzzSeeds() {
		path := filepath.Join(dir, name)
		if *genFuzzSeeds {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, corpusFile(b), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		if assert.NoError(t, err, "run go test -run TestAuthFuzzSeedCorpus -gen-fuzz-seeds") {
			assert.Equal(t, string(corpusFile(b)), string(got), "%s is stale: run with -gen-fuzz-seeds", path)
		}
	}
}
