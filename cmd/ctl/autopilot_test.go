package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A policy the autopilot refuses stops it before it talks to any node
// (the bootstrap below answers nothing), exit 1, saying why: a grace
// period shorter than gossip needs to find a dead node dead first.
func TestAutopilotRefusesABadPolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"failover_after": "3s"}`), 0o644))
	unknown := filepath.Join(dir, "unknown.json")
	require.NoError(t, os.WriteFile(unknown, []byte(`{"grace": "30s"}`), 0o644))
	nobody := []string{"--bootstrap", "127.0.0.1:1", "--timeout", "1s"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--failover-after", "2s"}, "InvalidPolicy: --failover-after 2s is shorter than the 5.5s gossip needs to find a dead node dead " +
			"(the nodes' gossip (memberlist's LAN settings) probes each member every 1s, waits 500ms for the answer, " +
			"then holds an unanswered member suspect for 4s in a cluster of up to 9 nodes before it declares it dead): " +
			"the autopilot would fail brokers over on a missed probe, before gossip could agree they are gone; give at least 5.5s\n"},
		{[]string{"--policy", file}, "InvalidPolicy: --failover-after 3s is shorter than the 5.5s gossip needs"},
		{[]string{"--policy", file, "--failover-after", "6s"}, ""}, // the flag wins; nothing answers then
		{[]string{"--policy", unknown}, `InvalidPolicy: --policy ` + unknown + `: json: unknown field "grace"`},
		{[]string{"--failover-after", "soon"}, `InvalidPolicy: --failover-after "soon": want a duration (10s, 1m)`},
		{[]string{"--recover-after", "never"}, `InvalidPolicy: --recover-after "never": want a duration (10s, 1m) or off`},
		{[]string{"--poll-interval", "8s"}, "InvalidPolicy: --poll-interval 8s is more than half of --failover-after 10s"},
		{[]string{"--lease-ttl", "2s"}, "InvalidPolicy: --lease-ttl 2s is less than three poll intervals (3s)"},
	} {
		code, stdout, stderr := runCtl(t, nil, append(append([]string{"autopilot"}, tc.args...), nobody...)...)
		if tc.want == "" {
			assert.Equal(t, 2, code, "%v: a good policy, and no cluster: %s", tc.args, stderr)
			continue
		}
		assert.Equal(t, 1, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.Empty(t, stdout, "%v: nothing started", tc.args)
	}
}
