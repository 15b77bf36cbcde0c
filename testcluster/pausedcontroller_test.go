package testcluster

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With the controller paused, a topic create says so within seconds, not at
// the end of its --timeout, and its final error says that the topic may
// have been created and how to check.
func TestChangeAgainstPausedControllerSaysOutcomeUnknown(t *testing.T) {
	c := startCluster(t, 3)
	newClient(t, c) // the cluster has registered and answers
	require.NoError(t, c.Node(1).Pause())
	t.Cleanup(func() { c.Node(1).Resume() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.CtlCommand(ctx, "--timeout", "8s", "topic", "create", "late", "--partitions", "1", "--replication-factor", "3")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	var lines []string
	var noticeAt time.Duration
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if noticeAt == 0 && strings.Contains(sc.Text(), "has not answered") {
			noticeAt = time.Since(start)
		}
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	require.Error(t, err)
	out := strings.Join(lines, "\n")
	t.Logf("stderr after %s:\n%s", time.Since(start), out)
	require.NotZero(t, noticeAt, "a notice that the controller does not answer")
	assert.Less(t, noticeAt, 5*time.Second, "told well before the 8s timeout")
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "UnknownOutcome: "), "the error is named UnknownOutcome: %q", lines[len(lines)-1])
	assert.Contains(t, out, "the change may have been made")
	assert.Contains(t, out, "check with gostream-ctl topic describe late")

	// A --timeout shorter than the notice's wait: the one line on stderr
	// is the error, named UnknownOutcome.
	res := ctlRun(t, c, "--timeout", "1500ms", "topic", "seal", "late")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "UnknownOutcome: "), "stderr: %q", res.Stderr)
	assert.Contains(t, res.Stderr, "check with gostream-ctl topic describe late")
	// What only reads leaves no outcome unknown: a dry run, an acl list.
	for _, args := range [][]string{
		{"failover", "--broker", "2", "--dry-run"},
		{"acl", "list"},
	} {
		res := ctlRun(t, c, append([]string{"--timeout", "1500ms"}, args...)...)
		assert.Equal(t, 2, res.Exit, "%v", args)
		assert.False(t, strings.HasPrefix(res.Stderr, "UnknownOutcome: "), "%v: stderr %q", args, res.Stderr)
		assert.NotContains(t, res.Stderr, "may have been made", "%v", args)
	}

	require.NoError(t, c.Node(1).Resume())
	res = ctlRun(t, c, "topic", "describe", "late")
	t.Logf("after SIGCONT: exit %d %s%s", res.Exit, res.Stdout, res.Stderr)
	assert.Contains(t, []int{0, 2}, res.Exit, "describe answers either way")
}

// A controller that dies with a change sent and unanswered (paused, then
// killed: the connection closes under the request) leaves the change's
// outcome unknown, and the error is named so, not after the closed
// connection (BrokerNotAvailable).
func TestChangeToAControllerThatDiesIsUnknownOutcome(t *testing.T) {
	c := startCluster(t, 3)
	newClient(t, c)
	require.NoError(t, c.Node(1).Pause())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.CtlCommand(ctx, "--timeout", "30s", "topic", "create", "doomed", "--partitions", "1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "has not answered") {
			// Sent 2 s ago, and unanswered: now the controller dies.
			require.NoError(t, c.Node(1).Kill())
		}
	}
	start := time.Now()
	require.Error(t, cmd.Wait())
	t.Logf("stderr:\n%s", strings.Join(lines, "\n"))
	require.Len(t, lines, 2, "the notice, then the error")
	assert.Less(t, time.Since(start), 20*time.Second, "ends when the connection closes, not at the --timeout")
	assert.Equal(t, 2, cmd.ProcessState.ExitCode())
	assert.True(t, strings.HasPrefix(lines[1], "UnknownOutcome: "), "the error is named UnknownOutcome: %q", lines[1])
	assert.Contains(t, lines[1], "the change may have been made")
	assert.Contains(t, lines[1], "check with gostream-ctl topic describe doomed")
}
