package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gostream/storage"
	"gostream/transport"
)

// Config describes a cluster to start.
type Config struct {
	// Nodes is the number of nodes, with ids 1..Nodes; node 1 is the
	// controller.
	Nodes int
	// Candidates, above 1, makes nodes 1..Candidates the candidates of a
	// replicated controller (docs/controller-raft.md) instead of node 1
	// the single controller.
	Candidates int
	// Dir holds every node's data directory and log.
	Dir string
	// Race builds the binaries with the race detector.
	Race bool
	// Host is the loopback address nodes bind (default 127.0.0.1).
	Host string
	// Netns runs node k on 127.0.0.k, dialing its peers from there, with
	// its RPC address behind an in-process proxy, so that Cut, Partition
	// and Proxy faults work. It needs the harness's network namespace
	// (see ReexecInNetns); New fails without it. Host is ignored.
	Netns bool
	// Seed seeds the proxy's random choices.
	Seed int64
	// NodeArgs are extra flags for every node.
	NodeArgs []string
	// Kafka gives every node a Kafka listener (Node.Kafka) on a free port.
	Kafka bool
	// CrashFS runs every node on the crashfs build (Binaries.CrashNode):
	// kill -9 loses what a node had not fsync'd, as a power loss does, and
	// Node.FillDisk makes a node's disk full.
	CrashFS bool
	// Secure runs every node with TLS, mutual TLS, gossip encryption and
	// authentication (docs/security.md), from files New writes under
	// Dir/secure; the harness's clients and gostream-ctl authenticate as
	// the superuser admin (see Secure).
	Secure bool
	// Logf receives the harness's own lines (for example testing.T.Logf).
	Logf func(format string, args ...any)
}

// Cluster is a set of node process slots and the binaries that run them.
type Cluster struct {
	Bins  Binaries
	Nodes []*Node
	cfg   Config
	net   network
	proxy *Proxy // nil unless cfg.Netns
	// Secure is the CA, certificates, keys and tokens of a cluster of
	// Config.Secure; nil otherwise.
	Secure *Secure

	impostors int // made by Impostor, for their names
}

