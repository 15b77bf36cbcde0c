package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"gostream/client"
	"gostream/groups"
	"gostream/record"
	"gostream/transport"
)

// The chaos workload's consumer groups, of three members each, the first
// static: the native group, gostream-ctl consume --group processes in
// slots 1 to 3, each printing what it is given and committing what it
// printed; and, in the scenarios that run it, a Kafka group beside it
// (a group has one kind of membership at a time), kafkamember processes
// (franz-go, cooperative-sticky) in slots 4 to 6, each printing what it
// owns in every generation, what it reads and what it committed.
const (
	groupMembers      = 3
	groupSession      = 3 * time.Second
	groupStaticMember = 1 // the slot whose member has an instance id
	kafkaFirstSlot    = groupMembers + 1
	kafkaStaticMember = kafkaFirstSlot
	// kafkaRebalance is the Kafka members' rebalance timeout: how long a
	// join phase waits for a member that does not rejoin.
	kafkaRebalance = 10 * time.Second
)

// OpGroupRead is a record a group member printed: Worker is the member's
// slot, Offset the record's, Value its value.
const OpGroupRead = "group-read"

// groupMember is one slot of the group: the process running there now.
type groupMember struct {
	slot    int
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited and its output is read
	paused  bool
	started int           // incarnations started
	stderr  *lockedBuffer // what the running incarnation has written to stderr
}

// lockedBuffer is a bytes.Buffer for a process's output read while it runs
// (written by the goroutine exec copies it with).
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

// lastLines is the last n lines of s, each cut to 300 bytes.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			lines[i] = l[:300] + "..."
		}
	}
	return lines
}

// GroupWorkload runs the members of one group and samples what the
// coordinator says: committed offsets (which must never go back) and
// owners (one member a partition).
type GroupWorkload struct {
	c     *Cluster
	topic string
	group string // chosen so that the controller's node does not coordinate it
	hist  *History
	logf  func(string, ...any)
	// kafka: the members are kafkamember processes (bin) in slots
	// kafkaFirstSlot on; otherwise gostream-ctl in slots 1 on.
	kafka bool
	first int
	bin   string

	mu      sync.Mutex
	members map[int]*groupMember
	// committed is the highest committed offset seen of each partition;
	// regressions, the samples that went below it.
	committed   map[int32]int64
	regressions []string
	doubleOwner []string
	samples     int
	// last is the sampler's last description and when it came; lastErr,
	// its last failure to get one, and when (shown when the group falls
	// behind).
	last      client.GroupDescription
	lastAt    time.Time
	lastErr   error
	lastErrAt time.Time
	// logs are the Kafka members' lines, one log per process; stats,
	// what Finish found in them.
	logs     []*KafkaMemberLog
	stats    KafkaGroupStats
	stop     context.CancelFunc
	sampling sync.WaitGroup
}

// NewGroupWorkload returns the group workload of topic.
func NewGroupWorkload(c *Cluster, topic string, hist *History, logf func(string, ...any)) *GroupWorkload {
	return &GroupWorkload{c: c, topic: topic, hist: hist, logf: logf, first: 1, members: map[int]*groupMember{}, committed: map[int32]int64{}}
}

// NewKafkaGroupWorkload returns the Kafka group workload of topic: its
// members speak Kafka's classic group protocol to the nodes' Kafka
// listeners, and record what they print in hist.
func NewKafkaGroupWorkload(c *Cluster, topic string, hist *History, logf func(string, ...any)) *GroupWorkload {
	g := NewGroupWorkload(c, topic, hist, logf)
	g.kafka, g.first = true, kafkaFirstSlot
	return g
}

// slots are the group's member slots.
func (g *GroupWorkload) slots() []int {
	var out []int
	for s := g.first; s < g.first+groupMembers; s++ {
		out = append(out, s)
	}
	return out
}

// name is how the harness's lines name the group.
func (g *GroupWorkload) name() string {
	if g.kafka {
		return "Kafka group " + g.group
	}
	return "group " + g.group
}

