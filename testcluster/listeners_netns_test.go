package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The listeners as a deployment has them, each party in a network of its
// own: three nodes, each in a network namespace with two interfaces, one
// on an internal network (10.91.0.0/24, where the nodes know each other
// as node1..node3, from an /etc/hosts of their own) and one on an
// external network (10.92.0.0/24), and a client in a fourth namespace on
// the external network only, that knows no node name and has no route to
// the internal network. Each node advertises its internal listeners by
// name and its external ones by external address, and drops what comes
// in on its external interface from anyone but the client, so the nodes
// can only work together through their internal names. From outside,
// through each node's external addresses in turn, gostream-ctl creates a
// topic whose three partitions are led by the three nodes, kcat and
// gostream-ctl produce to every partition, and both read everything
// back; kcat -L lists every broker at its external address, and the
// internal addresses cannot be reached from there.
func TestListenersAcrossNetworkNamespaces(t *testing.T) {
	if err := Netns(); err != nil {
		if os.Getenv("GOSTREAM_REQUIRE_NETNS") == "1" {
			t.Fatalf("GOSTREAM_REQUIRE_NETNS=1 but there is no network namespace: %v", err)
		}
		t.Skipf("no network namespace: %v", err)
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter is not installed (util-linux)")
	}
	kcat := kcatPath(t)
	bins, err := Build(false)
	require.NoError(t, err)
	require.NoError(t, checkNotHostNetns())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	for _, br := range []string{"gs-int", "gs-ext"} {
		require.NoError(t, runCmd("ip", "link", "add", br, "type", "bridge"))
		t.Cleanup(func() { runCmd("ip", "link", "del", br) })
		require.NoError(t, runCmd("ip", "link", "set", br, "up"))
	}
	hosts := filepath.Join(dir, "hosts")
	require.NoError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n10.91.0.1 node1\n10.91.0.2 node2\n10.91.0.3 node3\n"), 0o644))
	const clientIP = "10.92.0.100"
	var nodes [3]*nsHost
	for i := range nodes {
		k := i + 1
		h := startNSHost(t, fmt.Sprintf("node%d", k), hosts)
		h.link(t, "gs-int", fmt.Sprintf("gi%d", k), "int0", fmt.Sprintf("10.91.0.%d/24", k))
		h.link(t, "gs-ext", fmt.Sprintf("ge%d", k), "ext0", fmt.Sprintf("10.92.0.%d/24", k))
		require.NoError(t, h.run("iptables", "-w", "-A", "INPUT", "-i", "ext0", "!", "-s", clientIP, "-j", "DROP"))
		nodes[i] = h
	}
	client := startNSHost(t, "client", "")
	client.link(t, "gs-ext", "ge100", "ext0", clientIP+"/24")

	ext := func(k int, port int) string { return fmt.Sprintf("10.92.0.%d:%d", k, port) }
	for i, h := range nodes {
		k := i + 1
		log, err := os.Create(filepath.Join(dir, h.name+".log"))
		require.NoError(t, err)
		defer log.Close()
		data := filepath.Join(dir, h.name+"-data")
		require.NoError(t, os.MkdirAll(data, 0o755))
		cmd := h.command(ctx, true, bins.Node,
			"--id", fmt.Sprint(k), "--data-dir", data,
			"--listen", "internal://0.0.0.0:9400,external://0.0.0.0:19400",
			"--advertise", fmt.Sprintf("internal://node%d:9400,external://%s", k, ext(k, 19400)),
			"--kafka-listen", "internal://0.0.0.0:9092,external://0.0.0.0:19092",
			"--kafka-advertise", fmt.Sprintf("internal://node%d:9092,external://%s", k, ext(k, 19092)),
			"--gossip", fmt.Sprintf("10.91.0.%d:9401", k), "--join", "node1:9401,node2:9401,node3:9401",
			"--http", "0.0.0.0:9402", "--controller", "1@node1:9400,2@node2:9400,3@node3:9400")
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				out, _ := os.ReadFile(log.Name())
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				t.Logf("%s's log, the end:\n%s", h.name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		})
	}
	// ctl runs gostream-ctl in h's namespaces; it must succeed.
	ctl := func(h *nsHost, args ...string) string {
		t.Helper()
		out, err := h.command(ctx, h.hosts != "", bins.Ctl, append([]string{"--timeout", "10s"}, args...)...).CombinedOutput()
		require.NoError(t, err, "gostream-ctl %s in %s's namespace: %s", strings.Join(args, " "), h.name, out)
		return string(out)
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			require.True(t, time.Now().Before(deadline), "not within 60 s: %s", what)
			time.Sleep(200 * time.Millisecond)
		}
	}
	until("every node registered with the controller, through node1's internal name", func() bool {
		out, err := nodes[0].command(ctx, true, bins.Ctl, "--bootstrap", "node1:9400", "--timeout", "2s", "broker", "list", "-o", "json").Output()
		return err == nil && strings.Count(string(out), `"registered":"registered"`) == 3
	})

	// From outside: the topic, each partition led by another node.
	ctl(client, "--bootstrap", ext(1, 19400), "topic", "create", "outside", "--partitions", "3", "--replication-factor", "3")
	var desc struct {
		Partitions []struct {
			Partition, Leader int32
		}
	}
	until("every node's external listener knows the topic, each partition led by another node", func() bool {
		for k := 1; k <= 3; k++ {
			out, err := client.command(ctx, false, bins.Ctl, "--bootstrap", ext(k, 19400), "--timeout", "2s", "topic", "describe", "outside", "-o", "json").Output()
			if err != nil || json.Unmarshal(out, &desc) != nil || len(desc.Partitions) != 3 {
				return false
			}
		}
		leaders := map[int32]bool{}
		for _, p := range desc.Partitions {
			leaders[p.Leader] = true
		}
		return len(leaders) == 3
	})

	// Produce through every node's external addresses: gostream-ctl round
	// robin (two records a partition), kcat keyed with a header to each
	// partition.
	want := map[string]bool{}
	for k := 1; k <= 3; k++ {
		var values []string
		for i := range 6 {
			v := fmt.Sprintf("ctl-via-%d-%d", k, i)
			values = append(values, v)
			want[v] = true
		}
		ctl(client, append([]string{"--bootstrap", ext(k, 19400), "produce", "outside"}, values...)...)
		for p := range 3 {
			var in strings.Builder
			for i := range 5 {
				v := fmt.Sprintf("kcat-via-%d-p%d-%d", k, p, i)
				fmt.Fprintf(&in, "key-%d:%s\n", i, v)
				want[v] = true
			}
			cmd := client.command(ctx, false, kcat, "-b", ext(k, 19092), "-P", "-t", "outside", "-p", fmt.Sprint(p),
				"-K", ":", "-H", fmt.Sprintf("via=node%d", k), "-X", "acks=all", "-X", "message.timeout.ms=30000")
			cmd.Stdin = strings.NewReader(in.String())
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "kcat -P through %s: %s", ext(k, 19092), out)
		}
	}

	// Read everything back through every node's external addresses.
	for k := 1; k <= 3; k++ {
		out, err := client.command(ctx, false, kcat, "-b", ext(k, 19092), "-C", "-t", "outside", "-e", "-o", "beginning",
			"-f", "%p %s\n").CombinedOutput()
		require.NoError(t, err, "kcat -C through %s: %s", ext(k, 19092), out)
		got := map[string]bool{}
		parts := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if p, v, ok := strings.Cut(line, " "); ok && want[v] {
				got[v] = true
				parts[p] = true
			}
		}
		assert.Len(t, got, len(want), "kcat through node %d's external address read %d of %d records:\n%s", k, len(got), len(want), out)
		assert.Len(t, parts, 3, "kcat through node %d read from every partition", k)

		var n int
		for _, line := range strings.Split(strings.TrimSpace(ctl(client, "--bootstrap", ext(k, 19400), "consume", "outside", "-o", "json")), "\n") {
			var r struct{ Value string }
			if json.Unmarshal([]byte(line), &r) == nil && want[r.Value] {
				n++
			}
		}
		assert.Equal(t, len(want), n, "gostream-ctl consume through node %d's external address", k)
	}

	// kcat -L through an external listener lists every broker at its
	// external address; through an internal one (from a node), at its
	// name.
	out, err := client.command(ctx, false, kcat, "-b", ext(3, 19092), "-L").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out2, err := nodes[1].command(ctx, true, kcat, "-b", "node2:9092", "-L").CombinedOutput()
	require.NoError(t, err, "%s", out2)
	for k := 1; k <= 3; k++ {
		assert.Contains(t, string(out), fmt.Sprintf("broker %d at %s", k, ext(k, 19092)))
		assert.Contains(t, string(out2), fmt.Sprintf("broker %d at node%d:9092", k, k))
	}

	// The client cannot reach the internal network, by name or address.
	for _, addr := range []string{"node1:9400", "10.91.0.1:9400"} {
		out, err := client.command(ctx, false, bins.Ctl, "--bootstrap", addr, "--timeout", "2s", "cluster", "status").CombinedOutput()
		assert.Error(t, err, "gostream-ctl from the client's namespace reached %s: %s", addr, out)
	}
}

