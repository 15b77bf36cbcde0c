package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// script is one of scripts/*.sh running as a user runs it.
type script struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{} // closed once it has exited
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
	cmd := exec.Command("bash", append([]string{filepath.Join("scripts", name)}, args...)...)
	cmd.Env = append(append(scriptEnv(), "BIN="+filepath.Dir(bins.Node), "DATA="+data, "GORACE=atexit_sleep_ms=0"), env...)
	return startProcess(t, cmd, data, name)
}

// startMake runs `make TARGET VAR=value ...` (args) from the module root
// as a user runs it, with the test's binaries as BIN (GO=true makes the
// build step a no-op: they are built already), data under data, and env,
// in a process group of its own; the test's end stops it as startScript's
// does.
func startMake(t *testing.T, bins Binaries, data string, env []string, args ...string) *script {
	t.Helper()
	needMake(t)
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, append(args, "BIN="+filepath.Dir(bins.Node), "GO=true")...)...)
	cmd.Env = append(append(scriptEnv(), "DATA="+data, "GORACE=atexit_sleep_ms=0"), env...)
	return startProcess(t, cmd, data, "make "+strings.Join(args, " "))
}

// runMake runs `make args...` (make kill, make reload) to its end with
// data as DATA, and returns what it printed and its exit status.
func runMake(t *testing.T, data string, args ...string) CtlResult {
	t.Helper()
	needMake(t)
	root, err := moduleRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", append([]string{"-s", "--no-print-directory"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(scriptEnv(), "DATA="+data)
	res, err := ctlResult(cmd)
	require.NoError(t, err)
	t.Logf("make %s -> exit %d\n%s%s", strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
	return res
}

// needMake skips the test where make is not installed.
func needMake(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
}

// scriptEnv is the test's environment without what would change what
// the scripts and make do: gostream's variables, the Makefile's and an
// outer make's.
func scriptEnv() []string {
	var env []string
	for _, kv := range cleanEnv() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "DATA", "BIN", "PORT_BASE", "SECURE", "AUTOPILOT", "AUTOPILOT_ARGS", "N", "START_TIMEOUT", "STOP_TIMEOUT", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GO":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// startProcess starts cmd (a script or make) from the module root in a
// process group of its own. The test's end stops it (SIGTERM, then
// SIGKILL to the group) and kills any gostream-node left under data.
func startProcess(t *testing.T, cmd *exec.Cmd, data, name string) *script {
	t.Helper()
	root, err := moduleRoot()
	require.NoError(t, err)
	s := &script{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd.Dir = root
	// Its output through a pipe of the test's own, not one exec makes: Wait
	// then returns when it exits, not when the last process that inherited
	// its output (a node left running, its prefixer) closes it.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	s.cmd.Stdout, s.cmd.Stderr = w, w
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = s.cmd.Start()
	w.Close()
	require.NoError(t, err)
	go func() { io.Copy(s.out, r); r.Close() }()
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(40 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range nodesUnder(data) { // any node left behind, in a group of its own
			syscall.Kill(pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGCONT)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, s.out.String())
		}
	})
	return s
}

// waitExit waits until the script has exited.
func (s *script) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Fatalf("still running after %s", timeout)
	}
}

// signalGroup sends sig to the script's process group, as a terminal's
// Ctrl-C (SIGINT) or a kill -TERM -PGID does. A group that has exited
// already (ESRCH) is not an error: what it left is for the test to see.
func (s *script) signalGroup(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); !errors.Is(err, syscall.ESRCH) {
		require.NoError(t, err)
	}
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
	for pid, d := range gostreamNodes() {
		if d == dir {
			return pid
		}
	}
	t.Fatalf("no gostream-node with --data-dir %s", dir)
	return 0
}

// nodesUnder returns the gostream-node processes whose --data-dir is in
// data.
func nodesUnder(data string) []int {
	var pids []int
	for pid, d := range gostreamNodes() {
		if filepath.Dir(d) == data {
			pids = append(pids, pid)
		}
	}
	return pids
}

// gostreamNodes returns every gostream-node process that runs (not one
// that has ended and waits to be reaped), by pid, with its --data-dir.
func gostreamNodes() map[int]string {
	nodes := map[int]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nodes
	}
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
		if filepath.Base(args[0]) != "gostream-node" {
			continue
		}
		if i := slices.Index(args, "--data-dir"); i >= 0 && i+1 < len(args) {
			nodes[pid] = args[i+1]
		}
	}
	return nodes
}