// Start picks the group, starts every member and the sampler.
func (g *GroupWorkload) Start() error {
	if g.kafka {
		bin, err := BuildKafkaMember()
		if err != nil {
			return err
		}
		g.bin = bin
	}
	if err := g.pickGroup(); err != nil {
		return err
	}
	for _, slot := range g.slots() {
		if err := g.startMember(slot); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	g.sampling.Add(1)
	go g.sample(ctx)
	return nil
}

// pickGroup names the group: the first of chaos-group-0, -1, ... whose
// coordinator is not the controller's node, so that the coordinator's
// node can be killed and failed over (a dead controller fails nothing
// over).
func (g *GroupWorkload) pickGroup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := "chaos-group"
	if g.kafka {
		prefix = "chaos-kafka-group"
	}
	name, leader, err := GroupNotCoordinatedBy(ctx, g.c, prefix, g.c.Nodes[0].ID)
	if err != nil {
		return err
	}
	g.group = name
	g.logf("consumer %s, coordinated by broker %d", g.name(), leader)
	return nil
}

// GroupNotCoordinatedBy returns the first of the group names prefix-0,
// prefix-1, ... whose coordinator is not broker avoid, and its
// coordinator. The first FindCoordinator creates __consumer_offsets.
func GroupNotCoordinatedBy(ctx context.Context, c *Cluster, prefix string, avoid int32) (string, int32, error) {
	conn, err := transport.Dial(ctx, c.Nodes[0].RPC, c.Secure.connConfig())
	if err != nil {
		return "", 0, err
	}
	defer conn.Close()
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		var fc transport.FindCoordinatorResponse
		if err := conn.Call(ctx, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: name}, &fc); err != nil {
			return "", 0, fmt.Errorf("find the coordinator of %s: %w", name, err)
		}
		if fc.Leader > 0 && fc.Leader != avoid {
			return name, fc.Leader, nil
		}
	}
	return "", 0, fmt.Errorf("no group name of 100 is coordinated off broker %d", avoid)
}

// startMember starts the process of a slot (again, after a kill).
func (g *GroupWorkload) startMember(slot int) error {
	var cmd *exec.Cmd
	if g.kafka {
		cmd = g.kafkaCommand(slot)
	} else {
		args := []string{"-o", "json", "--timeout", "5s", "consume", g.topic, "--group", g.group, "--follow",
			"--session-timeout", groupSession.String()}
		if slot == groupStaticMember {
			args = append(args, "--instance-id", "chaos-static")
		}
		cmd = g.c.CtlCommand(context.Background(), args...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// Written by the goroutine exec copies it with, read meanwhile by
	// Finish when the group falls behind.
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	// Before the process can do anything: a commit logged by a process
	// that had ended by then came before whatever this one reads.
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	g.mu.Lock()
	m := g.members[slot]
	if m == nil {
		m = &groupMember{slot: slot}
		g.members[slot] = m
	}
	m.cmd, m.done, m.paused, m.stderr = cmd, make(chan struct{}), false, stderr
	m.started++
	inc := m.started
	done := m.done
	var log *KafkaMemberLog
	if g.kafka {
		log = &KafkaMemberLog{Slot: slot, Incarnation: inc, Started: started}
		if slot == kafkaStaticMember {
			log.Instance = kafkaStaticInstance
		}
		g.logs = append(g.logs, log)
	}
	g.mu.Unlock()
	go func() {
		defer close(done)
		if log != nil {
			g.readKafka(log, out)
		} else {
			g.read(slot, out)
		}
		err := cmd.Wait()
		if log != nil {
			g.mu.Lock()
			log.Ended = time.Now()
			g.mu.Unlock()
		}
		what := strings.TrimSpace(stderr.String())
		if len(what) > 4000 {
			what = "..." + what[len(what)-4000:]
		}
		g.logf("%s member %d (incarnation %d) exited: %v; stderr: %s", g.name(), slot, inc, err, what)
	}()
	return nil
}

// kafkaStaticInstance is the instance id of the Kafka group's static
// member.
const kafkaStaticInstance = "chaos-kafka-static"

// kafkaCommand is the kafkamember process of a slot: every node's Kafka
// listener, the session of the native members, TLS and SASL/PLAIN as
// admin with a secure cluster.
func (g *GroupWorkload) kafkaCommand(slot int) *exec.Cmd {
	var brokers []string
	for _, n := range g.c.Nodes {
		brokers = append(brokers, n.Kafka)
	}
	args := []string{"--brokers", strings.Join(brokers, ","), "--group", g.group, "--topic", g.topic,
		"--session-timeout", groupSession.String(), "--heartbeat-interval", (groupSession / 6).String(),
		"--rebalance-timeout", kafkaRebalance.String()}
	if slot == kafkaStaticMember {
		args = append(args, "--instance-id", kafkaStaticInstance)
	}
	if s := g.c.Secure; s != nil {
		args = append(args, "--tls-ca", s.CAFile, "--sasl-user", "admin", "--sasl-password-file", s.TokenFile)
	}
	cmd := exec.Command(g.bin, args...)
	cmd.Env = cleanEnv()
	return cmd
}

// read turns a member's output into history.
func (g *GroupWorkload) read(slot int, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Value     string `json:"value"`
		}
		now := time.Now()
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			g.logf("group member %d printed what is not a record: %q", slot, sc.Text())
			continue
		}
		g.hist.Add(Op{Kind: OpGroupRead, Worker: slot, Topic: g.topic, Partition: r.Partition, Offset: r.Offset, Value: r.Value,
			Start: now, End: now, Result: ResultOK})
	}
}

