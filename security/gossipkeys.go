package security

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The gossip keys file (--gossip-key-file) holds one base64 key per line,
// 16, 24 or 32 bytes once decoded (AES-128, -192, -256), as
// `head -c 32 /dev/urandom | base64` writes one. The first key encrypts
// what the node sends; every key decrypts what it receives. Blank lines
// and lines that begin with # are ignored. docs/security.md says how to
// rotate keys with it.

// ErrGossipKeys is matched by every error of reading a gossip keys file.
var ErrGossipKeys = errors.New("security: gossip keys file")

// maxGossipKeys bounds the keys of one file: rotation needs two.
const maxGossipKeys = 16

// LoadGossipKeys reads the keys of a gossip keys file, the one to send
// with first.
func LoadGossipKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGossipKeys, err)
	}
	if len(data) > 64<<10 {
		return nil, fmt.Errorf("%w: %s is %d bytes; a keys file is a few lines", ErrGossipKeys, path, len(data))
	}
	keys, err := ParseGossipKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrGossipKeys, path, err)
	}
	return keys, nil
}

// ParseGossipKeys reads the lines of a gossip keys file.
func ParseGossipKeys(data []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: not base64: %v", n, err)
		}
		switch len(key) {
		case 16, 24, 32:
		default:
			return nil, fmt.Errorf("line %d: a key of %d bytes; want 16, 24 or 32 (head -c 32 /dev/urandom | base64)", n, len(key))
		}
		for i, k := range keys {
			if bytes.Equal(k, key) {
				return nil, fmt.Errorf("line %d: the same key as key %d", n, i+1)
			}
		}
		keys = append(keys, key)
		if len(keys) > maxGossipKeys {
			return nil, fmt.Errorf("more than %d keys", maxGossipKeys)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	return keys, nil
}
