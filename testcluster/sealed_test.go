package testcluster

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// consume --follow on a sealed topic ends, exit 0, once it has printed
// every partition to its end: on a topic sealed before it started, and on
// one sealed while it follows.
func TestConsumeFollowEndsOnASealedTopic(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)

	follow := func(topic string) (*exec.Cmd, *lockedBuffer, chan error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		cmd := c.CtlCommand(ctx, "consume", topic, "--follow")
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, out, done
	}
	ends := func(name string, out *lockedBuffer, done chan error, records int) {
		t.Helper()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("%s: consume --follow exited %d:\n%s", name, ee.ExitCode(), out.String())
			}
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: consume --follow on a sealed topic did not end within 30s; printed:\n%s", name, out.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		assert.Len(t, lines, 1+records, "%s: the table's header, and every record printed once:\n%s", name, out.String())
	}

	// Sealed before consume starts.
	createTopic(t, cl, "sealed-before", 2, 3)
	for p := range int32(2) {
		produceN(t, cl, "sealed-before", p, 5, "b")
	}
	require.Equal(t, 0, runCtl(t, c, "topic", "seal", "sealed-before").Exit)
	_, out, done := follow("sealed-before")
	ends("sealed before", out, done, 10)

	// Sealed while consume follows: it prints what comes, then ends.
	createTopic(t, cl, "sealed-during", 2, 3)
	produceN(t, cl, "sealed-during", 0, 3, "d")
	_, out, done = follow("sealed-during")
	require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 3 }, 30*time.Second, 50*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("consume --follow ended on a topic not sealed yet: %v\n%s", err, out.String())
	case <-time.After(2 * time.Second):
	}
	produceN(t, cl, "sealed-during", 1, 4, "e")
	require.Equal(t, 0, runCtl(t, c, "topic", "seal", "sealed-during").Exit)
	ends("sealed while following", out, done, 7)
}