// readKafka keeps a Kafka member's lines in its log, and puts the records
// it printed into the history.
func (g *GroupWorkload) readKafka(log *KafkaMemberLog, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e KafkaMemberEvent
		now := time.Now()
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Event == "" {
			g.logf("%s member %d printed what is not an event: %q", g.name(), log.Slot, sc.Text())
			continue
		}
		switch e.Event {
		case "record":
			g.hist.Add(Op{Kind: OpGroupRead, Worker: log.Slot, Topic: g.topic, Partition: e.Partition, Offset: e.Offset, Value: e.Value,
				Start: now, End: now, Result: ResultOK})
		case "assigned", "revoked", "lost":
			g.logf("%s member %d (incarnation %d): %s %v in generation %d, owns %v (member id %s)", g.name(), log.Slot, log.Incarnation,
				e.Event, append(e.Added, e.Partitions...), e.Generation, e.Owned, e.Member)
		}
		g.mu.Lock()
		log.Events = append(log.Events, e)
		g.mu.Unlock()
	}
}

// member returns a slot's member.
func (g *GroupWorkload) member(slot int) *groupMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members[slot]
}

// Kill kills a slot's process with SIGKILL and waits for it.
func (g *GroupWorkload) Kill(slot int) {
	m := g.member(slot)
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.cmd.Process.Kill()
	<-m.done
}

// Pause stops a slot's process (SIGSTOP); Resume lets it go on.
func (g *GroupWorkload) Pause(slot int) {
	m := g.member(slot)
	if m.cmd.Process.Signal(syscall.SIGSTOP) == nil {
		g.mu.Lock()
		m.paused = true
		g.mu.Unlock()
	}
}

func (g *GroupWorkload) Resume(slot int) {
	m := g.member(slot)
	m.cmd.Process.Signal(syscall.SIGCONT)
	g.mu.Lock()
	m.paused = false
	g.mu.Unlock()
}

// Restart kills a slot's process and starts another in its place.
func (g *GroupWorkload) Restart(slot int) error {
	g.Kill(slot)
	return g.startMember(slot)
}

// Heal resumes every paused member and restarts every one that exited.
func (g *GroupWorkload) Heal() error {
	var errs []error
	for _, slot := range g.slots() {
		m := g.member(slot)
		if m.paused {
			g.Resume(slot)
		}
		select {
		case <-m.done:
			errs = append(errs, g.startMember(slot))
		default:
		}
	}
	return errors.Join(errs...)
}