// New builds the binaries and lays out the nodes. It starts nothing.
func New(cfg Config) (*Cluster, error) {
	if cfg.Nodes < 1 {
		return nil, errors.New("testcluster: need at least one node")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	bins, err := Build(cfg.Race)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Bins: bins, cfg: cfg}
	c.net.cuts = map[[2]int32]bool{}
	if cfg.Secure {
		if c.Secure, err = newSecure(filepath.Join(cfg.Dir, "secure"), cfg.Nodes); err != nil {
			return nil, fmt.Errorf("testcluster: security files: %w", err)
		}
	}
	if cfg.Netns {
		if err := Netns(); err != nil {
			return nil, err
		}
		c.proxy = NewProxy(cfg.Seed, cfg.Logf)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		n := &Node{ID: int32(i), DataDir: filepath.Join(cfg.Dir, fmt.Sprintf("node%d", i)), bin: bins.Node,
			logPath: filepath.Join(cfg.Dir, fmt.Sprintf("node%d.log", i)), logf: cfg.Logf,
			Args: append([]string(nil), cfg.NodeArgs...), host: cfg.Host}
		if cfg.CrashFS {
			n.bin = bins.CrashNode
			n.diskFull = filepath.Join(cfg.Dir, fmt.Sprintf("node%d.disk-full", i))
			n.Env = append(n.Env, storage.DiskFullEnv+"="+n.diskFull)
		}
		if cfg.Netns {
			n.host = NodeHost(n.ID)
			n.Args = append(n.Args, "--dial-source", n.host)
		}
		if s := c.Secure; s != nil {
			n.sec = s
			n.Args = append(n.Args, s.nodeArgs(n.ID, cfg.Nodes)...)
		}
		if err := c.freshAddrs(n); err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Proxy is the in-process proxy every connection to a node's RPC address
// passes through, for delay and loss; nil unless Config.Netns.
func (c *Cluster) Proxy() *Proxy { return c.proxy }

// Controller is the --controller value of the cluster: node 1, or the
// candidates 1..Config.Candidates.
func (c *Cluster) Controller() string {
	names := []string{}
	for _, n := range c.Nodes[:max(1, min(c.cfg.Candidates, len(c.Nodes)))] {
		names = append(names, strconv.Itoa(int(n.ID))+"@"+n.Addr())
	}
	return strings.Join(names, ",")
}

// ActiveController waits until a running candidate is the active
// controller, one other than not (0: any), and returns its id. Active
// means its controller makes changes (a candidate's: it leads the Raft
// group and has taken over) and its own metadata names it: a candidate
// restarted over a broker cache that names it is not active for that.
func (c *Cluster) ActiveController(timeout time.Duration, not int32) (int32, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes[:max(1, min(c.cfg.Candidates, len(c.Nodes)))] {
			if n.ID == not || !n.Running() {
				continue
			}
			cs, err := n.ControllerStatus(time.Second)
			if err != nil {
				last = fmt.Sprintf("node %d: %v", n.ID, err)
				continue
			}
			if !cs.Active {
				last = fmt.Sprintf("node %d is not active (%s %s, leader %d)", n.ID, cs.Mode, cs.State, cs.Leader)
				continue
			}
			body, err := n.HTTPGet(transport.StatusPath)
			var st transport.NodeStatus
			if err == nil && json.Unmarshal(body, &st) == nil {
				if st.Controller == n.ID {
					return n.ID, nil
				}
				last = fmt.Sprintf("node %d is active but its metadata names controller %d at epoch %d", n.ID, st.Controller, st.MetadataEpoch)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("testcluster: no active controller (other than %d) within %s: %s", not, timeout, last)
}

// Node returns the node with id.
func (c *Cluster) Node(id int32) *Node { return c.Nodes[id-1] }

// StartNode starts one node of the cluster (with the controller and gossip
// seeds of a multi-node cluster) and waits until it is healthy.
func (c *Cluster) StartNode(id int32) error {
	n := c.Node(id)
	// The controller and gossip seeds are computed at every start: a
	// retry on fresh ports changes this node's own addresses, and the
	// controller named may be this node.
	start := func() error {
		var controller string
		var join []string
		if len(c.Nodes) > 1 {
			controller = c.Controller()
			for _, o := range c.Nodes {
				if o.ID != id {
					join = append(join, o.Gossip)
				}
			}
		}
		if err := n.Start(controller, join); err != nil {
			return err
		}
		return n.WaitHealthy(60 * time.Second)
	}
	err := start()
	// Ports are picked free and bound later by the node, so another process
	// can take one in between. On a node's first start nothing refers to its
	// addresses yet but what is computed at start, so try fresh ones.
	for try := 0; err != nil && !n.started && try < 3 && strings.Contains(err.Error(), "CannotListen"); try++ {
		c.cfg.Logf("node %d: a port was taken; retrying on fresh ports", id)
		if err = c.freshAddrs(n); err != nil {
			return err
		}
		err = start()
	}
	if err == nil {
		n.started = true
	}
	return err
}

// freshAddrs picks free ports for a node's addresses (and, behind the
// proxy, a proxy listener that its advertised address names).
func (c *Cluster) freshAddrs(n *Node) error {
	var err error
	for _, a := range []*string{&n.RPC, &n.HTTP} {
		if *a, err = freeAddr(n.host); err != nil {
			return err
		}
	}
	if n.Gossip, err = freeAddrUDP(n.host); err != nil {
		return err
	}
	if c.cfg.Kafka {
		if n.Kafka, err = freeAddr(n.host); err != nil {
			return err
		}
	}
	if c.proxy == nil {
		return nil
	}
	// The proxy's port comes from freeAddr too: a port 0 of its own could
	// be one freeAddr has just returned and closed (the kernel once gave a
	// node's gossip port to its proxy). Taken in between, another is tried.
	for try := 0; ; try++ {
		var listen string
		if listen, err = freeAddr(n.host); err != nil {
			return err
		}
		if n.Advertise, err = c.proxy.Listen(listen, n.RPC); err == nil || try == 2 {
			return err
		}
	}
}

// Start starts every node and returns once every one has registered with
// the controller, so that a topic created next is placed over all of them
// (placement uses the brokers registered at creation).
func (c *Cluster) Start() error {
	for _, n := range c.Nodes {
		if err := c.StartNode(n.ID); err != nil {
			return err
		}
	}
	return c.waitRegistered(60 * time.Second)
}

// waitRegistered polls the controller's /api/status until it lists every
// node as a registered broker.
func (c *Cluster) waitRegistered(timeout time.Duration) error {
	ctrl := c.Nodes[0]
	if c.cfg.Candidates > 1 {
		id, err := c.ActiveController(timeout, 0)
		if err != nil {
			return err
		}
		ctrl = c.Node(id)
	}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		body, err := ctrl.HTTPGet(transport.StatusPath)
		var st transport.NodeStatus
		if err == nil && json.Unmarshal(body, &st) == nil && len(st.Brokers) >= len(c.Nodes) {
			return nil
		}
		last = fmt.Sprintf("%d of %d brokers registered (err %v)", len(st.Brokers), len(c.Nodes), err)
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("testcluster: not every node registered within %s: %s", timeout, last)
}

// Close kills every node, heals the network and stops the proxy. It is
// safe to call more than once.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	if c.cfg.Netns {
		c.HealNetwork()
	}
	if c.proxy != nil {
		c.proxy.Close()
	}
}

// DataRaces are the race detector's reports in the logs of every node
// (Node.DataRaces), each headed by the node's id.
func (c *Cluster) DataRaces() []string {
	var out []string
	for _, n := range c.Nodes {
		for _, r := range n.DataRaces() {
			out = append(out, fmt.Sprintf("node %d: %s", n.ID, r))
		}
	}
	return out
}

// Bootstrap is the --bootstrap value naming every node.
func (c *Cluster) Bootstrap() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// CtlResult is the outcome of one gostream-ctl run.
type CtlResult struct {
	Stdout, Stderr string
	Exit           int
}

// CtlCommand returns an unstarted gostream-ctl command with the cluster's
// bootstrap and args, for a test that reads its output while it runs (a
// consume --follow) or signals it. ctx kills it.
func (c *Cluster) CtlCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Bins.Ctl, append([]string{"--bootstrap", c.Bootstrap()}, args...)...)
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), c.Secure.ctlEnv()...)
	return cmd
}

// Ctl runs gostream-ctl with the cluster's bootstrap and args, feeding it
// stdin, and returns its output and exit status.
func (c *Cluster) Ctl(ctx context.Context, stdin string, args ...string) (CtlResult, error) {
	cmd := c.CtlCommand(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	res, err := ctlResult(cmd)
	if err == nil {
		c.cfg.Logf("ctl %s -> exit %d\n%s%s", strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
	}
	return res, err
}

// ctlResult runs a gostream-ctl command to its end and returns what it
// printed and its exit status; an error means it could not run at all.
func ctlResult(cmd *exec.Cmd) (CtlResult, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := CtlResult{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.Exit = ee.ExitCode()
	case err != nil:
		return res, err
	}
	return res, nil
}

// Dir is the directory holding the nodes' data and logs.
func (c *Cluster) Dir() string { return c.cfg.Dir }
