package testcluster

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeRunAutopilot runs `make run AUTOPILOT=1` on ports of its own
// and the README's failure drill the autopilot's way: make kill N=2, and
// nobody types a command: the autopilot fails node 2 over; make node
// N=2 brings it back, and the autopilot recovers it and moves leadership
// back, until cluster status has no warning. Ctrl-C stops the autopilot
// (it gives its lease back) and the nodes.
func TestMakeRunAutopilot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data := t.TempDir()
	base := freePortBase(t)
	portBase := fmt.Sprintf("PORT_BASE=%d", base)
	bootstrap := []string{"GOSTREAM_BOOTSTRAP=" + bootstrapOf(base)}
	run := startMake(t, bins, data, nil, "run", portBase, "AUTOPILOT=1",
		"AUTOPILOT_ARGS=--failover-after 6s --poll-interval 500ms --recover-after 1s --leaders-back-after 2s --lease-ttl 3s")
	run.waitOutput(t, "\nready\n", 90*time.Second)
	assert.Contains(t, run.out.String(), "An autopilot runs beside them (AUTOPILOT=1")
	run.waitOutput(t, "[autopilot] ", 30*time.Second)
	run.waitOutput(t, "acting: the lease is this autopilot's", 30*time.Second)
	require.Equal(t, 0, ctlAt(t, bins, bootstrap, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "3").Exit)

	require.Equal(t, 0, runMake(t, data, "kill", "N=2", portBase).Exit)
	run.waitOutput(t, `done: command="gostream-ctl failover --broker 2"`, time.Minute)
	require.Equal(t, 0, ctlAt(t, bins, bootstrap, "produce", "orders", "--key", "user-2", "world").Exit, "writes go on without broker 2")

	startScriptEnv(t, bins, data, []string{portBase}, "run-node.sh", "2")
	run.waitOutput(t, `done: command="gostream-ctl recover --broker 2"`, time.Minute)
	run.waitOutput(t, `done: command="gostream-ctl elect-leaders"`, time.Minute)
	require.Eventually(t, func() bool {
		res := ctlAt(t, bins, bootstrap, "cluster", "status", "-o", "json")
		var st struct {
			Warnings []statusWarning `json:"warnings"`
		}
		return res.Exit == 0 && json.Unmarshal([]byte(res.Stdout), &st) == nil && len(st.Warnings) == 0
	}, time.Minute, time.Second, "no warnings left: the autopilot did what the drill's commands do")

	run.signalGroup(t, syscall.SIGINT)
	run.waitExit(t, 60*time.Second)
	assert.Contains(t, run.out.String(), "gave the lease back")
	assert.NotContains(t, run.out.String(), "the autopilot exited", "it stopped when asked, not by itself")
}