// sample asks the group's coordinator, every 250 ms, for the committed
// offsets and the owners, until ctx ends.
func (g *GroupWorkload) sample(ctx context.Context) {
	defer g.sampling.Done()
	var cl *client.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cl == nil {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			cl, _ = client.New(cctx, g.c.Secured(client.Config{Bootstrap: strings.Split(g.c.Bootstrap(), ","), RequestTimeout: 2 * time.Second, DialTimeout: time.Second}))
			cancel()
			if cl == nil {
				continue
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := cl.DescribeGroup(dctx, g.group)
		cancel()
		if err != nil {
			g.mu.Lock()
			g.lastErr, g.lastErrAt = err, time.Now()
			g.mu.Unlock()
			continue
		}
		g.check(d)
	}
}

// check takes one description: no committed offset below one seen
// before, no partition owned by two members.
func (g *GroupWorkload) check(d client.GroupDescription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.samples++
	g.last, g.lastAt = d, time.Now()
	for _, p := range d.Partitions {
		if p.Topic != g.topic || p.Committed == client.Never {
			continue
		}
		if prev, ok := g.committed[p.Partition]; ok && p.Committed < prev {
			g.regressions = append(g.regressions, fmt.Sprintf("invariant 9: %s's committed offset of %s/%d went from %d to %d (generation %d)",
				g.name(), g.topic, p.Partition, prev, p.Committed, d.GroupEpoch))
		}
		g.committed[p.Partition] = max(g.committed[p.Partition], p.Committed)
	}
	owner := map[client.TopicPartition]string{}
	for _, m := range d.Members {
		for _, tp := range m.Owned {
			if o, ok := owner[tp]; ok {
				g.doubleOwner = append(g.doubleOwner, fmt.Sprintf("%s: partition %s owned by members %s and %s in generation %d", g.name(), tp, o, m.MemberID, d.GroupEpoch))
			}
			owner[tp] = m.MemberID
		}
	}
}

// whyBehind says what the harness knows of a group that fell behind: the
// coordinator's last description and the last lines each member wrote to
// stderr, so that a failure seen only in a test's output can be told.
func (g *GroupWorkload) whyBehind() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	if g.lastAt.IsZero() {
		b.WriteString("the coordinator was never described")
	} else {
		d := g.last
		fmt.Fprintf(&b, "last described %s ago (%d samples): state %s, generation %d, coordinator %d, members",
			time.Since(g.lastAt).Round(time.Millisecond), g.samples, d.State, d.GroupEpoch, d.Coordinator)
		for _, m := range d.Members {
			fmt.Fprintf(&b, " %s%v", m.MemberID, m.Owned)
		}
		b.WriteString(", committed")
		for _, p := range d.Partitions {
			fmt.Fprintf(&b, " %s/%d@%d", p.Topic, p.Partition, p.Committed)
		}
	}
	if g.lastErr != nil {
		fmt.Fprintf(&b, "; last describe failed %s ago: %v", time.Since(g.lastErrAt).Round(time.Millisecond), g.lastErr)
	}
	for _, slot := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[slot]
		state := "running"
		select {
		case <-m.done:
			state = "exited"
		default:
		}
		fmt.Fprintf(&b, "; member %d (incarnation %d, %s), last stderr: %q", slot, m.started, state, lastLines(m.stderr.String(), 4))
	}
	return b.String()
}

// dumpMembers has every running member print its goroutines (SIGQUIT) and
// saves each one's whole stderr in the run's directory, kept with the
// run's logs.
func (g *GroupWorkload) dumpMembers() {
	for _, slot := range g.slots() {
		m := g.member(slot)
		select {
		case <-m.done:
		default:
			m.cmd.Process.Signal(syscall.SIGCONT)
			m.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-m.done:
			case <-time.After(10 * time.Second):
			}
		}
		name := fmt.Sprintf("group-member-%d-%d.stderr", slot, m.started)
		if err := os.WriteFile(filepath.Join(g.c.Dir(), name), []byte(m.stderr.String()), 0o644); err != nil {
			g.logf("save %s: %v", name, err)
		}
	}
}

