package testcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/client"
)

// These tests run `gostream-ctl autopilot` against real nodes with nobody
// typing (docs/autopilot.md).

// startAutopilot starts an autopilot named name, killed at the end of the
// test.
func startAutopilot(t *testing.T, c *Cluster, name string, args ...string) *AutopilotProc {
	t.Helper()
	ap, err := c.StartAutopilot(name, args...)
	require.NoError(t, err)
	t.Cleanup(ap.Kill)
	return ap
}

// quickPolicy is a policy that keeps the tests short: a 6 s grace period
// (the gossip bound is 5.5 s), a look every quarter of a second.
var quickPolicy = []string{"--failover-after", "6s", "--poll-interval", "250ms", "--recover-after", "2s",
	"--leaders-back-after", "3s", "--lease-ttl", "3s"}

const quickGrace = 6 * time.Second

// apAck is one acknowledged write of the autopilot tests' load.
type apAck struct {
	kind       string // native or franz-go
	partition  int32
	value      string
	offset     int64
	start, end time.Time
}

// apLoad writes to every partition of a topic, one record at a time per
// partition, with a native producer and with franz-go (idempotent,
// acks=all, its defaults but for a 100 ms retry backoff and a manual
// partitioner), and keeps every acknowledgement.
type apLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acks   []apAck
}

func startAPLoad(t *testing.T, c *Cluster, topic string, partitions int32) *apLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &apLoad{cancel: cancel}
	t.Cleanup(l.stop)
	var kafka []string
	for _, n := range c.Nodes {
		kafka = append(kafka, n.Kafka)
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(kafka...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.MetadataMinAge(250*time.Millisecond))
	require.NoError(t, err)
	for p := range partitions {
		cl := newClient(t, c)
		prod, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: time.Second, Linger: -1})
		require.NoError(t, err)
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			defer prod.Close()
			for seq := 0; ctx.Err() == nil; seq++ {
				v := fmt.Sprintf("n%d-%d", p, seq)
				start := time.Now()
				sctx, scancel := context.WithTimeout(ctx, time.Second)
				ack, err := prod.Send(sctx, client.ProducerRecord{Topic: topic, Partition: p, ManualPartition: true, Value: []byte(v)})
				scancel()
				if err != nil {
					sleepCtx(ctx, 50*time.Millisecond)
					continue
				}
				l.add(apAck{kind: "native", partition: p, value: v, offset: ack.Offset, start: start, end: time.Now()})
			}
		}()
		go func() {
			defer l.wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				v := fmt.Sprintf("k%d-%d", p, seq)
				start := time.Now()
				res := kcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
				r, err := res.First()
				if err != nil {
					sleepCtx(ctx, 50*time.Millisecond)
					continue
				}
				l.add(apAck{kind: "franz-go", partition: p, value: v, offset: r.Offset, start: start, end: time.Now()})
			}
		}()
	}
	go func() {
		l.wg.Wait()
		kcl.Close()
	}()
	return l
}

func (l *apLoad) add(a apAck) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

func (l *apLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *apLoad) snapshot() []apAck {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acks)
}

// firstAcks is, for each producer (kind and partition), the first write
// begun after since that was acknowledged.
func (l *apLoad) firstAcks(since time.Time) map[string]apAck {
	out := map[string]apAck{}
	for _, a := range l.snapshot() {
		k := fmt.Sprintf("%s/%d", a.kind, a.partition)
		if a.start.After(since) {
			if old, ok := out[k]; !ok || a.end.Before(old.end) {
				out[k] = a
			}
		}
	}
	return out
}

// waitWrites waits until every one of the 2 × partitions producers has
// had a write begun after since acknowledged, and returns the first of
// each.
func (l *apLoad) waitWrites(t *testing.T, partitions int32, since time.Time, timeout time.Duration) map[string]apAck {
	t.Helper()
	var got map[string]apAck
	require.Eventually(t, func() bool {
		got = l.firstAcks(since)
		return len(got) == 2*int(partitions)
	}, timeout, 50*time.Millisecond, "writes of every producer after %s", since.Format("15:04:05.000"))
	return got
}

