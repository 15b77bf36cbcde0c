package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

	var ms []*kcatMember
	for i, n := range c.Nodes {
		ms = append(ms, startKcatMember(t, kcat, n.Kafka, "kgroup", "shared", fmt.Sprintf("m%d", i+1)))
	}
	// The records are written once all three have joined: a member that
	// started late (a loaded machine) would otherwise join after the
	// first had read them all, in a second generation.
	var joined string
	require.Eventually(t, func() bool {
		res, err := c.Ctl(context.Background(), "", "group", "describe", "kgroup", "-o", "json")
		if err != nil || res.Exit != 0 {
			return false
		}
		joined = res.Stdout
		var d struct {
			State   string            `json:"state"`
			Members []json.RawMessage `json:"members"`
		}
		return json.Unmarshal([]byte(res.Stdout), &d) == nil && d.State == "stable" && len(d.Members) == 3
	}, 90*time.Second, 200*time.Millisecond, "the three kcat members never formed one stable group: %s", joined)
	first := produceValues(t, c, "shared", "first", 600)
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
	// gostream-ctl group describe shows the Kafka group: its members with
	// their client ids, and the partitions the leader gave each.
	desc := ctlOK(t, c, "group", "describe", "kgroup", "-o", "json").Stdout
	var d struct {
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Assignor     string `json:"assignor"`
		Members      []struct {
			ClientID string   `json:"client_id"`
			Topics   []string `json:"topics"`
			Assigned []struct {
				Partitions []int32 `json:"partitions"`
			} `json:"assigned"`
		} `json:"members"`
	}
	require.NoError(t, json.Unmarshal([]byte(desc), &d), desc)
	assert.Equal(t, "stable", d.State)
	assert.Equal(t, "consumer", d.ProtocolType)
	assert.Equal(t, "range", d.Assignor)
	require.Len(t, d.Members, 3, desc)
	assigned := 0
	for _, m := range d.Members {
		assert.Equal(t, "rdkafka", m.ClientID)
		assert.Equal(t, []string{"shared"}, m.Topics)
		for _, a := range m.Assigned {
			assigned += len(a.Partitions)
		}
	}
	assert.Equal(t, 6, assigned, desc)
	assert.Contains(t, ctlOK(t, c, "group", "describe", "kgroup").Stdout, "Kafka protocol type consumer")

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

