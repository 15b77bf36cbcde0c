package quorum

import (
	"bytes"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
)

// Raft's errors about a candidate it cannot reach are not the operator's
// to act on: Debug while the group comes up (the others are starting
// too), Warn after; its election and catch-up warnings are Info while it
// comes up. Anything else keeps its level.
func TestRaftMessagesGetOurLevels(t *testing.T) {
	cases := []struct {
		msg      string
		raft     hclog.Level
		starting hclog.Level
		later    hclog.Level
	}{
		{"failed to make requestVote RPC", hclog.Error, hclog.Debug, hclog.Warn},
		{"failed to appendEntries to", hclog.Error, hclog.Debug, hclog.Warn},
		{"failed to heartbeat to", hclog.Error, hclog.Debug, hclog.Warn},
		{"failed to contact", hclog.Warn, hclog.Debug, hclog.Warn},
		{"heartbeat timeout reached, starting election", hclog.Warn, hclog.Info, hclog.Warn},
		{"failed to get previous log", hclog.Warn, hclog.Info, hclog.Warn},
		{"failed to persist vote", hclog.Error, hclog.Error, hclog.Error},
		{"failed to commit logs", hclog.Error, hclog.Error, hclog.Error},
		{"entering leader state", hclog.Info, hclog.Info, hclog.Info},
	}
	for _, tc := range cases {
		t.Run(tc.msg, func(t *testing.T) {
			starting := &limiter{start: time.Now()}
			later := &limiter{start: time.Now().Add(-startGrace - time.Second)}
			assert.Equal(t, tc.starting, starting.level(tc.raft, tc.msg, nil), "while the group comes up")
			assert.Equal(t, tc.later, later.level(tc.raft, tc.msg, nil), "after")
		})
	}
}

// A connection closed under Raft's reader as the node stops is how every
// stop goes: Debug, not Error.
func TestAStopLogsNoError(t *testing.T) {
	l := &limiter{start: time.Now().Add(-time.Hour)}
	closed := &net.OpError{Op: "read", Net: "tcp", Err: net.ErrClosed}
	assert.Equal(t, hclog.Debug, l.level(hclog.Error, "failed to decode incoming command", []interface{}{"error", closed}))
	assert.Equal(t, hclog.Error, l.level(hclog.Error, "failed to decode incoming command", []interface{}{"error", errors.New("unexpected EOF")}))
	// A peer that stopped with bytes in flight on its stream to us resets
	// it (seen in TestCleanStartLogsNoError when the three stop together).
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	assert.Equal(t, hclog.Info, l.level(hclog.Error, "failed to decode incoming command", []interface{}{"error", reset}))
}

// What a clean start logs has no ERROR line.
func TestAStartLogsNoError(t *testing.T) {
	var out bytes.Buffer
	l := newLimitedLogger(hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info}))
	l.Error("failed to make requestVote RPC", "target", "{Voter 2 127.0.0.1:9410}", "error", "dial tcp 127.0.0.1:9410: connect: connection refused")
	l.Warn("heartbeat timeout reached, starting election")
	assert.NotContains(t, out.String(), "[ERROR]")
	assert.NotContains(t, out.String(), "[WARN]")
}
