package metadata

// Stream is what the cluster keeps of a Durable Streams stream (a topic of
// one partition named by metadata.StreamTopic): its path and the configuration
// it was created with, its lineage, and whether it was deleted while forks
// of it remained. A stream's data, its producers and whether it is closed
// are in its log (docs/durable-streams.md).
type Stream struct {
	Path        string `json:"path"`
	ContentType string `json:"content_type"`
	// TTL is the sliding time to live in seconds; nil for none.
	TTL *int64 `json:"ttl,omitempty"`
	// ExpiresAt is the absolute expiry (RFC 3339), empty for none.
	ExpiresAt string `json:"expires_at,omitempty"`
	// CreatedMs is when the controller created it (Unix milliseconds).
	CreatedMs int64 `json:"created_ms"`
	// ForkedFrom is the path of the stream this one was forked from, with
	// the offset (token) and sub-offset of the fork.
	ForkedFrom    string `json:"forked_from,omitempty"`
	ForkOffset    string `json:"fork_offset,omitempty"`
	ForkSubOffset int64  `json:"fork_sub_offset,omitempty"`
	// Forks counts the streams forked from this one that exist.
	Forks int `json:"forks,omitempty"`
	// Deleted marks a stream deleted (or expired) while it had forks: it
	// answers 410 and its path cannot be reused until the last fork goes.
	Deleted bool `json:"deleted,omitempty"`
}

// Clone returns a copy of s.
func (s *Stream) Clone() *Stream {
	if s == nil {
		return nil
	}
	c := *s
	if s.TTL != nil {
		v := *s.TTL
		c.TTL = &v
	}
	return &c
}
