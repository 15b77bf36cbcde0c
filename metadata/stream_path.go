package metadata

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidStreamPath marks a Durable Streams path that names no stream
// (the HTTP front end answers it 400).
var ErrInvalidStreamPath = errors.New("metadata: invalid stream path")

// MaxStreamPathBytes bounds a stream path.
const MaxStreamPathBytes = 4096

// StreamTopicPrefix begins the internal topic name of every stream.
const StreamTopicPrefix = InternalPrefix + "ds."

// StreamTopic returns the internal topic of the stream at path (the URL path
// after /v1/stream/, percent-decoded once): StreamTopicPrefix and the first 32
// hex digits of the path's SHA-256. The name is the same length for every
// path and made of topic-name characters only, so no path can reach
// outside the storage root, name another topic, or make a name too long;
// the path itself is kept in the topic's metadata, which a lookup
// compares. It returns ErrInvalidStreamPath for a path that is empty, longer than
// MaxStreamPathBytes, not UTF-8, or that holds a NUL, an empty segment, or a .
// or .. segment.
func StreamTopic(path string) (string, error) {
	if err := CheckStreamPath(path); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(path))
	return StreamTopicPrefix + hex.EncodeToString(sum[:16]), nil
}

// CheckStreamPath applies StreamTopic's rules to a stream path.
func CheckStreamPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: empty", ErrInvalidStreamPath)
	case len(path) > MaxStreamPathBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidStreamPath, len(path), MaxStreamPathBytes)
	case !utf8.ValidString(path):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidStreamPath)
	case strings.IndexByte(path, 0) >= 0:
		return fmt.Errorf("%w: holds a NUL byte", ErrInvalidStreamPath)
	}
	for _, seg := range strings.Split(path, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidStreamPath, clipPath(path))
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidStreamPath, clipPath(path), seg)
		}
	}
	return nil
}

// clipPath shortens a path for a message.
func clipPath(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