// nsHost is a process holding a network namespace of its own (and, given
// a hosts file, a mount namespace in which it is /etc/hosts), for
// commands to run in with nsenter.
type nsHost struct {
	name, hosts string
	pid         int
}

// startNSHost starts the holder; it is killed, and its namespaces with
// their interfaces go, when the test ends.
func startNSHost(t *testing.T, name, hosts string) *nsHost {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	h := &nsHost{name: name, hosts: hosts, pid: cmd.Process.Pid}
	// unshare makes the namespaces, then becomes sleep.
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		require.True(t, time.Now().Before(deadline), "%s's namespace holder did not start", name)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, h.run("ip", "link", "set", "lo", "up"))
	if hosts != "" {
		out, err := exec.Command("nsenter", "--target", fmt.Sprint(h.pid), "--mount", "--", "mount", "--bind", hosts, "/etc/hosts").CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	return h
}

// command is name with args in h's network namespace, and with mount in
// its mount namespace too (its /etc/hosts).
func (h *nsHost) command(ctx context.Context, mount bool, name string, args ...string) *exec.Cmd {
	ns := []string{"--target", fmt.Sprint(h.pid), "--net"}
	if mount {
		ns = append(ns, "--mount")
	}
	cmd := exec.CommandContext(ctx, "nsenter", append(append(ns, "--", name), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs a command in h's network namespace.
func (h *nsHost) run(args ...string) error {
	return runCmd(append([]string{"nsenter", "--target", fmt.Sprint(h.pid), "--net", "--"}, args...)...)
}

// link joins h to bridge with a veth pair: outer stays on the bridge,
// the inner end moves into h's namespace as dev, with address cidr.
func (h *nsHost) link(t *testing.T, bridge, outer, dev, cidr string) {
	t.Helper()
	inner := outer + "x"
	for _, args := range [][]string{
		{"ip", "link", "add", outer, "type", "veth", "peer", "name", inner},
		{"ip", "link", "set", outer, "master", bridge, "up"},
		{"ip", "link", "set", inner, "netns", fmt.Sprint(h.pid)},
	} {
		require.NoError(t, runCmd(args...))
	}
	require.NoError(t, h.run("ip", "link", "set", inner, "name", dev))
	require.NoError(t, h.run("ip", "addr", "add", cidr, "dev", dev))
	require.NoError(t, h.run("ip", "link", "set", dev, "up"))
}