// statusWarning is a warning of gostream-ctl cluster status -o json.
type statusWarning struct {
	Message string `json:"message"`
	Command string `json:"command"`
}

// TestMakeRunFailureDrill runs the README's failure drill against `make
// run`'s own script on its own ports, with gostream-ctl's defaults (no
// --bootstrap): node 2 killed with make kill N=2 (kill -9 of the PID in
// its PID file) while the others run on; every
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
	for _, port := range []int{9092, 9093, 9094} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Skipf("Kafka port %d of make run is taken (%v): is a make run, or a Kafka, up?", port, err)
		}
		l.Close()
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
	// Each node runs with its share of the CPUs, and says so.
	share := max(1, runtime.NumCPU()/3)
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		share, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	cluster.waitOutput(t, fmt.Sprintf("each node runs with GOMAXPROCS=%d", share), time.Second)
	assert.Eventually(t, func() bool { return strings.Count(cluster.out.String(), fmt.Sprintf("gomaxprocs=%d", share)) == 3 },
		10*time.Second, 50*time.Millisecond, "each node's start line says its GOMAXPROCS")
	require.Equal(t, 0, ctl("topic", "create", "orders", "--partitions", "3", "--replication-factor", "3").Exit)
	require.Equal(t, 0, ctl("produce", "orders", "--key", "user-1", "hello").Exit)
	// A Kafka client on node 1's Kafka listener, as the README's tour.
	kc, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.DisableIdempotentWrite())
	require.NoError(t, err)
	kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
	require.NoError(t, kc.ProduceSync(kctx, &kgo.Record{Topic: "orders", Key: []byte("user-1"), Value: []byte("from kafka")}).FirstErr())
	kcancel()
	kc.Close()
	assert.Contains(t, ctl("consume", "orders", "-o", "json").Stdout, `"value":"from kafka"`)

	// Node 2 dies, killed as the drill kills it (make kill N=2, by its PID
	// file); the others keep running.
	require.Equal(t, 0, runMake(t, data, "kill", "N=2").Exit)
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
	require.Equal(t, 0, runMake(t, data, "kill", "N="+a).Exit)
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
// the token and ACL commands it shows work (with make reload, which
// SIGHUPs the three nodes, to make them read the tokens file again), and
// a gostream-ctl without them is refused.
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
	reload := regexp.MustCompile(`# then: make (reload[^\n]*)`).FindStringSubmatch(out)
	require.NotNil(t, reload, "the token line says how to make the nodes read the tokens file again:\n%s", out)
	require.Equal(t, 0, runMake(t, data, strings.Fields(reload[1])...).Exit)
	for _, n := range []string{"node1", "node2", "node3"} {
		reloaded := regexp.MustCompile(`\[` + n + `\] .*security files reloaded`)
		require.Eventually(t, func() bool { return reloaded.MatchString(cluster.out.String()) },
			20*time.Second, 100*time.Millisecond, "make reload sends SIGHUP to %s", n)
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

// portBases is every port base freePortBase has returned in this process.
var portBases struct {
	sync.Mutex
	used map[int]bool
}

// freePortBase returns a PORT_BASE for make run whose twelve ports (RPC,
// gossip over TCP and UDP, HTTP, Kafka of three nodes) were free a moment
// ago, and none of which belongs to a base it has returned before. It is
// below the kernel's range of ephemeral ports, so that the port 0 of
// another test does not land on one meanwhile.
func freePortBase(t *testing.T) int {
	t.Helper()
	portBases.Lock()
	defer portBases.Unlock()
	if portBases.used == nil {
		portBases.used = map[int]bool{}
	}
	free := func(base int) bool {
		var closers []io.Closer
		defer func() {
			for _, c := range closers {
				c.Close()
			}
		}()
		for n := 0; n < 3; n++ {
			for off := 0; off < 4; off++ {
				addr := fmt.Sprintf("127.0.0.1:%d", base+10*n+off)
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return false
				}
				closers = append(closers, l)
				if off == 1 {
					pc, err := net.ListenPacket("udp", addr)
					if err != nil {
						return false
					}
					closers = append(closers, pc)
				}
			}
		}
		return true
	}
	// A base's ports span base to base+23 (three nodes, 10 apart): two
	// bases closer than 30 share ports, which the check of free ports
	// cannot see while the first cluster has not started yet.
	overlaps := func(base int) bool {
		for b := range portBases.used {
			if base > b-30 && base < b+30 {
				return true
			}
		}
		return false
	}
	for i := 0; i < 200; i++ {
		base := 20000 + 10*rand.IntN(1200) // 20000 to 31990: the last port is below 32768
		if !overlaps(base) && free(base) {
			portBases.used[base] = true
			return base
		}
	}
	t.Fatal("no free port base")
	return 0
}

