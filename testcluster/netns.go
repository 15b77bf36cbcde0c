package testcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

// The harness's network faults need a network of its own: the cluster runs
// inside a network namespace that the harness process creates by running
// itself again under `unshare --net`. In it, node k binds 127.0.0.k and
// dials its peers from that address (gostream-node --dial-source), so an
// iptables rule on a pair of addresses cuts one direction of one link.
// Everything else (the workload's clients, gostream-ctl) dials from
// 127.0.0.254, the namespace's default source address, or from the very
// address it dials, so no rule between two nodes ever touches it. The
// rules live in the namespace and die with it; the host's own rules are
// never read or written (every iptables call first checks that this
// process is not in the host's network namespace).

// netnsEnv marks a process that runs inside the harness's namespace
// ("1"), or one that must not try to create one ("off").
const netnsEnv = "GOSTREAM_TESTCLUSTER_NETNS"

// chainName is the iptables chain holding the partition rules.
const chainName = "GOSTREAM-CHAOS"

// clientSource is the address connections not made by a node come from.
const clientSource = "127.0.0.254"

var netnsState struct {
	once sync.Once
	err  error // why there is no namespace, once Netns has run
}

// ReexecInNetns runs the current program again inside a new network
// namespace, waits for it and returns its exit status with done true; the
// caller exits with that status. Inside, it sets the namespace up (or
// returns 2 with done true if it cannot). It returns done false, and the caller goes
// on as it is, when this process is already the one inside, when
// GOSTREAM_TESTCLUSTER_NETNS=off, or when no namespace can be made here
// (not root, no unshare, ip or iptables): then Netns reports why and the
// network-fault scenarios do not run. Call it first thing in main or
// TestMain.
func ReexecInNetns() (exit int, done bool) {
	switch os.Getenv(netnsEnv) {
	case "1":
		// Inside: bring loopback up now, as everything needs it.
		if err := Netns(); err != nil {
			fmt.Fprintf(os.Stderr, "testcluster: setting up the network namespace: %v\n", err)
			return 2, true
		}
		return 0, false
	case "off":
		return 0, false
	}
	if why := netnsUnavailable(); why != "" {
		os.Setenv(netnsEnv, "off")
		netnsState.once.Do(func() { netnsState.err = errors.New(why) })
		return 0, false
	}
	// The namespace has loopback only: fetch every module the binaries
	// need now, while the module proxy can still be reached.
	if root, err := moduleRoot(); err == nil {
		cmd := exec.Command("go", "list", "-deps", "./cmd/node", "./cmd/ctl")
		cmd.Dir = root
		cmd.Run()
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", os.Args[0]}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: unshare --net: %v; running without a network namespace\n", err)
		os.Setenv(netnsEnv, "off")
		return 0, false
	}
	// Pass Ctrl-C and termination on, so the inner process can stop its
	// nodes and save what it must.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	signal.Stop(sigs)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return 128 + int(st.Signal()), true
		}
		return ee.ExitCode(), true
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		return 2, true
	}
	return 0, true
}

// netnsUnavailable says why no namespace can be made, or "".
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "not running as root (network namespaces and iptables need it)"
	}
	for _, bin := range []string{"unshare", "ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed (.ci/run installs util-linux, iproute2 and iptables)"
		}
	}
	// A container may forbid new namespaces even to root.
	if out, err := exec.Command("unshare", "--net", "true").CombinedOutput(); err != nil {
		return fmt.Sprintf("unshare --net fails here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// Netns sets up the namespace this process runs in, once, and reports
// whether network faults are available: nil when they are, otherwise why
// not.
func Netns() error {
	netnsState.once.Do(func() {
		if os.Getenv(netnsEnv) != "1" {
			netnsState.err = errors.New("not inside the harness's network namespace (start through ReexecInNetns)")
			return
		}
		if err := checkNotHostNetns(); err != nil {
			netnsState.err = err
			return
		}
		for _, args := range [][]string{
			{"ip", "link", "set", "lo", "up"},
			{"ip", "addr", "add", clientSource + "/32", "dev", "lo"},
			// Connections that do not choose a source address come from
			// clientSource, which no partition rule names.
			{"ip", "route", "replace", "local", "127.0.0.0/8", "dev", "lo", "table", "local",
				"proto", "kernel", "scope", "host", "src", clientSource},
			{"iptables", "-w", "-N", chainName},
			{"iptables", "-w", "-A", "INPUT", "-j", chainName},
		} {
			if err := runCmd(args...); err != nil {
				netnsState.err = err
				return
			}
		}
	})
	return netnsState.err
}

// checkNotHostNetns refuses to go on in the network namespace of PID 1.
func checkNotHostNetns() error {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	host, err := os.Readlink("/proc/1/ns/net")
	if err == nil && host == self {
		return errors.New("testcluster: refusing to change network rules in the host's network namespace")
	}
	return nil
}

func runCmd(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NodeHost is the address node id binds inside the namespace.
func NodeHost(id int32) string { return fmt.Sprintf("127.0.0.%d", id) }

// network holds the partition rules in force, for logs and healing.
type network struct {
	mu   sync.Mutex
	cuts map[[2]int32]bool // from, to: packets from -> to are dropped
}

// Cut drops every packet from node from to node to: a one-way partition
// (TCP across it stalls both ways, since nothing from -> to gets through,
// not even acknowledgements; gossip's UDP is cut one way only).
func (c *Cluster) Cut(from, to int32) error {
	if !c.cfg.Netns {
		return errors.New("testcluster: no network faults: the cluster was not started with Config.Netns")
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	k := [2]int32{from, to}
	if c.net.cuts[k] {
		return nil
	}
	if err := checkNotHostNetns(); err != nil {
		return err
	}
	if err := runCmd("iptables", "-w", "-A", chainName, "-s", NodeHost(from), "-d", NodeHost(to), "-j", "DROP"); err != nil {
		return err
	}
	c.net.cuts[k] = true
	c.cfg.Logf("network: cut %d -> %d", from, to)
	return nil
}

// Partition cuts both directions between every node of a and every node
// of b.
func (c *Cluster) Partition(a, b []int32) error {
	for _, x := range a {
		for _, y := range b {
			if err := c.Cut(x, y); err != nil {
				return err
			}
			if err := c.Cut(y, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// Cuts lists the one-way cuts in force, as "from->to".
func (c *Cluster) Cuts() []string {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	var out []string
	for k := range c.net.cuts {
		out = append(out, fmt.Sprintf("%d->%d", k[0], k[1]))
	}
	return out
}

// HealNetwork removes every partition rule and every proxy fault.
func (c *Cluster) HealNetwork() error {
	if c.proxy != nil {
		c.proxy.ClearFaults()
	}
	if !c.cfg.Netns {
		return nil
	}
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	if err := checkNotHostNetns(); err != nil {
		return err
	}
	if err := runCmd("iptables", "-w", "-F", chainName); err != nil {
		return err
	}
	if len(c.net.cuts) > 0 {
		c.cfg.Logf("network: healed %d cuts", len(c.net.cuts))
	}
	c.net.cuts = map[[2]int32]bool{}
	return nil
}
