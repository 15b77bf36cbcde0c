package security

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"gostream/metadata"
)

// The bearer tokens file (--auth-tokens-file) has one line per token:
//
//	PRINCIPAL sha256:HEX
//
// where HEX is the SHA-256 of the token, in lower or upper case. Blank
// lines and lines that begin with # are ignored. A principal may have
// several tokens (one line each); a hash may appear once. Tokens are 32
// random bytes (NewToken), so an unsalted hash is as good as a salted
// one: no one finds a preimage of a random 256-bit secret.

// ErrUnknownToken is the refusal of a token no line of the file names.
var ErrUnknownToken = errors.New("security: the token is not recognized")

// ErrTokensFile is matched by every error of reading a tokens file.
var ErrTokensFile = errors.New("security: tokens file")

// MaxTokensFileBytes bounds the tokens file.
const MaxTokensFileBytes = 4 << 20

// Tokens maps the hashes of bearer tokens to principals, as the file said
// when it was last loaded. Safe for concurrent use.
type Tokens struct {
	path string
	cur  atomic.Pointer[[]tokenEntry]
}

type tokenEntry struct {
	hash      [sha256.Size]byte
	principal string
}

// LoadTokens reads a tokens file.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again; on an error it keeps what it had.
func (t *Tokens) Reload() error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTokensFile, err)
	}
	if len(data) > MaxTokensFileBytes {
		return fmt.Errorf("%w: %s is %d bytes; at most %d", ErrTokensFile, t.path, len(data), MaxTokensFileBytes)
	}
	entries, err := parseTokens(data)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrTokensFile, t.path, err)
	}
	t.cur.Store(&entries)
	return nil
}

// Len is the number of tokens loaded.
func (t *Tokens) Len() int { return len(*t.cur.Load()) }

// parseTokens reads the lines of a tokens file.
func parseTokens(data []byte) ([]tokenEntry, error) {
	var out []tokenEntry
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want PRINCIPAL sha256:HEX", n)
		}
		name, hashText := fields[0], fields[1]
		if err := CheckPrincipal(name); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		hexText, ok := strings.CutPrefix(hashText, "sha256:")
		if !ok {
			return nil, fmt.Errorf("line %d: the hash must begin with sha256: (tokens are stored hashed, never in the clear)", n)
		}
		raw, err := hex.DecodeString(hexText)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: want sha256: and 64 hexadecimal digits", n)
		}
		var e tokenEntry
		copy(e.hash[:], raw)
		e.principal = name
		if prev, dup := seen[e.hash]; dup {
			return nil, fmt.Errorf("line %d: the same token hash as line %d", n, prev)
		}
		seen[e.hash] = n
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("a line longer than 64 KiB: %w", err)
	}
	return out, nil
}

// Authenticate returns the principal token belongs to, or
// ErrUnknownToken. Every entry is compared, in constant time, so the time
// it takes says nothing about which hashes are close.
func (t *Tokens) Authenticate(token string) (string, error) {
	if token == "" {
		return "", ErrUnknownToken
	}
	return t.PrincipalOf(sha256.Sum256([]byte(token)))
}

// PrincipalOf returns the principal of the token whose SHA-256 is sum, as
// the file said when it was last loaded, or ErrUnknownToken: what a node
// asks again, after a reload, about the tokens its open connections
// authenticated with (it keeps their hashes, never the tokens).
func (t *Tokens) PrincipalOf(sum [sha256.Size]byte) (string, error) {
	principal := ""
	for _, e := range *t.cur.Load() {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			principal = e.principal
		}
	}
	if principal == "" {
		return "", ErrUnknownToken
	}
	return principal, nil
}

// NewToken makes a token for principal: 32 random bytes in unpadded
// URL-safe base64, and the line of the tokens file that accepts it.
func NewToken(principal string) (token, line string, err error) {
	if err := CheckPrincipal(principal); err != nil {
		return "", "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, TokenLine(principal, token), nil
}

// TokenLine is the line of the tokens file that accepts token for
// principal.
func TokenLine(principal, token string) string {
	h := sha256.Sum256([]byte(token))
	return principal + " sha256:" + hex.EncodeToString(h[:])
}

// ReadTokenFile reads a client's token file (gostream-ctl --token-file):
// the token alone, surrounding white space ignored.
func ReadTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("the token file %s must hold one token and nothing else", path)
	}
	return tok, nil
}

// CheckPrincipal refuses names that cannot be principals (see
// metadata.CheckPrincipal, the one rule for tokens files, --superusers
// and ACLs).
func CheckPrincipal(name string) error { return metadata.CheckPrincipal(name) }