// bootstrapOf returns the GOSTREAM_BOOTSTRAP of the nodes on base.
func bootstrapOf(base int) string {
	return fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+10, base+20)
}

// ctlAt runs gostream-ctl with env (NAME=value) and args.
func ctlAt(t *testing.T, bins Binaries, env []string, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.Ctl, args...)
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), env...)
	res, err := ctlResult(cmd)
	require.NoError(t, err)
	t.Logf("%s gostream-ctl %s -> exit %d\n%s%s", strings.Join(env, " "), strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
	return res
}

// TestMakeRunStopsOnTwoSIGTERMs stops `make run` as `kill -TERM -PGID`
// does, twice (make forwards each SIGTERM to the script, so the script
// gets several, the later ones while it stops), with node 3 slow to stop
// (paused by SIGSTOP, so that it takes the SIGTERM but does not act on
// it): make exits only once every node has ended, node 3 killed after
// STOP_TIMEOUT, and leaves neither its run directory nor a PID file.
func TestMakeRunStopsOnTwoSIGTERMs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data, tmp := t.TempDir(), t.TempDir()
	run := startMake(t, bins, data, []string{"STOP_TIMEOUT=5", "TMPDIR=" + tmp}, "run", fmt.Sprintf("PORT_BASE=%d", freePortBase(t)))
	run.waitOutput(t, "\nready\n", 90*time.Second)
	pidFiles, err := filepath.Glob(filepath.Join(data, "node*.pid"))
	require.NoError(t, err)
	require.Len(t, pidFiles, 3, "each node's PID is in its file while it runs")

	slow := nodePID(t, filepath.Join(data, "node3"))
	// A process of the test's in node 3's process group keeps that group
	// from being orphaned if the script exits first: the kernel would then
	// wake the paused node (SIGHUP, SIGCONT), and it would stop by itself.
	guard := exec.Command("sleep", "600")
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: slow}
	require.NoError(t, guard.Start())
	t.Cleanup(func() { guard.Process.Kill(); guard.Wait() })
	require.NoError(t, syscall.Kill(slow, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(slow, syscall.SIGKILL); syscall.Kill(slow, syscall.SIGCONT) })

	run.signalGroup(t, syscall.SIGTERM)
	run.waitOutput(t, "run-cluster: stopping the nodes", 10*time.Second)
	run.signalGroup(t, syscall.SIGTERM)
	run.waitExit(t, 60*time.Second)
	assert.Empty(t, nodesUnder(data), "make run exited and left nodes running")
	out := run.out.String()
	for _, want := range []string{"run-cluster: node 3 did not stop within 5s; killing it", "run-cluster: stopped"} {
		assert.True(t, strings.Contains(out, want), "make run does not say %q", want)
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "make run left its run directory in TMPDIR")
	pidFiles, err = filepath.Glob(filepath.Join(data, "node*.pid"))
	require.NoError(t, err)
	assert.Empty(t, pidFiles, "make run left PID files")
}

// TestMakeRunCtrlCStopsMakeNode kills node 2 of `make run`, starts it
// again with `make node N=2`, as the failure drill does, and presses
// Ctrl-C (SIGINT to make run's process group): as the banner says, that
// stops all three, the one make node started too, and make node ends.
func TestMakeRunCtrlCStopsMakeNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data := t.TempDir()
	base := freePortBase(t)
	pb := fmt.Sprintf("PORT_BASE=%d", base)
	run := startMake(t, bins, data, nil, "run", pb)
	run.waitOutput(t, "\nready\n", 90*time.Second)
	require.NoError(t, syscall.Kill(nodePID(t, filepath.Join(data, "node2")), syscall.SIGKILL))
	run.waitOutput(t, "node 2 exited: killed by SIGKILL", 30*time.Second)

	node := startMake(t, bins, data, nil, "node", "N=2", pb)
	http := fmt.Sprintf("127.0.0.1:%d", base+12)
	require.Eventually(t, func() bool { return ctlAt(t, bins, nil, "health", "--http", http).Exit == 0 },
		60*time.Second, 500*time.Millisecond, "make node N=2 serves")

	run.signalGroup(t, syscall.SIGINT)
	run.waitExit(t, 60*time.Second)
	assert.Empty(t, nodesUnder(data), "Ctrl-C of make run left a node running")
	node.waitExit(t, 30*time.Second)
	assert.Contains(t, node.out.String(), "run-node: node 2 stopped")
}