// franz-go group consumers, with its default balancer (cooperative-sticky:
// incremental rebalances): two members share a six-partition topic, each
// partition owned by one member at a time (franz-go tells each member
// what it is assigned and what it must give up); when one leaves, the
// other gets its partitions from its commits, and every record is read.
func TestFranzGoConsumerGroup(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "500ms"}})
	ctlOK(t, c, "topic", "create", "fg", "--partitions", "6", "--replication-factor", "3")
	first := produceValues(t, c, "fg", "first", 600)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type member struct {
		cl  *kgo.Client
		mu  sync.Mutex
		got map[string]bool
		own map[int32]bool
	}
	var mu sync.Mutex
	owners := map[int32]string{} // partition -> member that owns it now
	var violations []string
	start := func(name string) *member {
		m := &member{got: map[string]bool{}, own: map[int32]bool{}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.ConsumerGroup("fgroup"), kgo.ConsumeTopics("fg"),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(200*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range a["fg"] {
					if o := owners[p]; o != "" && o != name {
						violations = append(violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, name, o))
					}
					owners[p] = name
				}
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
				cl.CommitMarkedOffsets(ctx)
				mu.Lock()
				defer mu.Unlock()
				for _, p := range r["fg"] {
					if owners[p] == name {
						delete(owners, p)
					}
				}
			}),
			kgo.AutoCommitMarks(),
		)
		require.NoError(t, err)
		m.cl = cl
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					m.mu.Lock()
					m.got[string(r.Value)] = true
					m.own[r.Partition] = true
					m.mu.Unlock()
					cl.MarkCommitRecords(r)
				})
			}
		}()
		return m
	}
	gotAll := func(ms ...*member) map[string]bool {
		out := map[string]bool{}
		for _, m := range ms {
			m.mu.Lock()
			for v := range m.got {
				out[v] = true
			}
			m.mu.Unlock()
		}
		return out
	}
	a, b := start("a"), start("b")
	defer func() { a.cl.Close() }()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(owners) == 6 && len(gotAll(a, b)) >= len(first)
	}, 90*time.Second, 100*time.Millisecond, "both members read every record")
	mu.Lock()
	byOwner := map[string]int{}
	for _, o := range owners {
		byOwner[o]++
	}
	mu.Unlock()
	assert.Equal(t, map[string]int{"a": 3, "b": 3}, byOwner, "three partitions each")

	// b leaves: a takes its partitions, from b's commits on.
	b.cl.Close()
	second := produceValues(t, c, "fg", "second", 300)
	require.Eventually(t, func() bool {
		got := gotAll(a)
		for v := range second {
			if !got[v] {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "a reads every new record")
	mu.Lock()
	assert.Empty(t, violations)
	mu.Unlock()

	// Kafka's admin requests about the group, through franz-go (which
	// sends ListGroups to every broker, the others to the coordinator).
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Node(3).Kafka))
	require.NoError(t, err)
	defer admin.Close()
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	lg.StatesFilter = []string{"Stable"}
	lresp, err := lg.RequestWith(ctx, admin)
	require.NoError(t, err)
	var listed []string
	for _, g := range lresp.Groups {
		listed = append(listed, g.Group+"/"+g.ProtocolType+"/"+g.GroupState)
	}
	assert.Contains(t, listed, "fgroup/consumer/Stable")
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"fgroup", "nosuchgroup"}
	dresp, err := dg.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Len(t, dresp.Groups, 2)
	described := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range dresp.Groups {
		described[g.Group] = g
	}
	fg := described["fgroup"]
	assert.Equal(t, "Stable", fg.State)
	assert.Equal(t, "consumer", fg.ProtocolType)
	assert.Equal(t, "cooperative-sticky", fg.Protocol)
	require.Len(t, fg.Members, 1)
	var asg kmsg.ConsumerMemberAssignment
	require.NoError(t, asg.ReadFrom(fg.Members[0].MemberAssignment))
	require.Len(t, asg.Topics, 1)
	assert.Len(t, asg.Topics[0].Partitions, 6, "the one member left has every partition")
	assert.Equal(t, "Dead", described["nosuchgroup"].State)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"fgroup"}
	delResp, err := del.RequestWith(ctx, admin)
	require.NoError(t, err)
	assert.Equal(t, kerr.NonEmptyGroup.Code, delResp.Groups[0].ErrorCode, "a group with members is not deleted")
	a.cl.Close()
	require.Eventually(t, func() bool {
		r, err := del.RequestWith(ctx, admin)
		return err == nil && r.Groups[0].ErrorCode == 0
	}, 30*time.Second, 200*time.Millisecond, "the group, empty, is deleted")
	res, err := c.Ctl(ctx, "", "group", "describe", "fgroup")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit, "deleted: %s%s", res.Stdout, res.Stderr)
}

// IBM/sarama's consumer group with a static member (group.instance.id):
// restarted within its session timeout, it joins again with its instance
// id and gets its partitions back without a rebalance: the other member's
// generation does not change.
func TestSaramaStaticMember(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "500ms"}})
	ctlOK(t, c, "topic", "create", "st", "--partitions", "4", "--replication-factor", "3")
	produceValues(t, c, "st", "v", 200)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := func(instance string) *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Group.Session.Timeout = 20 * time.Second
		cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		cfg.Consumer.Group.InstanceId = instance
		return cfg
	}
	run := func(instance string) (sarama.ConsumerGroup, *saramaHandler) {
		g, err := sarama.NewConsumerGroup([]string{c.Node(2).Kafka}, "sgroup", cfg(instance))
		require.NoError(t, err)
		h := &saramaHandler{}
		go func() {
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{"st"}, h); err != nil {
					return
				}
			}
		}()
		return g, h
	}
	g1, h1 := run("static-1")
	g2, h2 := run("static-2")
	defer g2.Close()
	// Both settle into one generation.
	require.Eventually(t, func() bool {
		g1n, g2n := h1.gen.Load(), h2.gen.Load()
		return g1n > 0 && g1n == g2n
	}, 60*time.Second, 100*time.Millisecond, "both members in one generation")
	gen, sessions := h2.gen.Load(), h2.sessions.Load()

	// static-1 restarts: a new process with the same instance id, within
	// its session timeout.
	require.NoError(t, g1.Close())
	g1b, h1b := run("static-1")
	defer g1b.Close()
	require.Eventually(t, func() bool { return h1b.gen.Load() > 0 }, 60*time.Second, 100*time.Millisecond, "the restarted member's session")
	assert.Equal(t, gen, h1b.gen.Load(), "the restarted static member is back in the same generation")
	// A rebalance, if one were coming, would begin within its heartbeats.
	assert.Never(t, func() bool { return h2.sessions.Load() != sessions }, 3*time.Second, 100*time.Millisecond,
		"the other member kept its session: no rebalance")
	assert.Equal(t, gen, h2.gen.Load())
}

