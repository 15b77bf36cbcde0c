package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer for a process's output read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// script is one of scripts/*.sh running as a user runs it.
type script struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// startScript runs scripts/name with args from the module root, with the
// test's binaries as BIN and data under data, in a process group of its
// own; the test's end stops it (SIGTERM, then SIGKILL to the group).
func startScript(t *testing.T, bins Binaries, data, name string, args ...string) *script {
	t.Helper()
	return startScriptEnv(t, bins, data, nil, name, args...)
}

// startScriptEnv is startScript with more environment (NAME=value).
func startScriptEnv(t *testing.T, bins Binaries, data string, env []string, name string, args ...string) *script {
	t.Helper()
	root, err := moduleRoot()
	require.NoError(t, err)
	s := &script{out: &lockedBuffer{}}
	s.cmd = exec.Command("bash", append([]string{filepath.Join("scripts", name)}, args...)...)
	s.cmd.Dir = root
	s.cmd.Env = append(append(cleanEnv(), "BIN="+filepath.Dir(bins.Node), "DATA="+data, "GORACE=atexit_sleep_ms=0"), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // any node left behind
		if t.Failed() {
			t.Logf("%s output:\n%s", name, s.out.String())
		}
	})
	return s
}

// waitOutput waits until the script has printed want.
func (s *script) waitOutput(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(s.out.String(), want) }, timeout, 100*time.Millisecond,
		"waiting for %q", want)
}

// nodePID finds the gostream-node process whose --data-dir is dir.
func nodePID(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "gostream-node" && strings.Contains(string(cmdline), "\x00--data-dir\x00"+dir+"\x00") {
			return pid
		}
	}
	t.Fatalf("no gostream-node with --data-dir %s", dir)
	return 0
}

// statusWarning is a warning of gostream-ctl cluster status -o json.
type statusWarning struct {
	Message string `json:"message"`
	Command string `json:"command"`
}