// TestMakeRunSideBySide runs two `make run` clusters at once on two port
// bases: each serves, through the GOSTREAM_BOOTSTRAP its banner prints,
// as a cluster of its own (the same topic created on both, each reading
// only its own record); `make kill N=2` with one's PORT_BASE kills that
// cluster's node 2 only, and `make reload` reaches only its own nodes.
func TestMakeRunSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two of make run's clusters")
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	type cluster struct {
		name string
		base int
		data string
		run  *script
		env  []string
	}
	clusters := []*cluster{{name: "A"}, {name: "B"}}
	for _, c := range clusters {
		c.base, c.data = freePortBase(t), t.TempDir()
		c.run = startMake(t, bins, c.data, nil, "run", fmt.Sprintf("PORT_BASE=%d", c.base))
	}
	for _, c := range clusters {
		c.run.waitOutput(t, "\nready\n", 120*time.Second)
		out := c.run.out.String()
		export := regexp.MustCompile(`\n  export (GOSTREAM_BOOTSTRAP=\S+)\n`).FindStringSubmatch(out)
		require.NotNil(t, export, "cluster %s: the banner prints the GOSTREAM_BOOTSTRAP to export:\n%s", c.name, out)
		assert.Equal(t, "GOSTREAM_BOOTSTRAP="+bootstrapOf(c.base), export[1])
		for n := 0; n < 3; n++ {
			assert.Contains(t, out, fmt.Sprintf("HTTP 127.0.0.1:%d", c.base+10*n+2), "cluster %s: the banner gives node %d's HTTP address", c.name, n+1)
		}
		assert.Contains(t, out, fmt.Sprintf("make kill N=<id> PORT_BASE=%d", c.base))
		c.env = []string{export[1]}
	}
	for _, c := range clusters {
		require.Equal(t, 0, ctlAt(t, bins, c.env, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "3").Exit,
			"cluster %s creates orders: the clusters are two", c.name)
		require.Equal(t, 0, ctlAt(t, bins, c.env, "produce", "orders", "--key", "k", "from "+c.name).Exit)
	}
	for i, c := range clusters {
		res := ctlAt(t, bins, c.env, "consume", "orders", "--from-beginning")
		require.Equal(t, 0, res.Exit)
		assert.Contains(t, res.Stdout, "from "+c.name, "cluster %s reads its own record", c.name)
		other := clusters[1-i].name
		assert.NotContains(t, res.Stdout, "from "+other, "cluster %s reads cluster %s's record", c.name, other)
	}

	a, b := clusters[0], clusters[1]
	bNode2 := nodePID(t, filepath.Join(b.data, "node2"))
	require.Equal(t, 0, runMake(t, a.data, "kill", "N=2", fmt.Sprintf("PORT_BASE=%d", a.base)).Exit)
	a.run.waitOutput(t, "node 2 exited: killed by SIGKILL", 30*time.Second)
	assert.Equal(t, 0, ctlAt(t, bins, nil, "health", "--http", fmt.Sprintf("127.0.0.1:%d", b.base+12)).Exit, "B's node 2 still serves")
	assert.Equal(t, bNode2, nodePID(t, filepath.Join(b.data, "node2")))
	assert.NotContains(t, b.run.out.String(), "run-cluster: node 2 exited", "make kill of A's node 2 touched B")

	require.Equal(t, 0, runMake(t, b.data, "reload", fmt.Sprintf("PORT_BASE=%d", b.base)).Exit)
	require.Eventually(t, func() bool { return strings.Count(b.run.out.String(), "security files reloaded") == 3 },
		20*time.Second, 100*time.Millisecond, "make reload sends SIGHUP to B's three nodes")
	assert.NotContains(t, a.run.out.String(), "security files reloaded", "make reload of B reached A")
}