// saramaHandler keeps its sessions' count and last generation.
type saramaHandler struct{ gen, sessions atomic.Int32 }

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.gen.Store(s.GenerationID())
	h.sessions.Add(1)
	return nil
}
func (*saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (*saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
	}
	return nil
}

// The coordinator of a franz-go group is killed (kill -9) while the group
// rebalances; the operator fails its node over. The group settles on the
// new coordinator by itself, every record is read, and no committed
// offset is lost or goes back.
func TestKafkaGroupCoordinatorFailover(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "500ms"}})
	ctlOK(t, c, "topic", "create", "cf", "--partitions", "6", "--replication-factor", "3")
	first := produceValues(t, c, "cf", "first", 600)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.Kafka)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer admin.Close()
	// A group whose coordinator is not node 1, the controller's node,
	// which must live to fail the other over.
	group, victim, err := GroupNotCoordinatedBy(ctx, c, "cfgroup", 1)
	require.NoError(t, err)

	var mu sync.Mutex
	got := map[string]bool{}
	start := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("cf"),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(200*time.Millisecond),
			kgo.AutoCommitMarks(), kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
				cl.CommitMarkedOffsets(ctx)
			}))
		require.NoError(t, err)
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					got[string(r.Value)] = true
					mu.Unlock()
					cl.MarkCommitRecords(r)
				})
			}
		}()
		return cl
	}
	readAll := func(want map[string]bool) bool {
		mu.Lock()
		defer mu.Unlock()
		for v := range want {
			if !got[v] {
				return false
			}
		}
		return true
	}
	total := func(offs map[int32]int64) int64 {
		n := int64(0)
		for _, o := range offs {
			n += o
		}
		return n
	}
	a, b := start(), start()
	defer a.Close()
	defer b.Close()
	require.Eventually(t, func() bool { return readAll(first) }, 90*time.Second, 100*time.Millisecond)
	var before map[int32]int64
	require.Eventually(t, func() bool {
		before = committedOffsets(t, c, group)
		return len(before) == 6 && total(before) == 600
	}, 30*time.Second, 100*time.Millisecond, "committed: %v", before)

	// A third member starts a rebalance; the coordinator dies in it.
	cm := start()
	defer cm.Close()
	require.NoError(t, c.Node(victim).Kill())
	killed := time.Now()
	ctlOK(t, c, "failover", "--broker", fmt.Sprint(victim))
	second := produceValues(t, c, "cf", "second", 300)
	require.Eventually(t, func() bool { return readAll(second) }, 120*time.Second, 200*time.Millisecond, "the group reads on after the failover")
	t.Logf("the group read every new record %s after the coordinator's kill -9", time.Since(killed).Round(time.Millisecond))
	var after map[int32]int64
	require.Eventually(t, func() bool {
		after = committedOffsets(t, c, group)
		return len(after) == 6 && total(after) == 900
	}, 60*time.Second, 200*time.Millisecond, "committed after the failover: %v", after)
	for p, o := range before {
		assert.GreaterOrEqual(t, after[p], o, "partition %d's committed offset never goes back", p)
	}
}