// Finish waits until the group's committed offsets reach hws (the high
// watermarks once the producers stopped), then stops the members (they
// commit and leave) and the sampler. It returns the violations found:
// committed offsets that went back, never reached the high watermark or
// passed it, partitions with two owners, and acknowledged records no
// member printed; for a Kafka group also what its members' logs show
// (CheckKafkaMemberLogs).
func (g *GroupWorkload) Finish(hws map[int32]int64, acked []Op, timeout time.Duration) []string {
	var out []string
	deadline := time.Now().Add(timeout)
	var behind []string
	for {
		behind = behind[:0]
		g.mu.Lock()
		for p, hw := range hws {
			if g.committed[p] < hw {
				behind = append(behind, fmt.Sprintf("%d at %d of %d", p, g.committed[p], hw))
			}
		}
		g.mu.Unlock()
		if len(behind) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(behind) > 0 {
		slices.Sort(behind)
		out = append(out, fmt.Sprintf("%s: committed offsets did not reach the high watermark within %s of the faults healing: partitions %s; %s",
			g.name(), timeout, strings.Join(behind, ", "), g.whyBehind()))
		g.dumpMembers()
	}
	g.stop()
	g.sampling.Wait()
	for _, slot := range g.slots() {
		m := g.member(slot)
		m.cmd.Process.Signal(syscall.SIGCONT)
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(15 * time.Second):
			g.Kill(slot)
		}
	}
	g.mu.Lock()
	out = append(out, g.regressions...)
	out = append(out, g.doubleOwner...)
	out = append(out, committedPastHighWatermarks(g.name(), g.topic, g.committed, hws)...)
	g.logf("%s: %d samples of the coordinator", g.name(), g.samples)
	logs := make([]KafkaMemberLog, len(g.logs))
	for i, l := range g.logs {
		logs[i] = *l
	}
	g.mu.Unlock()
	if g.kafka {
		v, st := CheckKafkaMemberLogs(logs)
		g.stats = st
		out = append(out, v...)
	}

	printed := map[[2]int64]string{}
	for _, op := range g.hist.Ops() {
		if op.Kind == OpGroupRead {
			printed[[2]int64{int64(op.Partition), op.Offset}] = op.Value
		}
	}
	missing := 0
	for _, op := range acked {
		v, ok := printed[[2]int64{int64(op.Partition), op.Offset}]
		switch {
		case !ok:
			if missing++; missing <= 10 {
				out = append(out, fmt.Sprintf("acknowledged %s/%d offset %d (%q) was printed by no member of %s", op.Topic, op.Partition, op.Offset, op.Value, g.name()))
			}
		case v != op.Value:
			out = append(out, fmt.Sprintf("a member of %s printed %q at %s/%d offset %d, acknowledged as %q", g.name(), v, op.Topic, op.Partition, op.Offset, op.Value))
		}
	}
	if missing > 10 {
		out = append(out, fmt.Sprintf("... %d acknowledged records in all were printed by no member of %s", missing, g.name()))
	}
	return out
}

// committedPastHighWatermarks reports the partitions whose highest
// committed offset seen is above its high watermark. The high watermarks
// are taken once nothing more can be written, so such a commit is past
// every record there is.
func committedPastHighWatermarks(name, topic string, committed, hws map[int32]int64) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(hws)) {
		if c, ok := committed[p]; ok && c > hws[p] {
			out = append(out, fmt.Sprintf("%s: committed offset %d of %s/%d is past its high watermark %d", name, c, topic, p, hws[p]))
		}
	}
	return out
}

// CheckOffsetsLogs reads the group's partition of __consumer_offsets on
// every node that holds it and checks invariant 9 there: in log order,
// no commit of the group below an earlier one of the same partition (the
// chaos workload makes no reset).
func CheckOffsetsLogs(c *Cluster, group string) []string {
	var out []string
	for _, n := range c.Nodes {
		parts, err := n.Partitions(transport.OffsetsTopic)
		if err != nil {
			out = append(out, fmt.Sprintf("node %d: %v", n.ID, err))
		}
		for _, p := range parts {
			b, err := segmentBytes(n, transport.OffsetsTopic, p)
			if err != nil {
				out = append(out, fmt.Sprintf("node %d: read %s/%d: %v", n.ID, transport.OffsetsTopic, p, err))
				continue
			}
			last := map[groups.TopicPartition]int64{}
			err = record.Batches(b, func(batch record.Batch) bool {
				_ = batch.Records(func(rec *record.Record) bool {
					gr, err := groups.Decode(rec.Key, rec.Value)
					if err != nil || gr.Group != group {
						return true
					}
					var commits []groups.Commit
					switch gr.Kind {
					case groups.KindCommit:
						commits = []groups.Commit{*gr.Commit}
					case groups.KindSnapshotGroup:
						commits = gr.Snapshot.Offsets
					}
					for _, cm := range commits {
						tp := groups.TopicPartition{Topic: cm.Topic, Partition: cm.Partition}
						if prev, ok := last[tp]; ok && cm.Offset < prev {
							out = append(out, fmt.Sprintf("invariant 9: node %d's %s/%d holds a commit of %s/%d at %d after one at %d (offset %d of the log)",
								n.ID, transport.OffsetsTopic, p, cm.Topic, cm.Partition, cm.Offset, prev, rec.Offset))
						}
						last[tp] = max(last[tp], cm.Offset)
					}
					return true
				})
				return true
			})
			if err != nil {
				out = append(out, fmt.Sprintf("node %d: %s/%d: %v", n.ID, transport.OffsetsTopic, p, err))
			}
		}
	}
	return out
}
