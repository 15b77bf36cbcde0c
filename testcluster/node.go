package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gostream/transport"
)

// Node is one gostream-node process slot: its id, addresses and data
// directory stay the same across restarts.
type Node struct {
	ID      int32
	DataDir string
	RPC     string
	// Advertise, when set, is the RPC address given to others (the
	// proxy's listener in front of RPC).
	Advertise string
	Gossip    string
	HTTP      string
	// Kafka, when set, is the node's Kafka listener (--kafka-listen).
	Kafka string
	// Listeners, when set, are named listeners besides RPC and Kafka: the
	// node's RPC address becomes the listener "internal" of --listen and
	// Kafka the one of --kafka-listen, and each of these is a further
	// listener of both protocols, advertised as it says.
	Listeners []NamedListener
	// Args are extra flags given at every start.
	Args []string
	// Env is extra environment (NAME=value) given at every start.
	Env []string

	bin      string
	sec      *Secure // the cluster's security files, nil when plaintext
	diskFull string  // the file whose existence fills a crashfs node's disk
	host     string  // the address the node binds
	logPath  string
	started  bool // has been healthy once; its addresses are now known to others
	logf     func(format string, args ...any)

	mu struct {
		sync.Mutex
		cmd  *exec.Cmd
		done chan struct{}
		err  error // the exit status of the last run
	}
}

// handedOut is every address freeAddr has returned in this process. A
// port closed again is free for the kernel to give out next, and it did:
// two nodes of one cluster were handed the same HTTP port.
var handedOut struct {
	sync.Mutex
	addrs map[string]bool
}

// freeAddr returns a loopback address whose port was free a moment ago,
// and that it has not returned before.
func freeAddr(host string) (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.addrs == nil {
		handedOut.addrs = map[string]bool{}
	}
	for i := 0; i < 100; i++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr, nil
		}
	}
	return "", errors.New("testcluster: no port not handed out already")
}

// freeAddrUDP returns an address free for both TCP and UDP, for gossip.
func freeAddrUDP(host string) (string, error) {
	for i := 0; i < 50; i++ {
		addr, err := freeAddr(host)
		if err != nil {
			return "", err
		}
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc.Close()
			return addr, nil
		}
	}
	return "", errors.New("testcluster: no free tcp+udp port")
}

// Addr is the RPC address others use: Advertise if set, else RPC.
func (n *Node) Addr() string {
	if n.Advertise != "" {
		return n.Advertise
	}
	return n.RPC
}

// Running reports whether the process is running (or paused).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil {
		return false
	}
	select {
	case <-n.mu.done:
		return false
	default:
		return true
	}
}

