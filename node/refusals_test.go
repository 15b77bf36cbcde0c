package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"gostream/transport"
)

func TestRefusalsDegradeHealthForAWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newRefusals(newMetrics())
	r.now = func() time.Time { return now }
	assert.Empty(t, r.problems())

	for range 3 {
		r.record("rpc", transport.Refusal{Limit: transport.LimitConnsPerAddr, Addr: "127.0.0.2", Max: 1024})
		now = now.Add(2 * time.Second)
	}
	r.record("http", transport.Refusal{Limit: transport.LimitConns, Addr: "10.0.0.9", Max: 4096})
	r.record("rpc", transport.Refusal{Limit: transport.LimitMemory, Addr: "10.0.0.9:5555", Max: 256 << 20})
	assert.Equal(t, []string{
		"refusing connections: 1 on the http listener in the last 1s: the limit of 4096 connections in all is reached (--max-conns)",
		"refusing connections: 3 on the rpc listener in the last 6s: 127.0.0.2 holds the per-address limit of 1024 (--max-conns-per-ip)",
		"refusing requests: 1 Busy in the last 1s: the node's request memory (268435456 bytes, --request-memory) is in use",
	}, r.problems())

	now = now.Add(refusalWindow - 2*time.Second) // the window since the last per-address refusal
	assert.Len(t, r.problems(), 3, "degraded for the window after the last refusal")
	now = now.Add(3 * time.Second)
	assert.Empty(t, r.problems(), "healthy again")

	// A new refusal starts a new count.
	r.record("rpc", transport.Refusal{Limit: transport.LimitConnsPerAddr, Addr: "127.0.0.2", Max: 1024})
	assert.Equal(t, []string{"refusing connections: 1 on the rpc listener in the last 1s: 127.0.0.2 holds the per-address limit of 1024 (--max-conns-per-ip)"}, r.problems())
}