// TestMakeRunFailureDrill runs the README's failure drill against `make
// run`'s own script on its own ports, with gostream-ctl's defaults (no
// --bootstrap): node 2 killed with kill -9 while the others run on; every
// piece of cluster status's advice followed literally until it has none
// left, with node 2 started again by `make node`'s script when the advice
// says to start it; then the active controller's node killed, another
// candidate active by itself, the advice followed while it is down, the
// node started again, and the advice followed to no warning. Skipped when the ports of
// `make run` are taken (a `make run` of the user's own is up).
func TestMakeRunFailureDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	for port := 9400; port <= 9422; port++ {
		if port%10 > 2 {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Skipf("port %d of make run is taken (%v): is a make run up?", port, err)
		}
		l.Close()
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data := t.TempDir()
	ctl := func(args ...string) CtlResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.Ctl, args...) // gostream-ctl's default --bootstrap
		cmd.Env = append(cleanEnv(), "GORACE=atexit_sleep_ms=0")
		res, err := ctlResult(cmd)
		require.NoError(t, err)
		t.Logf("gostream-ctl %s -> exit %d\n%s%s", strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
		return res
	}
	warnings := func() []statusWarning {
		t.Helper()
		res := ctl("cluster", "status", "-o", "json")
		require.Equal(t, 0, res.Exit)
		var st struct {
			Warnings []statusWarning `json:"warnings"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &st))
		return st.Warnings
	}
	// follow runs every fix the warnings give, as they are, until none
	// gives one; it returns the warnings left (which give no command).
	follow := func() []statusWarning {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			ws := warnings()
			ran := false
			for _, w := range ws {
				if w.Command == "" {
					continue
				}
				args := strings.Fields(w.Command)
				require.Equal(t, "gostream-ctl", args[0], "a fix is a gostream-ctl command: %q", w.Command)
				res := ctl(args[1:]...)
				require.Equal(t, 0, res.Exit, "the advice %q, followed literally, works", w.Command)
				ran = true
			}
			if !ran {
				return ws
			}
			require.True(t, time.Now().Before(deadline), "the advice never runs out: %+v", ws)
			time.Sleep(500 * time.Millisecond) // replicas catching up after a recover
		}
	}

	cluster := startScript(t, bins, data, "run-cluster.sh")
	cluster.waitOutput(t, "\nready\n", 90*time.Second)
	require.Equal(t, 0, ctl("topic", "create", "orders", "--partitions", "3", "--replication-factor", "3").Exit)
	require.Equal(t, 0, ctl("produce", "orders", "--key", "user-1", "hello").Exit)

	// Node 2 dies; the others keep running.
	require.NoError(t, syscall.Kill(nodePID(t, filepath.Join(data, "node2")), syscall.SIGKILL))
	cluster.waitOutput(t, "node 2 exited: killed by SIGKILL (status 137); the other nodes keep running.", 30*time.Second)
	cluster.waitOutput(t, "make node N=2", 5*time.Second)
	for _, http := range []string{"127.0.0.1:9402", "127.0.0.1:9422"} {
		assert.Equal(t, 0, ctl("health", "--http", http).Exit, "node at %s still up", http)
	}
	left := follow()
	require.NotEmpty(t, left)
	assert.Contains(t, left[0].Message, "start it again", "after the failover, the advice is to start broker 2")
	require.Equal(t, 0, ctl("produce", "orders", "--key", "user-2", "world").Exit, "writes go on without broker 2")

	startScript(t, bins, data, "run-node.sh", "2")
	require.Eventually(t, func() bool { return ctl("health", "--http", "127.0.0.1:9412").Exit == 0 }, 60*time.Second, 500*time.Millisecond)
	assert.Empty(t, follow(), "once broker 2 is back, following the advice leaves no warning")

	// The active controller's node dies: another candidate takes over by
	// itself, cluster status says the candidate is down, and its fixes
	// (the dead node's failover) work at once.
	var cs struct {
		Active int32 `json:"active"`
	}
	res := ctl("controller", "status", "-o", "json")
	require.Equal(t, 0, res.Exit)
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &cs))
	require.NotZero(t, cs.Active, "make run's nodes are candidates, one active")
	a := fmt.Sprint(cs.Active)
	require.NoError(t, syscall.Kill(nodePID(t, filepath.Join(data, "node"+a)), syscall.SIGKILL))
	cluster.waitOutput(t, "node "+a+" exited: killed by SIGKILL (status 137)", 30*time.Second)
	require.Eventually(t, func() bool {
		res := ctl("cluster", "status", "-o", "json")
		var st struct {
			Group struct {
				Active int32 `json:"active"`
			} `json:"controller_group"`
			Warnings []statusWarning `json:"warnings"`
		}
		if res.Exit != 0 || json.Unmarshal([]byte(res.Stdout), &st) != nil || st.Group.Active == 0 || st.Group.Active == cs.Active {
			return false
		}
		for _, w := range st.Warnings {
			if strings.Contains(w.Message, "controller candidate "+a+" (") {
				return true
			}
		}
		return false
	}, 30*time.Second, 500*time.Millisecond, "another candidate is active, and cluster status warns that candidate %s is down", a)
	left = follow()
	require.NotEmpty(t, left)
	require.Equal(t, 0, ctl("produce", "orders", "--key", "user-3", "again").Exit, "writes go on after the failover, with a new active controller")
	startScript(t, bins, data, "run-node.sh", a)
	require.Eventually(t, func() bool { return ctl("health", "--http", fmt.Sprintf("127.0.0.1:94%d2", cs.Active-1)).Exit == 0 }, 60*time.Second, 500*time.Millisecond)
	require.Eventually(t, func() bool { return len(follow()) == 0 }, 60*time.Second, time.Second, "back to no warnings")
	res = ctl("consume", "orders", "--from-beginning", "--timeout", "5s")
	assert.Contains(t, res.Stdout, "hello")
	assert.Contains(t, res.Stdout, "again")
	assert.Contains(t, res.Stdout, "world")
}

// makeRunPortsFree skips the test when a port of make run is taken.
func makeRunPortsFree(t *testing.T) {
	t.Helper()
	for port := 9400; port <= 9422; port++ {
		if port%10 > 2 {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Skipf("port %d of make run is taken (%v): is a make run up?", port, err)
		}
		l.Close()
	}
}

// TestMakeRunSecure runs `make run SECURE=1`'s script and follows what it
// prints: the export line makes gostream-ctl work as the admin over TLS,
// the token and ACL commands it shows work, and a gostream-ctl without
// them is refused.
func TestMakeRunSecure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	makeRunPortsFree(t)
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data := t.TempDir()
	cluster := startScriptEnv(t, bins, data, []string{"SECURE=1"}, "run-cluster.sh")
	cluster.waitOutput(t, "\nready\n", 120*time.Second)
	out := cluster.out.String()
	exports := regexp.MustCompile(`export (GOSTREAM_TLS_CA=\S+) (GOSTREAM_TOKEN_FILE=\S+)`).FindStringSubmatch(out)
	require.NotNil(t, exports, "the script prints how to use gostream-ctl:\n%s", out)
	root, err := moduleRoot()
	require.NoError(t, err)
	ctl := func(env []string, args ...string) CtlResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bins.Ctl, args...)
		cmd.Dir = root
		cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), env...)
		res, err := ctlResult(cmd)
		require.NoError(t, err)
		t.Logf("gostream-ctl %s -> exit %d\n%s%s", strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
		return res
	}
	admin := exports[1:]
	require.Equal(t, 0, ctl(admin, "cluster", "status").Exit)
	require.Equal(t, 0, ctl(admin, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "3").Exit)
	require.Equal(t, 0, ctl(admin, "produce", "orders", "--key", "user-1", "hello").Exit)
	assert.Contains(t, ctl(admin, "consume", "orders", "--from-beginning").Stdout, "hello")

	// The token and ACL lines it prints, as printed (the token file in a
	// temporary directory).
	line := regexp.MustCompile(`gostream-ctl (token create --principal alice --tokens-file \S+) --out alice.token`).FindStringSubmatch(out)
	require.NotNil(t, line, out)
	aliceToken := filepath.Join(t.TempDir(), "alice.token")
	require.Equal(t, 0, ctl(admin, append(strings.Fields(line[1]), "--out", aliceToken)...).Exit)
	for _, dir := range []string{"node1", "node2", "node3"} {
		require.NoError(t, syscall.Kill(nodePID(t, filepath.Join(data, dir)), syscall.SIGHUP))
	}
	acl := regexp.MustCompile(`gostream-ctl (acl add --principal alice [^\n]+)`).FindStringSubmatch(out)
	require.NotNil(t, acl, out)
	require.Equal(t, 0, ctl(admin, strings.Fields(acl[1])...).Exit)
	alice := []string{admin[0], "GOSTREAM_TOKEN_FILE=" + aliceToken}
	require.Eventually(t, func() bool { return ctl(alice, "produce", "orders", "from alice").Exit == 0 },
		20*time.Second, 200*time.Millisecond, "alice writes once the nodes have read the tokens file again")

	res := ctl(nil, "topic", "list")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "TLSMismatch:"), res.Stderr)
}