// checkRead reads every partition whole and checks that every
// acknowledged write is at its offset: nothing acknowledged was lost.
func (l *apLoad) checkRead(t *testing.T, c *Cluster, topic string, partitions int32) {
	t.Helper()
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := map[int32]map[int64]string{}
	for p := range partitions {
		var offs client.PartitionOffsets
		require.Eventually(t, func() bool {
			var err error
			if err = cl.RefreshMetadata(ctx, topic); err == nil {
				offs, err = cl.ListOffsets(ctx, topic, p)
			}
			return err == nil
		}, time.Minute, 200*time.Millisecond)
		cons, err := client.NewConsumer(cl, topic, p, client.ConsumerConfig{MaxBytes: 1 << 20})
		require.NoError(t, err)
		cons.SeekTo(offs.LogStartOffset)
		at[p] = map[int64]string{}
		for cons.Position() < offs.HighWatermark {
			recs, err := cons.Poll(ctx, 100*time.Millisecond)
			require.NoError(t, ctx.Err(), "reading %s/%d", topic, p)
			if err != nil {
				sleepCtx(ctx, 200*time.Millisecond)
				continue
			}
			for _, r := range recs {
				at[p][r.Offset] = string(r.Value)
			}
		}
	}
	acks := l.snapshot()
	lost := 0
	for _, a := range acks {
		if got := at[a.partition][a.offset]; got != a.value {
			lost++
			if lost <= 10 {
				t.Errorf("%s acknowledged %q at %s/%d offset %d; the log holds %q there", a.kind, a.value, topic, a.partition, a.offset, got)
			}
		}
	}
	assert.Zero(t, lost, "acknowledged writes lost, of %d", len(acks))
	t.Logf("%d acknowledged writes, every one read back at its offset", len(acks)-lost)
}

// whole reports whether every partition of topic has every replica
// active and is led by its preferred replica.
func whole(t *testing.T, cl *client.Client, topic string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.RefreshMetadata(ctx, topic); err != nil {
		return false
	}
	tm, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		return false
	}
	for _, p := range tm.Partitions {
		if len(p.Active) != len(p.Replicas) || p.Leader != p.Replicas[0] {
			return false
		}
	}
	return true
}

// autopilotEvents counts the audit trail's events by requester and
// action, "requester action broker".
func autopilotEvents(t *testing.T, c *Cluster) map[string]int {
	t.Helper()
	h := ctlJSON[ctlHistory](t, c, "cluster", "history")
	out := map[string]int{}
	for _, e := range h.Events {
		out[fmt.Sprintf("%s %s", e.Requester, e.Action)]++
	}
	return out
}

