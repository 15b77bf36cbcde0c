package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kcatMember is a kcat -G process: a member of a Kafka consumer group
// (librdkafka's balanced consumer) that prints "partition offset value"
// for every record it gets.
type kcatMember struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	got  []string // "p offset value"
	done chan struct{}
}

func startKcatMember(t *testing.T, kcat, bootstrap, group, topic, name string) *kcatMember {
	t.Helper()
	m := &kcatMember{name: name, done: make(chan struct{})}
	m.cmd = exec.Command(kcat, "-b", bootstrap, "-G", group, topic, "-q", "-u", "-f", "%p %o %s\n",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "-X", "auto.commit.interval.ms=200",
		"-X", "auto.offset.reset=earliest")
	out, err := m.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, m.cmd.Start())
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		<-m.done
	})
	go func() {
		defer close(m.done)
		s := bufio.NewScanner(out)
		for s.Scan() {
			m.mu.Lock()
			m.got = append(m.got, s.Text())
			m.mu.Unlock()
		}
		m.cmd.Wait()
	}()
	return m
}

func (m *kcatMember) records() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.got...)
}

// values are the values members printed, each value once.
func values(ms ...*kcatMember) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for _, r := range m.records() {
			if f := strings.SplitN(r, " ", 3); len(f) == 3 {
				out[f[2]] = true
			}
		}
	}
	return out
}

// partitionsOf are the partitions m printed records of.
func partitionsOf(m *kcatMember) map[string]bool {
	out := map[string]bool{}
	for _, r := range m.records() {
		out[strings.SplitN(r, " ", 2)[0]] = true
	}
	return out
}

// committedOffsets is the group's committed offset per partition, as
// gostream-ctl group describe shows them.
func committedOffsets(t *testing.T, c *Cluster, group string) map[int32]int64 {
	t.Helper()
	res, err := c.Ctl(context.Background(), "", "group", "describe", group, "-o", "json")
	require.NoError(t, err)
	var d struct {
		Offsets []struct {
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
		} `json:"offsets"`
	}
	out := map[int32]int64{}
	if res.Exit != 0 || json.Unmarshal([]byte(res.Stdout), &d) != nil {
		return out
	}
	for _, o := range d.Offsets {
		if o.Committed != nil {
			out[o.Partition] = *o.Committed
		}
	}
	return out
}

func produceValues(t *testing.T, c *Cluster, topic, prefix string, n int) map[string]bool {
	t.Helper()
	var lines []string
	want := map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		lines = append(lines, v)
		want[v] = true
	}
	ctlOKIn(t, c, strings.Join(lines, "\n")+"\n", "produce", topic)
	return want
}

// Three kcat -G members (librdkafka's balanced consumer) share a
// six-partition RF=3 topic: every record is delivered, no partition has
// two members in one generation. kill -9 of one: after its session the
// other two take its partitions. Their commits are what gostream-ctl
// group describe shows; members stopped and started again resume from
// them, and so does gostream-ctl consume --group, whose own commits kcat
// then resumes from.
func TestKcatConsumerGroup(t *testing.T) {
	kcat := kcatPath(t)
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "1s"}})
	ctlOK(t, c, "topic", "create", "shared", "--partitions", "6", "--replication-factor", "3")
	first := produceValues(t, c, "shared", "first", 600)

	var ms []*kcatMember
	for i, n := range c.Nodes {
		ms = append(ms, startKcatMember(t, kcat, n.Kafka, "kgroup", "shared", fmt.Sprintf("m%d", i+1)))
	}
	require.Eventually(t, func() bool { return len(values(ms...)) >= len(first) }, 90*time.Second, 100*time.Millisecond,
		"the three members read every record: %d of %d", len(values(ms...)), len(first))
	for v := range first {
		require.True(t, values(ms...)[v], "%s delivered", v)
	}
	// One generation, no partition read by two members (each record
	// once: no rebalance happened after the first).
	seen := map[string]string{}
	for _, m := range ms {
		for p := range partitionsOf(m) {
			require.Empty(t, seen[p], "partition %s read by %s and %s", p, seen[p], m.name)
			seen[p] = m.name
		}
	}
	assert.Len(t, seen, 6)

	// kill -9 of one member: the two others take its partitions after
	// its session timeout.
	require.NoError(t, ms[0].cmd.Process.Signal(syscall.SIGKILL))
	<-ms[0].done
	killed := time.Now()
	second := produceValues(t, c, "shared", "second", 300)
	require.Eventually(t, func() bool {
		got := values(ms[1], ms[2])
		for v := range second {
			if !got[v] {
				return false
			}
		}
		return true
	}, 90*time.Second, 100*time.Millisecond, "the two members left read every new record")
	t.Logf("the killed member's partitions were read by the others %s after the kill -9", time.Since(killed).Round(time.Millisecond))

	// Their commits: every partition at its end, as describe shows.
	require.Eventually(t, func() bool {
		offs := committedOffsets(t, c, "kgroup")
		total := int64(0)
		for _, o := range offs {
			total += o
		}
		return len(offs) == 6 && total == 900
	}, 30*time.Second, 100*time.Millisecond, "committed offsets: %v", committedOffsets(t, c, "kgroup"))

	// The members leave (SIGTERM: kcat leaves the group); gostream-ctl
	// consume --group resumes where they committed.
	for _, m := range ms[1:] {
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
		<-m.done
	}
	third := produceValues(t, c, "shared", "third", 60)
	var res CtlResult
	require.Eventually(t, func() bool {
		var err error
		res, err = c.Ctl(context.Background(), "", "consume", "shared", "--group", "kgroup", "--max", "60", "-o", "json")
		return err == nil && res.Exit == 0
	}, 60*time.Second, 500*time.Millisecond, "gostream-ctl consume --group after kcat: %s%s", res.Stdout, res.Stderr)
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		var r struct{ Value string }
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		got[r.Value] = true
	}
	assert.Equal(t, third, got, "gostream-ctl starts where kcat committed")

	// And kcat starts where gostream-ctl committed.
	fourth := produceValues(t, c, "shared", "fourth", 60)
	again := startKcatMember(t, kcat, c.Node(2).Kafka, "kgroup", "shared", "again")
	require.Eventually(t, func() bool { return len(values(again)) >= len(fourth) }, 60*time.Second, 100*time.Millisecond)
	assert.Equal(t, fourth, values(again), "kcat -G starts where gostream-ctl committed")
}