// Start starts the process. Its output is appended to its log file.
func (n *Node) Start(controller string, join []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd != nil {
		select {
		case <-n.mu.done:
		default:
			return fmt.Errorf("testcluster: node %d already running", n.ID)
		}
	}
	args := []string{
		"--id", strconv.Itoa(int(n.ID)), "--data-dir", n.DataDir,
		"--listen", n.RPC, "--gossip", n.Gossip, "--http", n.HTTP,
		"--log-level", "debug",
	}
	listen, advertise, kafka, kafkaAdvertise := n.RPC, n.Advertise, n.Kafka, ""
	if len(n.Listeners) > 0 {
		if advertise == "" {
			advertise = n.RPC
		}
		listen, advertise = "internal://"+n.RPC, "internal://"+advertise
		if kafka != "" {
			kafka, kafkaAdvertise = "internal://"+n.Kafka, "internal://"+n.Kafka
		}
		for _, l := range n.Listeners {
			listen += fmt.Sprintf(",%s://%s", l.Name, l.RPC)
			advertise += fmt.Sprintf(",%s://%s", l.Name, l.AdvertiseRPC)
			if kafka != "" {
				kafka += fmt.Sprintf(",%s://%s", l.Name, l.Kafka)
				kafkaAdvertise += fmt.Sprintf(",%s://%s", l.Name, l.AdvertiseKafka)
			}
		}
	}
	args[5] = listen
	if advertise != "" {
		args = append(args, "--advertise", advertise)
	}
	if kafka != "" {
		args = append(args, "--kafka-listen", kafka)
	}
	if kafkaAdvertise != "" {
		args = append(args, "--kafka-advertise", kafkaAdvertise)
	}
	if controller != "" {
		args = append(args, "--controller", controller)
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	args = append(args, n.Args...)
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== start %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(n.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), n.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so SIGSTOP reaches the whole group
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start node %d: %w", n.ID, err)
	}
	done := make(chan struct{})
	n.mu.cmd, n.mu.done = cmd, done
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.mu.err = err
		n.mu.Unlock()
		close(done)
	}()
	n.logf("node %d started (pid %d) rpc=%s http=%s", n.ID, cmd.Process.Pid, n.RPC, n.HTTP)
	return nil
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOSTREAM_") {
			env = append(env, kv)
		}
	}
	return env
}

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.mu.cmd
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("testcluster: node %d not started", n.ID)
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// Wait waits for the process to exit and returns its exit error.
func (n *Node) Wait(ctx context.Context) error {
	n.mu.Lock()
	done := n.mu.done
	n.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.mu.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill sends SIGKILL to the process group and waits for it to exit.
func (n *Node) Kill() error {
	if !n.Running() {
		return nil
	}
	n.signal(syscall.SIGCONT) // a paused process must be able to die
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n.Wait(ctx)
	n.logf("node %d killed", n.ID)
	return ctx.Err()
}

// Stop sends SIGTERM and waits for a clean exit, killing it after timeout.
// It returns the process's exit error.
func (n *Node) Stop(timeout time.Duration) error {
	if !n.Running() {
		return nil
	}
	n.signal(syscall.SIGCONT)
	if err := n.signal(syscall.SIGTERM); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := n.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		n.Kill()
		return fmt.Errorf("testcluster: node %d did not stop within %s", n.ID, timeout)
	}
	n.logf("node %d stopped: %v", n.ID, err)
	return err
}

// Pause stops the whole process group with SIGSTOP and returns once every
// thread of the node's process is stopped: kill(2) returns before the
// signal has taken effect, and on a loaded machine a thread may still run
// for a moment.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	pid := n.mu.cmd.Process.Pid
	n.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testcluster: node %d: %d threads still running 10s after SIGSTOP", n.ID, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of pid not in the stopped state (T or
// t in /proc/<pid>/task/<tid>/stat).
func runningThreads(pid int) (int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	running := 0
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // the thread is gone
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+2 >= len(data) {
			continue
		}
		if st := data[i+2]; st != 'T' && st != 't' {
			running++
		}
	}
	return running, nil
}

// PID is the process id of the running node, or 0.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil || n.mu.cmd.Process == nil {
		return 0
	}
	return n.mu.cmd.Process.Pid
}