// TestMakeRunReadyMeansAnActiveController starts `make run` and restarts
// it three times on the same data: after a restart the nodes answer and
// are registered (from the metadata they cached) before the candidates
// have elected an active controller; each time, when `ready` is printed
// a candidate is active.
func TestMakeRunReadyMeansAnActiveController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts make run's cluster")
	}
	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	data := t.TempDir()
	base := freePortBase(t)
	bootstrap := []string{"GOSTREAM_BOOTSTRAP=" + bootstrapOf(base)}
	for round := 0; round < 4; round++ {
		run := startMake(t, bins, data, nil, "run", fmt.Sprintf("PORT_BASE=%d", base))
		// Closer than waitOutput: the first moment ready is there.
		require.Eventually(t, func() bool { return strings.Contains(run.out.String(), "\nready\n") }, 90*time.Second, 5*time.Millisecond)
		res := ctlAt(t, bins, bootstrap, "controller", "status", "-o", "json")
		require.Equal(t, 0, res.Exit)
		var cs struct {
			Active int32 `json:"active"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &cs))
		require.NotZero(t, cs.Active, "start %d: ready was printed while no controller candidate was active", round+1)
		assert.Contains(t, run.out.String(), " is active (gostream-ctl controller status)")
		run.signalGroup(t, syscall.SIGINT)
		run.waitExit(t, 60*time.Second)
	}
}

// TestMakeRunPortBase checks what a port base changes before any node
// starts: the default data directory (./data, ./data-PORT_BASE for
// another port base, DATA when given), the refusal of a port base that
// is not one, and the refusal when a port is taken, which names it and
// suggests a PORT_BASE whose ports are free.
func TestMakeRunPortBase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	root, err := moduleRoot()
	require.NoError(t, err)
	// bash runs a refusal, which ends at once; a script that started nodes
	// instead is cut off, and its nodes under DATA killed.
	bash := func(env []string, args ...string) CtlResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", args...)
		cmd.Dir = root
		cmd.Env = append(scriptEnv(), env...)
		t.Cleanup(func() {
			for _, kv := range env {
				if data, ok := strings.CutPrefix(kv, "DATA="); ok {
					for _, pid := range nodesUnder(data) {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		})
		res, err := ctlResult(cmd)
		require.NoError(t, err)
		return res
	}
	for _, tc := range []struct {
		env  []string
		data string
	}{
		{nil, "./data"},
		{[]string{"PORT_BASE=9400"}, "./data"},
		{[]string{"PORT_BASE=19400"}, "./data-19400"},
		{[]string{"PORT_BASE=19400", "DATA=/srv/gostream"}, "/srv/gostream"},
	} {
		res := bash(tc.env, "-c", `. scripts/local-cluster.sh && echo "$DATA $(bootstrap)"`)
		require.Equal(t, 0, res.Exit, res.Stderr)
		base := 9400
		if len(tc.env) > 0 {
			fmt.Sscanf(tc.env[0], "PORT_BASE=%d", &base)
		}
		assert.Equal(t, tc.data+" "+bootstrapOf(base)+"\n", res.Stdout, "%v", tc.env)
	}
	// The three nodes share the machine's CPUs unless GOMAXPROCS says.
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{[]string{"GOMAXPROCS="}, max(1, runtime.NumCPU()/3)},
		{[]string{"GOMAXPROCS=5"}, 5},
	} {
		res := bash(tc.env, "-c", `. scripts/local-cluster.sh && node_gomaxprocs && echo "$NODE_GOMAXPROCS"`)
		require.Equal(t, 0, res.Exit, res.Stderr)
		assert.Equal(t, fmt.Sprintf("%d\n", tc.want), res.Stdout, "%v", tc.env)
	}

	bins, err := Build(raceEnabledOrNot())
	require.NoError(t, err)
	binEnv := "BIN=" + filepath.Dir(bins.Node)
	for _, bad := range []string{"abc", "0", "65514", "-1"} {
		res := bash([]string{binEnv, "PORT_BASE=" + bad, "DATA=" + t.TempDir()}, "scripts/run-cluster.sh")
		assert.Equal(t, 1, res.Exit)
		assert.Contains(t, res.Stderr, "PORT_BASE="+bad+": want a port number", "PORT_BASE=%s", bad)
	}

	base := freePortBase(t)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+12))
	require.NoError(t, err)
	defer l.Close()
	res := bash([]string{binEnv, fmt.Sprintf("PORT_BASE=%d", base), "DATA=" + t.TempDir()}, "scripts/run-cluster.sh")
	assert.Equal(t, 1, res.Exit)
	assert.Contains(t, res.Stderr, fmt.Sprintf("port %d (node 2 HTTP) is taken", base+12))
	suggested := regexp.MustCompile(`make run PORT_BASE=(\d+)`).FindStringSubmatch(res.Stderr)
	require.NotNil(t, suggested, "the refusal suggests another port base:\n%s", res.Stderr)
	assert.NotEqual(t, fmt.Sprint(base), suggested[1])
}
