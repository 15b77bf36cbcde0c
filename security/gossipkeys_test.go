package security

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gossipKey is a key of n bytes that differs with seed.
func gossipKey(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = seed + byte(i)*7
	}
	return k
}

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func TestParseGossipKeys(t *testing.T) {
	for _, n := range []int{16, 24, 32} {
		t.Run(fmt.Sprint(n, " bytes"), func(t *testing.T) {
			k := gossipKey(n, 1)
			keys, err := ParseGossipKeys([]byte(b64(k) + "\n"))
			require.NoError(t, err)
			assert.Equal(t, [][]byte{k}, keys)
		})
	}

	t.Run("order kept, comments and blank lines ignored", func(t *testing.T) {
		k1, k2, k3 := gossipKey(32, 1), gossipKey(16, 2), gossipKey(24, 3)
		data := "# the key to send with comes first\n" +
			b64(k2) + "\n" +
			"\n" +
			"  " + b64(k1) + " \t\n" +
			"\t# the old key, to remove once every node sends with the new\n" +
			b64(k3) + "\r\n" +
			"   \n"
		keys, err := ParseGossipKeys([]byte(data))
		require.NoError(t, err)
		assert.Equal(t, [][]byte{k2, k1, k3}, keys)
	})

	t.Run("sixteen keys", func(t *testing.T) {
		var lines []string
		for i := range 16 {
			lines = append(lines, b64(gossipKey(32, byte(i))))
		}
		keys, err := ParseGossipKeys([]byte(strings.Join(lines, "\n")))
		require.NoError(t, err)
		assert.Len(t, keys, 16)
	})
}

func TestParseGossipKeysRefuses(t *testing.T) {
	first := b64(gossipKey(32, 1))
	tests := []struct {
		name string
		data string
		want []string // in the error
	}{
		{"no key", "", []string{"no key"}},
		{"comments only", "# a\n\n  # b\n", []string{"no key"}},
		{"1 byte", first + "\n# c\n" + b64(gossipKey(1, 2)), []string{"line 3", "1 bytes"}},
		{"8 bytes", first + "\n# c\n" + b64(gossipKey(8, 2)), []string{"line 3", "8 bytes"}},
		{"15 bytes", first + "\n# c\n" + b64(gossipKey(15, 2)), []string{"line 3", "15 bytes"}},
		{"17 bytes", first + "\n# c\n" + b64(gossipKey(17, 2)), []string{"line 3", "17 bytes"}},
		{"31 bytes", first + "\n# c\n" + b64(gossipKey(31, 2)), []string{"line 3", "31 bytes"}},
		{"33 bytes", first + "\n# c\n" + b64(gossipKey(33, 2)), []string{"line 3", "33 bytes"}},
		{"64 bytes", first + "\n# c\n" + b64(gossipKey(64, 2)), []string{"line 3", "64 bytes"}},
		{"not base64", first + "\n# c\nnot a key!", []string{"line 3", "base64"}},
		{"hex", first + "\n# c\n" + fmt.Sprintf("%x", gossipKey(32, 2)), []string{"line 3"}},
		{"URL-safe base64", first + "\n# c\n" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16)), []string{"line 3", "base64"}},
		{"padding missing", first + "\n# c\n" + base64.RawStdEncoding.EncodeToString(gossipKey(16, 2)), []string{"line 3", "base64"}},
		{"two keys on a line", first + "\n# c\n" + b64(gossipKey(16, 2)) + " " + b64(gossipKey(16, 3)), []string{"line 3", "base64"}},
		{"duplicate", first + "\n# c\n" + first, []string{"line 3", "key 1"}},
		{"duplicate after another key", first + "\n" + b64(gossipKey(16, 2)) + "\n" + b64(gossipKey(16, 2)), []string{"line 3", "key 2"}},
		{"seventeen keys", func() string {
			var lines []string
			for i := range 17 {
				lines = append(lines, b64(gossipKey(16, byte(i))))
			}
			return strings.Join(lines, "\n")
		}(), []string{"more than 16"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ParseGossipKeys([]byte(tt.data))
			require.Error(t, err)
			assert.Nil(t, keys)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadGossipKeys(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := gossipKey(32, 1), gossipKey(16, 2)
	path := writeFile(t, dir, "gossip.keys", b64(k1)+"\n"+b64(k2)+"\n")
	keys, err := LoadGossipKeys(path)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{k1, k2}, keys)

	for _, tt := range []struct {
		name, path string
	}{
		{"missing file", filepath.Join(dir, "absent")},
		{"bad key", writeFile(t, dir, "bad", b64(k1)+"\n"+b64(gossipKey(20, 3))+"\n")},
		{"empty", writeFile(t, dir, "empty", "")},
		{"over 64 KiB", writeFile(t, dir, "huge", b64(k1)+"\n"+strings.Repeat("#\n", 33<<10))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := LoadGossipKeys(tt.path)
			require.ErrorIs(t, err, ErrGossipKeys)
			assert.Contains(t, err.Error(), tt.path)
			assert.Nil(t, keys)
		})
	}
}

// gossipFuzzSeeds are the seed corpus of FuzzParseGossipKeys.
func gossipFuzzSeeds() map[string][]byte {
	k1, k2 := b64(gossipKey(32, 1)), b64(gossipKey(16, 2))
	return map[string][]byte{
		"valid":      []byte("# send with the first\n" + k1 + "\n\n  " + k2 + "\r\n" + b64(gossipKey(24, 3))),
		"empty":      {},
		"comments":   []byte("# a\n\n#b\n"),
		"short":      []byte(b64(gossipKey(15, 1)) + "\n"),
		"long":       []byte(b64(gossipKey(33, 1)) + "\n"),
		"not-base64": []byte(k1 + "\n*not base64*\n"),
		"raw-std":    []byte(base64.RawStdEncoding.EncodeToString(gossipKey(16, 1)) + "\n"),
		"duplicate":  []byte(k1 + "\n" + k2 + "\n" + k1 + "\n"),
	}
}

// FuzzParseGossipKeys parses arbitrary bytes as a gossip keys file: no
// panic; what it accepts is 1 to 16 distinct keys of 16, 24 or 32 bytes,
// which written back one per line parse to the same keys.
func FuzzParseGossipKeys(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseGossipKeys(data)
		if err != nil {
			require.Nil(t, keys)
			return
		}
		require.NotEmpty(t, keys)
		require.LessOrEqual(t, len(keys), 16)
		var lines []string
		for i, k := range keys {
			require.Contains(t, []int{16, 24, 32}, len(k), "key %d", i+1)
			for j := range i {
				require.False(t, bytes.Equal(keys[j], k), "keys %d and %d are the same", j+1, i+1)
			}
			lines = append(lines, b64(k))
		}
		again, err := ParseGossipKeys([]byte(strings.Join(lines, "\n")))
		require.NoError(t, err)
		require.Equal(t, keys, again)
	})
}