// The autopilot with nobody typing: kill -9 of the node that leads a
// partition, under a native and a franz-go producer on every partition:
// each producer's writes resume within the grace period plus 2 s (the
// autopilot fails the broker over); the node comes back: the autopilot
// recovers it and moves leadership back. Nothing acknowledged is lost;
// the audit trail names the autopilot; its metrics count what it did;
// SIGTERM stops it, giving the lease back.
func TestAutopilotFailsOverRecoversAndMovesLeadersBack(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	cl := newClient(t, c)
	tm := createTopic(t, cl, "orders", 3, 3)
	victim := tm.Partitions[1].Leader
	require.NotEqual(t, int32(1), victim, "node 1 is the controller")
	ap := startAutopilot(t, c, "autopilot:test", append(quickPolicy, "--metrics-addr", "127.0.0.1:0")...)
	require.NoError(t, ap.WaitLog("acting: the lease is this autopilot's", 30*time.Second))

	load := startAPLoad(t, c, "orders", 3)
	load.waitWrites(t, 3, time.Now(), 30*time.Second)
	killed := time.Now()
	require.NoError(t, c.Node(victim).Kill())
	first := load.waitWrites(t, 3, killed, time.Minute)
	for k, a := range first {
		resumed := a.end.Sub(killed)
		t.Logf("%s: first write begun after the kill acknowledged %s after it", k, resumed.Round(time.Millisecond))
		assert.LessOrEqual(t, resumed, quickGrace+2*time.Second, "%s: writes resume within the grace period plus 2 s", k)
	}
	failover := fmt.Sprintf(`command="gostream-ctl failover --broker %d"`, victim)
	assert.Contains(t, ap.Log(), fmt.Sprintf(`run: %s reason="broker %d silent for `, failover, victim))

	require.NoError(t, c.StartNode(victim))
	require.Eventually(t, func() bool { return whole(t, cl, "orders") }, 90*time.Second, 250*time.Millisecond,
		"the autopilot recovers the node and moves leadership back")
	require.NoError(t, ap.WaitLog(`done: command="gostream-ctl elect-leaders"`, 30*time.Second))
	assert.Contains(t, ap.Log(), fmt.Sprintf(`done: command="gostream-ctl recover --broker %d"`, victim))
	load.waitWrites(t, 3, time.Now(), 30*time.Second)
	load.stop()
	load.checkRead(t, c, "orders", 3)

	ev := autopilotEvents(t, c)
	assert.Equal(t, 1, ev["autopilot:test failover"], "%v", ev)
	assert.Equal(t, 2, ev["autopilot:test drop-follower"], "%v", ev)
	assert.GreaterOrEqual(t, ev["autopilot:test recover"], 3, "%v", ev)
	assert.Equal(t, 1, ev["autopilot:test elect-leader"], "%v", ev)

	url := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(ap.Log())
	require.Len(t, url, 2, "the metrics address is logged")
	resp, err := http.Get(url[1])
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, m := range []string{`gostream_autopilot_actions_total{kind="failover",result="ok"} 1`,
		`gostream_autopilot_actions_total{kind="recover",result="ok"} 1`,
		`gostream_autopilot_actions_total{kind="elect-leaders",result="ok"} 1`,
		`gostream_autopilot_actions_total{kind="failover",result="failed"} 0`,
		`gostream_autopilot_lease_held 1`, `gostream_autopilot_brokers_silent 0`, `gostream_autopilot_brokers{state="answering"} 3`} {
		assert.Contains(t, string(body), m+"\n")
	}

	code, err := ap.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, 0, code, "stopped cleanly: %s", ap.Stderr())
	assert.Contains(t, ap.Log(), "gave the lease back")
}

// Two autopilots: only the one that holds the lease acts (the audit
// trail names it alone); when it is killed, the other takes over once
// the lease has run out, and acts.
func TestAutopilotOnlyTheLeaseHolderActs(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3})
	cl := newClient(t, c)
	createTopic(t, cl, "orders", 3, 3)
	aps := map[string]*AutopilotProc{}
	for _, name := range []string{"autopilot:a", "autopilot:b"} {
		aps[name] = startAutopilot(t, c, name, quickPolicy...)
	}
	var holder, other string
	require.Eventually(t, func() bool {
		for name, ap := range aps {
			if strings.Contains(ap.Log(), "acting: the lease is this autopilot's") {
				holder = name
			}
		}
		return holder != ""
	}, 30*time.Second, 50*time.Millisecond)
	for name := range aps {
		if name != holder {
			other = name
		}
	}
	require.NoError(t, aps[other].WaitLog("standing by: the lease is another autopilot's: holder="+holder, 30*time.Second))

	require.NoError(t, c.Node(3).Kill())
	require.NoError(t, aps[holder].WaitLog(`done: command="gostream-ctl failover --broker 3"`, time.Minute))
	require.NoError(t, c.StartNode(3))
	require.Eventually(t, func() bool { return whole(t, cl, "orders") }, 90*time.Second, 250*time.Millisecond)
	ev := autopilotEvents(t, c)
	assert.Positive(t, ev[holder+" failover"]+ev[holder+" drop-follower"], "%v", ev)
	assert.Positive(t, ev[holder+" recover"], "%v", ev)
	for k := range ev {
		assert.False(t, strings.HasPrefix(k, other+" "), "the autopilot that stands by acted: %s", k)
	}
	assert.NotContains(t, aps[other].Log(), "run: command", "it ran nothing")
	assert.NotContains(t, aps[other].Log(), "acting: the lease is this autopilot's")

	aps[holder].Kill()
	killed := time.Now()
	require.NoError(t, aps[other].WaitLog("acting: the lease is this autopilot's", 30*time.Second))
	took := time.Since(killed)
	t.Logf("%s took over %s after %s was killed", other, took.Round(time.Millisecond), holder)
	assert.Less(t, took, 3*time.Second+3*time.Second, "within the lease's time to live and a poll or two")
	assert.Greater(t, took, 1500*time.Millisecond, "not before the lease, renewed at most a poll before the kill, ran out")

	require.NoError(t, c.Node(2).Kill())
	require.NoError(t, aps[other].WaitLog(`done: command="gostream-ctl failover --broker 2"`, time.Minute))
	ev = autopilotEvents(t, c)
	assert.Positive(t, ev[other+" failover"]+ev[other+" drop-follower"], "%v", ev)
}

