package security

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var genFuzzSeeds = flag.Bool("gen-fuzz-seeds", false, "rewrite the generated seed corpus under testdata/fuzz")

// hashOf is the hex SHA-256 of token, as a tokens file writes it.
func hashOf(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

func entry(principal, token string) tokenEntry {
	return tokenEntry{hash: sha256.Sum256([]byte(token)), principal: principal}
}

// writeFile writes data to dir/name and returns its path.
func writeFile(t testing.TB, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

func TestParseTokens(t *testing.T) {
	data := "# gostream tokens\n" +
		"\n" +
		"alice sha256:" + hashOf("alice-1") + "\n" +
		"   \t\n" +
		"  bob \t sha256:" + strings.ToUpper(hashOf("bob-1")) + "  \n" +
		"\t# an indented comment\n" +
		"alice sha256:" + hashOf("alice-2") + "\r\n" + // a file edited on Windows
		"node-1.example.com sha256:" + hashOf("node") // no final newline
	got, err := parseTokens([]byte(data))
	require.NoError(t, err)
	assert.Equal(t, []tokenEntry{
		entry("alice", "alice-1"),
		entry("bob", "bob-1"),
		entry("alice", "alice-2"),
		entry("node-1.example.com", "node"),
	}, got)

	for _, empty := range []string{"", "\n\n", "# nothing yet\n", "  # indented\n\t\n"} {
		got, err := parseTokens([]byte(empty))
		require.NoError(t, err, "%q", empty)
		assert.Empty(t, got, "%q", empty)
	}
}

// Each malformed line is refused, and the error names its line, so the
// operator knows where to look.
func TestParseTokensRefusesMalformedLines(t *testing.T) {
	good := "alice sha256:" + hashOf("alice-1")
	h := hashOf("carol-1")
	tests := []struct {
		name string
		line string
		want string // besides "line 3"
	}{
		{"principal alone", "carol", "PRINCIPAL sha256:HEX"},
		{"hash alone", "sha256:" + h, "PRINCIPAL sha256:HEX"},
		{"three fields", "carol sha256:" + h + " extra", "PRINCIPAL sha256:HEX"},
		{"token in the clear", "carol s3cret-token", "sha256:"},
		{"hash without prefix", "carol " + h, "sha256:"},
		{"other algorithm", "carol sha1:" + h[:40], "sha256:"},
		{"prefix in upper case", "carol SHA256:" + h, "sha256:"},
		{"not hex", "carol sha256:zz" + h[2:], "64 hexadecimal digits"},
		{"odd digit count", "carol sha256:" + h[:63], "64 hexadecimal digits"},
		{"too short", "carol sha256:" + h[:62], "64 hexadecimal digits"},
		{"too long", "carol sha256:" + h + "00", "64 hexadecimal digits"},
		{"empty hash", "carol sha256:", "64 hexadecimal digits"},
		{"duplicate hash", "carol sha256:" + hashOf("alice-1"), "line 1"},
		{"duplicate hash in upper case", "alice sha256:" + strings.ToUpper(hashOf("alice-1")), "line 1"},
		{"principal star", "* sha256:" + h, `"*"`},
		{"principal with a comma", "carol,dave sha256:" + h, "commas"},
		{"principal with a control character", "car\x01ol sha256:" + h, "control"},
		{"principal with DEL", "car\x7fol sha256:" + h, "control"},
		{"principal too long", strings.Repeat("p", 257) + " sha256:" + h, "256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := good + "\n# a comment\n" + tt.line + "\n" + "dave sha256:" + hashOf("dave-1") + "\n"
			got, err := parseTokens([]byte(data))
			require.Error(t, err)
			assert.Nil(t, got, "a file with a bad line gives no tokens at all")
			assert.Contains(t, err.Error(), "line 3:")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadTokensAndReload(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tokens", "alice sha256:"+hashOf("alice-1")+"\n")
	tokens, err := LoadTokens(path)
	require.NoError(t, err)
	assert.Equal(t, 1, tokens.Len())
	got, err := tokens.Authenticate("alice-1")
	require.NoError(t, err)
	assert.Equal(t, "alice", got)

	// A reload of a broken file is an error naming the file and line, and
	// the tokens loaded before still work.
	writeFile(t, dir, "tokens", "bob sha256:"+hashOf("bob-1")+"\nbob sha256:not-hex\n")
	err = tokens.Reload()
	require.ErrorIs(t, err, ErrTokensFile)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "line 2")
	assert.Equal(t, 1, tokens.Len())
	got, err = tokens.Authenticate("alice-1")
	require.NoError(t, err)
	assert.Equal(t, "alice", got)
	_, err = tokens.Authenticate("bob-1")
	assert.ErrorIs(t, err, ErrUnknownToken, "a token of a file that did not load")

	// A file that vanished keeps what was loaded too.
	require.NoError(t, os.Remove(path))
	require.ErrorIs(t, tokens.Reload(), ErrTokensFile)
	got, err = tokens.Authenticate("alice-1")
	require.NoError(t, err)
	assert.Equal(t, "alice", got)

	// A good file replaces the tokens: the removed ones stop working.
	writeFile(t, dir, "tokens", "bob sha256:"+hashOf("bob-1")+"\n")
	require.NoError(t, tokens.Reload())
	assert.Equal(t, 1, tokens.Len())
	_, err = tokens.Authenticate("alice-1")
	assert.ErrorIs(t, err, ErrUnknownToken, "a token removed from the file")
	got, err = tokens.Authenticate("bob-1")
	require.NoError(t, err)
	assert.Equal(t, "bob", got)
}

func TestLoadTokensRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
	}{
		{"missing file", filepath.Join(dir, "absent")},
		{"malformed line", writeFile(t, dir, "bad", "alice sha256:"+hashOf("x")+"\nbob\n")},
		{"over the size limit", writeFile(t, dir, "huge", strings.Repeat("#\n", MaxTokensFileBytes/2+1))},
		{"a line over 64 KiB", writeFile(t, dir, "long", "# "+strings.Repeat("x", 70<<10)+"\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens, err := LoadTokens(tt.path)
			require.ErrorIs(t, err, ErrTokensFile)
			assert.Nil(t, tokens)
		})
	}
}

func TestAuthenticate(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tokens", strings.Join([]string{
		"alice sha256:" + hashOf("alice-laptop"),
		"bob sha256:" + strings.ToUpper(hashOf("bob-1")),
		"alice sha256:" + hashOf("alice-ci"),
		"# the empty token is listed, and still refused",
		"mallory sha256:" + hashOf(""),
	}, "\n"))
	tokens, err := LoadTokens(path)
	require.NoError(t, err)
	require.Equal(t, 4, tokens.Len())

	tests := []struct {
		name  string
		token string
		want  string // "" for ErrUnknownToken
	}{
		{"alice's first token", "alice-laptop", "alice"},
		{"alice's second token", "alice-ci", "alice"},
		{"a hash written in upper case", "bob-1", "bob"},
		{"wrong token", "alice-phone", ""},
		{"empty token", "", ""},
		{"token with a trailing newline", "alice-laptop\n", ""},
		{"token in another case", "ALICE-LAPTOP", ""},
		{"the stored hash itself", hashOf("alice-laptop"), ""},
		{"the stored line's hash field", "sha256:" + hashOf("alice-laptop"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tokens.Authenticate(tt.token)
			if tt.want == "" {
				assert.ErrorIs(t, err, ErrUnknownToken)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A token from NewToken, its line in a tokens file, and the token read
// back from a client's token file, authenticate its principal.
func TestNewTokenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	token, line, err := NewToken("alice")
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err, "a token is unpadded URL-safe base64")
	assert.Len(t, raw, 32)
	assert.Equal(t, TokenLine("alice", token), line)
	assert.Equal(t, "alice sha256:"+hashOf(token), line)
	assert.NotContains(t, line, token, "the line holds the hash, never the token")

	token2, line2, err := NewToken("bob")
	require.NoError(t, err)
	assert.NotEqual(t, token, token2, "tokens are random")

	path := writeFile(t, dir, "tokens", "# made by gostream-ctl token create\n"+line+"\n"+line2+"\n")
	tokens, err := LoadTokens(path)
	require.NoError(t, err)
	tokenFile := writeFile(t, dir, "alice.token", token+"\n")
	read, err := ReadTokenFile(tokenFile)
	require.NoError(t, err)
	assert.Equal(t, token, read)
	got, err := tokens.Authenticate(read)
	require.NoError(t, err)
	assert.Equal(t, "alice", got)
	got, err = tokens.Authenticate(token2)
	require.NoError(t, err)
	assert.Equal(t, "bob", got)

	for _, bad := range []string{"", "*", "two words", "a,b", "tab\there"} {
		tok, ln, err := NewToken(bad)
		assert.Error(t, err, "principal %q", bad)
		assert.Empty(t, tok, "principal %q", bad)
		assert.Empty(t, ln, "principal %q", bad)
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		data string
		want string // "" for an error
	}{
		{"token and newline", "tok-123\n", "tok-123"},
		{"token alone", "tok-123", "tok-123"},
		{"white space around", "  \t tok-123 \r\n\n", "tok-123"},
		{"empty", "", ""},
		{"only white space", " \n\t\r\n", ""},
		{"two tokens on a line", "tok-1 tok-2\n", ""},
		{"two tokens on two lines", "tok-1\ntok-2\n", ""},
		{"a tokens file line", "alice sha256:" + hashOf("x") + "\n", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, fmt.Sprint("token", i), tt.data)
			got, err := ReadTokenFile(path)
			if tt.want == "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), path)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ReadTokenFile(filepath.Join(dir, "absent"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "a missing file: %v", err)
}

func TestCheckPrincipal(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"node-1", true},
		{"node1.gostream.svc.cluster.local", true},
		{"ops@example.com", true},
		{"CN=admin;O=ops", true},
		{"élodie", true},
		{"用户", true},
		{strings.Repeat("a", 256), true},

		{"", false},
		{"*", false},
		{strings.Repeat("a", 257), false},
		{"two words", false},
		{" alice", false},
		{"alice ", false},
		{"tab\there", false},
		{"new\nline", false},
		{"carriage\rreturn", false},
		{"a,b", false},
		{",", false},
		{"nul\x00", false},
		{"esc\x1b[31m", false},
		{"del\x7f", false},
		// Each would be a name a tokens file cannot hold: strings.Fields
		// splits on Unicode spaces, and # begins a comment.
		{"no\u00a0break", false},
		{"next\u0085line", false},
		{"line\u2028sep", false},
		{"#admin", false},
		{"bad\xffutf8", false},
		{"a#b", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.name), func(t *testing.T) {
			err := CheckPrincipal(tt.name)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// tokenFuzzSeeds are the seed corpus of FuzzParseTokens.
func tokenFuzzSeeds() map[string][]byte {
	h := hashOf("alice-1")
	return map[string][]byte{
		"valid":             []byte("# tokens\n\nalice sha256:" + h + "\nbob sha256:" + strings.ToUpper(hashOf("bob-1")) + "\r\nalice sha256:" + hashOf("alice-2")),
		"empty":             {},
		"comments-only":     []byte("# a\n\n  # b\n"),
		"no-prefix":         []byte("alice " + h + "\n"),
		"short-hash":        []byte("alice sha256:" + h[:62] + "\n"),
		"duplicate":         []byte("alice sha256:" + h + "\nbob sha256:" + strings.ToUpper(h) + "\n"),
		"star":              []byte("* sha256:" + h + "\n"),
		"comma":             []byte("a,b sha256:" + h + "\n"),
		"three-fields":      []byte("alice sha256:" + h + " x\n"),
		"control-character": []byte("a\x00b sha256:" + h + "\n"),
		"unicode":           []byte("élodie\u00a0sha256:" + h + "\n\ufeffbom sha256:" + hashOf("x") + "\n"),
	}
}

// FuzzParseTokens parses arbitrary bytes as a tokens file: no panic; what
// it accepts has valid principals and unique hashes, and written back as
// lines it parses to the same entries.
func FuzzParseTokens(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseTokens(data)
		if err != nil {
			require.Nil(t, entries)
			return
		}
		seen := map[[sha256.Size]byte]bool{}
		var lines []string
		for _, e := range entries {
			require.NoError(t, CheckPrincipal(e.principal))
			require.False(t, seen[e.hash], "hash %x twice", e.hash)
			seen[e.hash] = true
			lines = append(lines, e.principal+" sha256:"+hex.EncodeToString(e.hash[:]))
		}
		again, err := parseTokens([]byte(strings.Join(lines, "\n")))
		require.NoError(t, err, "entries written back: %q", lines)
		require.Equal(t, entries, again)
	})
}

// TestFuzzSeedCorpus keeps testdata/fuzz in step with the seeds of this
// package's fuzz targets; run with -gen-fuzz-seeds to rewrite them.
func TestFuzzSeedCorpus(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{
		"FuzzParseTokens":     tokenFuzzSeeds(),
		"FuzzParseGossipKeys": gossipFuzzSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seeds {
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			path := filepath.Join(dir, name)
			if *genFuzzSeeds {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			if assert.NoError(t, err, "seed %s missing; run go test -run TestFuzzSeedCorpus -gen-fuzz-seeds", path) {
				assert.Equal(t, want, string(got), "seed %s is stale; run go test -run TestFuzzSeedCorpus -gen-fuzz-seeds", path)
			}
		}
	}
}

// PrincipalOf answers for the hash of a token what Authenticate answers
// for the token, as the file says after each reload: a token removed is
// unknown, a token moved to another line names its new principal.
func TestPrincipalOfAfterReload(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "tokens", "alice sha256:"+hashOf("a-1")+"\nbob sha256:"+hashOf("b-1")+"\n")
	tokens, err := LoadTokens(path)
	require.NoError(t, err)
	a, b := sha256.Sum256([]byte("a-1")), sha256.Sum256([]byte("b-1"))
	got, err := tokens.PrincipalOf(a)
	require.NoError(t, err)
	assert.Equal(t, "alice", got)

	writeFile(t, dir, "tokens", "carol sha256:"+hashOf("b-1")+"\n")
	require.NoError(t, tokens.Reload())
	_, err = tokens.PrincipalOf(a)
	assert.ErrorIs(t, err, ErrUnknownToken, "removed from the file")
	got, err = tokens.PrincipalOf(b)
	require.NoError(t, err)
	assert.Equal(t, "carol", got, "the same token on another principal's line")
	_, err = tokens.PrincipalOf([sha256.Size]byte{})
	assert.ErrorIs(t, err, ErrUnknownToken)
}
