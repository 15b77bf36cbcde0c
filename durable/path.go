package durable

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadPath marks a stream path the server refuses (HTTP 400).
var ErrBadPath = errors.New("durable: invalid stream path")

// MaxPathBytes bounds a stream path.
const MaxPathBytes = 4096

// TopicPrefix begins the internal topic name of every stream.
const TopicPrefix = "__ds."

// TopicFor returns the internal topic of the stream at path (the URL path
// after /v1/stream/, percent-decoded once): TopicPrefix and the first 32
// hex digits of the path's SHA-256. The name is the same length for every
// path and made of topic-name characters only, so no path can reach
// outside the storage root, name another topic, or make a name too long;
// the path itself is kept in the topic's metadata, which a lookup
// compares. It returns ErrBadPath for a path that is empty, longer than
// MaxPathBytes, not UTF-8, or that holds a NUL, an empty segment, or a .
// or .. segment.
func TopicFor(path string) (string, error) {
	if err := CheckPath(path); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(path))
	return TopicPrefix + hex.EncodeToString(sum[:16]), nil
}

// CheckPath applies TopicFor's rules to a stream path.
func CheckPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: empty", ErrBadPath)
	case len(path) > MaxPathBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadPath, len(path), MaxPathBytes)
	case !utf8.ValidString(path):
		return fmt.Errorf("%w: not UTF-8", ErrBadPath)
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrBadPath)
	}
	for _, seg := range strings.Split(path, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrBadPath, clip(path))
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrBadPath, clip(path), seg)
		}
	}
	return nil
}