// Two of three brokers silent at once (SIGSTOP) is a network problem,
// not two dead brokers: the autopilot fails nothing over and stops once
// it has lasted the grace period, exit 2, saying so.
func TestAutopilotStopsWhenMostBrokersAreSilent(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3})
	cl := newClient(t, c)
	createTopic(t, cl, "orders", 3, 3)
	ap := startAutopilot(t, c, "autopilot:test", quickPolicy...)
	require.NoError(t, ap.WaitLog("acting: the lease is this autopilot's", 30*time.Second))
	for _, id := range []int32{2, 3} {
		require.NoError(t, c.Node(id).Pause())
		t.Cleanup(func() { c.Node(id).Resume() })
	}
	code, err := ap.Wait(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.True(t, strings.HasPrefix(ap.Stderr(), "MostBrokersSilent: 2 of 3 brokers are silent at once (2, 3), for "), "stderr: %s", ap.Stderr())
	assert.Contains(t, ap.Stderr(), "nothing was failed over")
	assert.Contains(t, ap.Log(), "acting on nothing: 2 of 3 brokers are silent at once")
	assert.NotContains(t, ap.Log(), "run: command")
	for _, id := range []int32{2, 3} {
		require.NoError(t, c.Node(id).Resume())
	}
	for k := range autopilotEvents(t, c) {
		assert.False(t, strings.HasPrefix(k, "autopilot:test "), "the autopilot acted: %s", k)
	}
}

// A command that fails twice stops the autopilot: broker 3 holds the
// only replica of a partition, so its failover finds nobody to promote
// (NoEligibleReplica), once, and again at the next poll.
func TestAutopilotStopsWhenACommandFailsTwice(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3})
	cl := newClient(t, c)
	tm := createTopic(t, cl, "single", 3, 1)
	require.Equal(t, []int32{3}, tm.Partitions[2].Replicas)
	ap := startAutopilot(t, c, "autopilot:test", quickPolicy...)
	require.NoError(t, ap.WaitLog("acting: the lease is this autopilot's", 30*time.Second))
	require.NoError(t, c.Node(3).Kill())
	code, err := ap.Wait(time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, code)
	assert.True(t, strings.HasPrefix(ap.Stderr(), "CommandFailedTwice: gostream-ctl failover --broker 3 failed twice in a row (run because broker 3 silent for "),
		"stderr: %s", ap.Stderr())
	assert.Contains(t, ap.Stderr(), "NoEligibleReplica")
	assert.Equal(t, 1, strings.Count(ap.Log(), "command failed: it runs again at the next poll"))
	assert.Equal(t, 2, strings.Count(ap.Log(), `run: command="gostream-ctl failover --broker 3"`))
}
