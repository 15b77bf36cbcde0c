package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AutopilotProc is a `gostream-ctl autopilot` process of a cluster
// (docs/autopilot.md): what it logged so far, and how it ended.
type AutopilotProc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    *procLines
	errOut *procLines
	done   chan struct{}
	exit   int
	err    error // the wait's error when it did not exit by itself
}

// procLines collects a process's output, handing each whole line to logf.
type procLines struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	prefix  string
	logf    func(format string, args ...any)
}

func (l *procLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.logf("%s%s", l.prefix, l.partial[:i])
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *procLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// StartAutopilot starts `gostream-ctl autopilot` with args against the
// cluster (every node its bootstrap), its lines going to the cluster's
// Logf with a prefix that names it.
func (c *Cluster) StartAutopilot(name string, args ...string) (*AutopilotProc, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := c.CtlCommand(ctx, append([]string{"autopilot", "--name", name}, args...)...)
	// Its own process group, so that a signal to the harness's group
	// does not reach it, and Kill reaches only it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a := &AutopilotProc{cmd: cmd, cancel: cancel, done: make(chan struct{}),
		out:    &procLines{prefix: "[" + name + "] ", logf: c.cfg.Logf},
		errOut: &procLines{prefix: "[" + name + " stderr] ", logf: c.cfg.Logf}}
	cmd.Stdout, cmd.Stderr = a.out, a.errOut
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("testcluster: start the autopilot: %w", err)
	}
	go func() {
		defer close(a.done)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee) && ee.Exited():
			a.exit = ee.ExitCode()
		default:
			a.exit, a.err = -1, err
		}
	}()
	return a, nil
}

// Log is what it wrote to stdout so far: its log lines.
func (a *AutopilotProc) Log() string { return a.out.String() }

// Stderr is what it wrote to stderr: the error it stopped with.
func (a *AutopilotProc) Stderr() string { return a.errOut.String() }

// Exited reports whether it has ended, and its exit status (-1 when a
// signal ended it).
func (a *AutopilotProc) Exited() (bool, int) {
	select {
	case <-a.done:
		return true, a.exit
	default:
		return false, 0
	}
}

// Wait waits up to timeout for it to end and returns its exit status.
func (a *AutopilotProc) Wait(timeout time.Duration) (int, error) {
	select {
	case <-a.done:
		return a.exit, nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("testcluster: the autopilot still runs after %s", timeout)
	}
}

// WaitLog waits up to timeout until its log holds substr.
func (a *AutopilotProc) WaitLog(substr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(a.Log(), substr) {
		if ended, code := a.Exited(); ended {
			return fmt.Errorf("testcluster: the autopilot exited (%d) before it logged %q: %s", code, substr, a.Stderr())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testcluster: the autopilot did not log %q within %s", substr, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Kill ends it with SIGKILL (it gives nothing back) and waits for it.
func (a *AutopilotProc) Kill() {
	if ended, _ := a.Exited(); !ended {
		a.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-a.done
	a.cancel()
}

// Stop ends it with SIGTERM, as Ctrl-C does, and returns its exit status
// once it has ended; after timeout it is killed.
func (a *AutopilotProc) Stop(timeout time.Duration) (int, error) {
	if ended, code := a.Exited(); ended {
		return code, nil
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	code, err := a.Wait(timeout)
	if err != nil {
		a.Kill()
		return -1, err
	}
	a.cancel()
	return code, nil
}
