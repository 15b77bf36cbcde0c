package durable

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Backend is what the HTTP handler needs from the store of streams. In a
// node it is the cluster: each call goes to the stream's leader, here or
// over the transport. Protocol outcomes that are not success (a closed
// stream, a content-type mismatch, a stale producer) are returned as a
// *Refusal; any other error means the store could not answer (a leader
// unreachable, a write whose replication failed) and is answered 503 so
// the client retries.
//
// Authorize is asked before a request touches a stream (a fork: read on
// its source too), before its body is read: op is "create", "write",
// "read", "describe" or "delete", principal who asks (empty when no one
// authenticated). It returns nil to let the request go on, or the
// *Refusal (401, 403) that answers it.
type Backend interface {
	Authorize(ctx context.Context, principal, op, path string) error
	Create(ctx context.Context, req *CreateRequest) (*CreateResult, error)
	Append(ctx context.Context, req *AppendRequest) (*AppendResult, error)
	Read(ctx context.Context, req *ReadRequest) (*ReadResult, error)
	Head(ctx context.Context, path string) (*Info, error)
	Delete(ctx context.Context, path string) error
}

// Config is a stream's configuration, as set at creation.
type Config struct {
	ContentType string `json:"content_type"`
	// TTL is the sliding time to live in seconds, nil for none.
	TTL *int64 `json:"ttl,omitempty"`
	// ExpiresAt is the absolute expiry as the client wrote it (RFC 3339),
	// empty for none.
	ExpiresAt     string `json:"expires_at,omitempty"`
	Closed        bool   `json:"closed,omitempty"`
	ForkedFrom    string `json:"forked_from,omitempty"`
	ForkOffset    string `json:"fork_offset,omitempty"`
	ForkSubOffset int64  `json:"fork_sub_offset,omitempty"`
}

// Info is what HEAD tells of a stream.
type Info struct {
	ContentType string `json:"content_type"`
	TTL         *int64 `json:"ttl,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	// Tail is the token of the acknowledged tail.
	Tail   string `json:"tail"`
	Closed bool   `json:"closed,omitempty"`
}

// CreateRequest is a PUT.
type CreateRequest struct {
	Path   string `json:"path"`
	Config Config `json:"config"`
	// ContentTypeGiven is false when the request had no usable
	// Content-Type: a fork then takes its source's.
	ContentTypeGiven bool   `json:"content_type_given,omitempty"`
	Body             []byte `json:"-"`
}

// CreateResult answers a PUT.
type CreateResult struct {
	Info    Info `json:"info"`
	Created bool `json:"created"`
}

// Producer names an idempotent producer's request.
type Producer struct {
	ID    string `json:"id"`
	Epoch int64  `json:"epoch"`
	Seq   int64  `json:"seq"`
}

// AppendRequest is a POST.
type AppendRequest struct {
	Path        string    `json:"path"`
	ContentType string    `json:"content_type,omitempty"`
	Seq         string    `json:"seq,omitempty"`
	HasSeq      bool      `json:"has_seq,omitempty"`
	Close       bool      `json:"close,omitempty"`
	Producer    *Producer `json:"producer,omitempty"`
	Body        []byte    `json:"-"`
}

// AppendResult answers a POST that was accepted or found to be a
// duplicate.
type AppendResult struct {
	Tail      string `json:"tail"`
	Closed    bool   `json:"closed,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// ProducerSeq is the highest sequence accepted for the producer's
	// epoch.
	ProducerSeq int64 `json:"producer_seq,omitempty"`
}

// ReadRequest is a GET's read.
type ReadRequest struct {
	Path string `json:"path"`
	// Offset is the client's parameter: "-1", "now" or a token.
	Offset string `json:"offset"`
	// Wait is how long to wait for data when there is none at Offset.
	Wait time.Duration `json:"wait,omitempty"`
	// MaxBytes bounds the data returned (the first message is returned
	// whole, whatever its size).
	MaxBytes int `json:"max_bytes"`
}

// Message is one append's data, and the token after it.
type Message struct {
	Data []byte `json:"-"`
	Next string `json:"next"`
}

// ReadResult answers a read.
type ReadResult struct {
	Info     Info      `json:"info"`
	Messages []Message `json:"messages,omitempty"`
	// Start is the token of the position read from (Offset resolved).
	Start string `json:"start"`
	// Next is the token after the last message, or Start when none.
	Next string `json:"next"`
	// UpToDate is set when Next is the acknowledged tail.
	UpToDate bool `json:"up_to_date,omitempty"`
	// Closed is set when the stream is closed and Next is its tail.
	Closed bool `json:"closed,omitempty"`
	// TimedOut is set when a wait ended with nothing to return.
	TimedOut bool `json:"timed_out,omitempty"`
}

// Refusal is a protocol answer other than success: its status, message,
// and the headers the protocol gives with it.
type Refusal struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
	// Closed adds Stream-Closed: true, Tail Stream-Next-Offset.
	Closed bool   `json:"closed,omitempty"`
	Tail   string `json:"tail,omitempty"`
	// ProducerEpoch is the current epoch of a stale producer (403).
	ProducerEpoch *int64 `json:"producer_epoch,omitempty"`
	// ExpectedSeq and ReceivedSeq describe a sequence gap (409).
	ExpectedSeq *int64 `json:"expected_seq,omitempty"`
	ReceivedSeq *int64 `json:"received_seq,omitempty"`
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d: %s", r.Status, r.Message) }

// Refuse returns a Refusal of status with a message.
func Refuse(status int, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Message: fmt.Sprintf(format, args...)}
}

// NotFound is the refusal for a stream that does not exist.
func NotFound(path string) *Refusal {
	return Refuse(http.StatusNotFound, "stream %q not found", clip(path))
}

// Gone is the refusal for a stream deleted while forks of it remain.
func Gone(path string) *Refusal {
	return Refuse(http.StatusGone, "stream %q was deleted; it is kept only for its forks", clip(path))
}

// DefaultContentType is the content type of a stream created without one.
const DefaultContentType = "application/octet-stream"

// MediaType returns the media type of a Content-Type value, lower case
// and without parameters ("application/json; charset=utf-8" is
// "application/json"); empty for an empty value.
func MediaType(ct string) string {
	ct = strings.TrimSpace(ct)
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// SameContentType reports whether two content types name the same media
// type (parameters and case aside).
func SameContentType(a, b string) bool {
	if a == "" {
		a = DefaultContentType
	}
	if b == "" {
		b = DefaultContentType
	}
	return MediaType(a) == MediaType(b)
}

// IsJSON reports whether a stream of content type ct is in JSON mode.
func IsJSON(ct string) bool { return MediaType(ct) == "application/json" }

// IsText reports whether SSE sends a stream of content type ct as text
// (else base64).
func IsText(ct string) bool {
	mt := MediaType(ct)
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}