// RSS is the resident set size of the node's process, in bytes, as
// /proc/PID/status reports it (VmRSS).
func (n *Node) RSS() (int64, error) {
	pid := n.PID()
	if pid == 0 {
		return 0, fmt.Errorf("testcluster: node %d not started", n.ID)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("testcluster: VmRSS line %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("testcluster: no VmRSS in /proc/%d/status", pid)
}

// Resume continues a paused process group with SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

// Healthy reports whether GET /api/health answers 200.
func (n *Node) Healthy() bool {
	resp, err := n.sec.httpGet(n.HTTP, "/api/health", 500*time.Millisecond)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitHealthy polls health until it answers or the deadline passes. It fails
// early, with the log's tail, if the process exits.
func (n *Node) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n.Healthy() {
			return nil
		}
		if !n.Running() {
			return fmt.Errorf("testcluster: node %d exited: %v\n%s", n.ID, n.Wait(context.Background()), n.LogTail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testcluster: node %d not healthy after %s\n%s", n.ID, timeout, n.LogTail(30))
}

// HTTPGet returns the body of GET path on the node's HTTP address.
func (n *Node) HTTPGet(path string) ([]byte, error) {
	resp, err := n.sec.httpGet(n.HTTP, path, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// ControllerStatus asks the node, over its RPC address, for its part in
// the controller group.
func (n *Node) ControllerStatus(timeout time.Duration) (transport.ControllerStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := transport.Dial(ctx, n.RPC, n.sec.connConfig())
	if err != nil {
		return transport.ControllerStatus{}, err
	}
	defer conn.Close()
	var resp transport.JSONMessage
	if err := conn.Call(ctx, transport.APIControllerStatus, &transport.JSONMessage{Data: []byte("{}")}, &resp); err != nil {
		return transport.ControllerStatus{}, err
	}
	var st transport.ControllerStatus
	if err := json.Unmarshal(resp.Data, &st); err != nil {
		return transport.ControllerStatus{}, fmt.Errorf("controller status of node %d: %w", n.ID, err)
	}
	return st, nil
}

// LogPath is the file the process's output goes to.
func (n *Node) LogPath() string { return n.logPath }

// raceReportStart and raceReportEnd frame each report the race detector
// prints: the line before it and the one that ends it are the same row
// of '=' signs.
const (
	raceReportStart = "WARNING: DATA RACE"
	raceReportEnd   = "\n=================="
)

// raceReportLines bounds how much of one race report DataRaces keeps.
const raceReportLines = 40

// DataRaces returns the race detector's reports in the node's log, each
// cut to raceReportLines lines; none for a node built without it. A race
// does not stop the node (nor change its exit before it is killed), so it
// is seen only where something reads the log.
func (n *Node) DataRaces() []string {
	data, err := os.ReadFile(n.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for {
		i := bytes.Index(data, []byte(raceReportStart))
		if i < 0 {
			return out
		}
		data = data[i:]
		report := data
		if end := bytes.Index(data, []byte(raceReportEnd)); end >= 0 {
			report = data[:end]
		}
		lines := bytes.SplitN(report, []byte("\n"), raceReportLines+1)
		if len(lines) > raceReportLines {
			lines = append(lines[:raceReportLines], []byte("..."))
		}
		out = append(out, string(bytes.Join(lines, []byte("\n"))))
		data = data[len(raceReportStart):]
	}
}

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	data, _ := os.ReadFile(n.logPath)
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// ReplicaDir is the directory of one partition replica in the node's root.
func (n *Node) ReplicaDir(topic string, partition int32) string {
	return filepath.Join(n.DataDir, "topics", topic, "partition-"+strconv.Itoa(int(partition)))
}

// Partitions lists, in order, the partitions of topic that the node's data
// directory holds a replica directory of (named as ReplicaDir names them).
// A topic it holds nothing of gives none.
func (n *Node) Partitions(topic string) ([]int32, error) {
	entries, err := os.ReadDir(filepath.Dir(n.ReplicaDir(topic, 0)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var parts []int32
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "partition-")
		if !ok || !e.IsDir() {
			continue
		}
		p, err := strconv.ParseInt(num, 10, 32)
		if err != nil || p < 0 || strconv.Itoa(int(p)) != num {
			continue // not a name ReplicaDir gives
		}
		parts = append(parts, int32(p))
	}
	slices.Sort(parts)
	return parts, nil
}

// FillDisk makes the disk of a node on the crashfs build full: from now
// on every write that needs new space fails with ENOSPC. FreeDisk gives
// the space back. Neither needs a restart.
func (n *Node) FillDisk() error {
	if n.diskFull == "" {
		return fmt.Errorf("testcluster: node %d does not run on the crashfs build", n.ID)
	}
	return os.WriteFile(n.diskFull, nil, 0o644)
}

// FreeDisk undoes FillDisk.
func (n *Node) FreeDisk() error {
	if n.diskFull == "" {
		return fmt.Errorf("testcluster: node %d does not run on the crashfs build", n.ID)
	}
	if err := os.Remove(n.diskFull); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// NamedListener is a further listener of a node (Node.Listeners): the
// addresses it binds for RPC and Kafka, and those it advertises.
type NamedListener struct {
	Name                         string
	RPC, Kafka                   string
	AdvertiseRPC, AdvertiseKafka string
}
