package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// ownership watches the owners of partitions as the members' callbacks
// report them, and records any partition given to a member while another
// still owns it.
type ownership struct {
	mu         sync.Mutex
	owner      map[client.TopicPartition]string
	violations []string
	revoked    map[string]int // member name -> partitions revoked or lost
	moves      []string       // "member tp" for each revocation, in order
	delivered  map[client.TopicPartition]map[int64]bool
}

func newOwnership() *ownership {
	return &ownership{owner: map[client.TopicPartition]string{}, revoked: map[string]int{},
		delivered: map[client.TopicPartition]map[int64]bool{}}
}

func (o *ownership) assigned(name string, tps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, tp := range tps {
		if cur, ok := o.owner[tp]; ok && cur != name {
			o.violations = append(o.violations, fmt.Sprintf("%s given to %s while %s owns it", tp, name, cur))
		}
		o.owner[tp] = name
	}
}

func (o *ownership) released(name string, tps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, tp := range tps {
		if o.owner[tp] == name {
			delete(o.owner, tp)
		}
		o.revoked[name]++
		o.moves = append(o.moves, name+" "+tp.String())
	}
}

func (o *ownership) revocations(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.revoked[name]
}

func (o *ownership) deliveredCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, offs := range o.delivered {
		n += len(offs)
	}
	return n
}

// member is an in-process group consumer that polls, records what it is
// given, and commits after each poll.
type member struct {
	name string
	gc   *client.GroupConsumer
	stop context.CancelFunc
	done chan struct{}
}

func startMember(t *testing.T, cl *client.Client, o *ownership, name, group, instance, topic string) *member {
	t.Helper()
	m := &member{name: name, done: make(chan struct{})}
	var err error
	m.gc, err = client.NewGroupConsumer(cl, client.GroupConfig{
		Group: group, Topics: []string{topic}, InstanceID: instance, SessionTimeout: 3 * time.Second, Host: name,
		OnAssigned: func(_ context.Context, tps []client.TopicPartition) { o.assigned(name, tps) },
		OnRevoked: func(ctx context.Context, tps []client.TopicPartition) {
			if err := m.gc.CommitSync(ctx); err != nil {
				t.Logf("%s: commit before revoke: %v", name, err)
			}
			o.released(name, tps)
		},
		OnLost: func(tps []client.TopicPartition) { o.released(name, tps) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			got, err := m.gc.Poll(ctx, 500*time.Millisecond)
			if err != nil {
				if ctx.Err() == nil {
					t.Logf("%s: poll: %v", name, err)
				}
				continue
			}
			o.mu.Lock()
			for _, pr := range got {
				tp := client.TopicPartition{Topic: pr.Topic, Partition: pr.Partition}
				if o.owner[tp] != name {
					o.violations = append(o.violations, fmt.Sprintf("%s got records of %s, owned by %q", name, tp, o.owner[tp]))
				}
				if o.delivered[tp] == nil {
					o.delivered[tp] = map[int64]bool{}
				}
				for _, r := range pr.Records {
					o.delivered[tp][r.Offset] = true
				}
			}
			o.mu.Unlock()
			if len(got) > 0 {
				if err := m.gc.CommitSync(ctx); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", name, err)
				}
			}
		}
	}()
	return m
}

// close stops polling and closes the member (it leaves, or, static, keeps
// its place).
func (m *member) close(t *testing.T) {
	m.stop()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.gc.Close(ctx))
}

func ownsOf(d client.GroupDescription) map[string][]client.TopicPartition {
	out := map[string][]client.TopicPartition{}
	for _, m := range d.Members {
		out[m.Host] = m.Owned
	}
	return out
}

// describeGroup describes a group; a group not there yet (its members
// have not joined) or a coordinator that does not answer gives an empty
// description, for the conditions polled on it.
func describeGroup(t *testing.T, cl *client.Client, group string) client.GroupDescription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := cl.DescribeGroup(ctx, group)
	if err != nil {
		t.Logf("describe group %s: %v", group, err)
	}
	return d
}

// stableWith waits until the group has exactly the hosts named, each
// owning what its target gives it, the targets covering every partition
// of the topic.
func stableWith(t *testing.T, cl *client.Client, group string, partitions int, hosts ...string) client.GroupDescription {
	t.Helper()
	var d client.GroupDescription
	require.Eventually(t, func() bool {
		d = describeGroup(t, cl, group)
		if len(d.Members) != len(hosts) {
			return false
		}
		n := 0
		for _, m := range d.Members {
			if !slices.Contains(hosts, m.Host) || !slices.Equal(m.Owned, m.Target) {
				return false
			}
			n += len(m.Owned)
		}
		return n == partitions && d.State == "stable"
	}, 30*time.Second, 50*time.Millisecond, "group %s never settled with %v: %+v", group, hosts, d)
	return d
}

// Three members over six partitions: two each, by range; every record is
// delivered; committed offsets reach the high watermark. A static member
// that closes and comes back within its session gets the same place and
// partitions with no rebalance; a dynamic member that leaves gives its
// partitions to the others, who keep their own; no partition ever has two
// owners; a member that left cannot commit.
func TestGroupMembersShareMoveAndComeBack(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "ev", 6, 3)
	for p := range int32(6) {
		produceTo(t, cl, "ev", p, "r", 5)
	}
	o := newOwnership()
	a := startMember(t, cl, o, "a", "g", "", "ev")
	b := startMember(t, cl, o, "b", "g", "", "ev")
	s := startMember(t, cl, o, "s", "g", "s-1", "ev")
	d := stableWith(t, cl, "g", 6, "a", "b", "s")
	for _, m := range d.Members {
		require.Len(t, m.Owned, 2, "range gives %s two of six", m.Host)
		assert.Equal(t, m.Owned[0].Partition+1, m.Owned[1].Partition, "range gives contiguous partitions: %v", m.Owned)
	}
	require.Eventually(t, func() bool { return o.deliveredCount() == 30 }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		parts := describeGroup(t, cl, "g").Partitions
		for _, p := range parts {
			if p.Committed != 5 {
				return false
			}
		}
		return len(parts) == 6
	}, 10*time.Second, 50*time.Millisecond, "committed offsets reach the high watermark")

	// The static member closes and comes back: same member, same
	// partitions, same generation; nobody else was revoked.
	before := ownsOf(d)
	revA, revB := o.revocations("a"), o.revocations("b") // while the three joined
	sID, gen := "", d.GroupEpoch
	for _, m := range d.Members {
		if m.Host == "s" {
			sID = m.MemberID
		}
	}
	s.close(t)
	s = startMember(t, cl, o, "s", "g", "s-1", "ev")
	d = stableWith(t, cl, "g", 6, "a", "b", "s")
	assert.Equal(t, before, ownsOf(d), "no partition moved")
	assert.Equal(t, gen, d.GroupEpoch, "no rebalance")
	for _, m := range d.Members {
		if m.Host == "s" {
			assert.Equal(t, sID, m.MemberID, "the static member's place")
		}
	}
	assert.Equal(t, revA+revB, o.revocations("a")+o.revocations("b"), "nobody else was revoked")

	// A second live member with the same instance id is fenced.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dup, err := client.NewGroupConsumer(cl, client.GroupConfig{Group: "g", Topics: []string{"ev"}, InstanceID: "s-1", SessionTimeout: 3 * time.Second})
	require.NoError(t, err)
	var dupErr error
	for dupErr == nil && ctx.Err() == nil {
		_, dupErr = dup.Poll(ctx, 500*time.Millisecond)
	}
	require.ErrorIs(t, dupErr, transport.ErrFencedInstanceID)
	require.NoError(t, dup.Close(ctx))

	// The dynamic member b leaves: its partitions go to a and s, who keep
	// their own.
	bOwned := before["b"]
	o.mu.Lock()
	movesBefore := len(o.moves)
	o.mu.Unlock()
	b.close(t)
	d = stableWith(t, cl, "g", 6, "a", "s")
	// Range over two members moves more than b's two partitions (a
	// boundary shifts), but a partition a member keeps in the new
	// assignment is never taken from it on the way.
	after := ownsOf(d)
	o.mu.Lock()
	since := slices.Clone(o.moves[movesBefore:])
	o.mu.Unlock()
	kept := 0
	for _, name := range []string{"a", "s"} {
		for _, tp := range before[name] {
			if slices.Contains(after[name], tp) {
				kept++
				assert.NotContains(t, since, name+" "+tp.String(), "%s keeps %s and was never revoked it", name, tp)
			}
		}
	}
	assert.GreaterOrEqual(t, kept, 3, "most partitions stay where they were: before %v, after %v", before, after)
	err = b.gc.CommitOffsets(ctx, client.CommitOffset{Topic: "ev", Partition: bOwned[0].Partition, Offset: 5})
	require.ErrorIs(t, err, transport.ErrUnknownMember, "a member that left cannot commit")

	// New records in b's old partitions reach the members that took them.
	for _, tp := range bOwned {
		produceTo(t, cl, "ev", tp.Partition, "late", 3)
	}
	require.Eventually(t, func() bool { return o.deliveredCount() == 36 }, 30*time.Second, 50*time.Millisecond)
	a.close(t)
	s.close(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	assert.Empty(t, o.violations)
}

// lineReader collects a process's output lines as they come.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	times []time.Time
}

func (l *lineReader) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.times = append(l.times, time.Now())
		l.mu.Unlock()
	}
}

type printedRecord struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

func (l *lineReader) records(t *testing.T) ([]printedRecord, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]printedRecord, len(l.lines))
	for i, line := range l.lines {
		require.NoError(t, json.Unmarshal([]byte(line), &out[i]), line)
	}
	return out, slices.Clone(l.times)
}

// Three gostream-ctl consume --group members over six partitions, records
// arriving all along. One is killed with SIGKILL: within its session
// timeout and a second its partitions are read by the others, which never
// lose their own; every record produced is printed by some member; the
// group's committed offsets reach the high watermark.
func TestGroupMemberKilled(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "ev", 6, 3)
	const session = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outs := map[string]*lineReader{}
	procs := map[string]*procHandle{}
	for _, name := range []string{"m1", "m2", "m3"} {
		cmd := c.CtlCommand(ctx, "-o", "json", "consume", "ev", "--group", "g", "--follow", "--session-timeout", session.String())
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		outs[name] = &lineReader{}
		go outs[name].read(stdout)
		procs[name] = &procHandle{pid: cmd.Process.Pid, wait: cmd.Wait}
	}
	t.Cleanup(func() {
		for _, p := range procs {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
	var d client.GroupDescription
	require.Eventually(t, func() bool {
		d = describeGroup(t, cl, "g")
		n := 0
		for _, m := range d.Members {
			if len(m.Owned) != 2 {
				return false
			}
			n += 2
		}
		return len(d.Members) == 3 && n == 6
	}, 30*time.Second, 50*time.Millisecond, "three members, two partitions each: %+v", d)

	// Records arrive in every partition while a member is killed.
	acked := map[[2]int64]string{} // partition, offset -> value
	ackTimes := map[int32][]time.Time{}
	var pmu sync.Mutex
	prodCtx, stopProducing := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		p, err := client.NewProducer(cl, client.ProducerConfig{})
		if err != nil {
			return
		}
		defer p.Close()
		for i := 0; prodCtx.Err() == nil; i++ {
			part := int32(i % 6)
			sctx, cancel := context.WithTimeout(prodCtx, 5*time.Second)
			ack, err := p.Send(sctx, client.ProducerRecord{Topic: "ev", Partition: part, ManualPartition: true, Value: []byte(fmt.Sprint(i))})
			cancel()
			if err == nil {
				pmu.Lock()
				acked[[2]int64{int64(part), ack.Offset}] = fmt.Sprint(i)
				ackTimes[part] = append(ackTimes[part], time.Now())
				pmu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Kill the member that owns partition 0 (m-hosts are not told apart in
	// describe: every process has this host's name, so match by member id
	// through what each has printed).
	victimParts := map[int32]bool{}
	var victim string
	require.Eventually(t, func() bool {
		for name, out := range outs {
			recs, _ := out.records(t)
			for _, r := range recs {
				if r.Partition == 0 {
					victim = name
				}
			}
		}
		return victim != ""
	}, 10*time.Second, 50*time.Millisecond)
	recs, _ := outs[victim].records(t)
	for _, r := range recs {
		victimParts[r.Partition] = true
	}
	require.NoError(t, syscall.Kill(procs[victim].pid, syscall.SIGKILL))
	killed := time.Now()
	procs[victim].wait()
	delete(procs, victim)

	// Its partitions are read by the others within the session timeout
	// and a second.
	var takeover time.Duration
	require.Eventually(t, func() bool {
		for name, out := range outs {
			if name == victim {
				continue
			}
			recs, times := out.records(t)
			for i, r := range recs {
				if victimParts[r.Partition] && times[i].After(killed) {
					takeover = times[i].Sub(killed)
					return true
				}
			}
		}
		return false
	}, session+10*time.Second, 20*time.Millisecond)
	t.Logf("a killed member's partitions read by another %v after the kill (session timeout %v)", takeover, session)
	assert.Less(t, takeover, session+time.Second)

	stopProducing()
	<-prodDone
	// Every record acknowledged is printed by some member, at least once.
	var missing []string
	require.Eventually(t, func() bool {
		seen := map[[2]int64]string{}
		for _, out := range outs {
			recs, _ := out.records(t)
			for _, r := range recs {
				seen[[2]int64{int64(r.Partition), r.Offset}] = r.Value
			}
		}
		pmu.Lock()
		defer pmu.Unlock()
		missing = missing[:0]
		for k, v := range acked {
			if got, ok := seen[k]; !ok || got != v {
				missing = append(missing, fmt.Sprintf("%d/%d %q (printed %q)", k[0], k[1], v, got))
			}
		}
		return len(missing) == 0
	}, 20*time.Second, 100*time.Millisecond, "every acknowledged record printed")
	if len(missing) > 0 {
		t.Logf("not printed: %v", missing)
	}
	require.Eventually(t, func() bool {
		d := describeGroup(t, cl, "g")
		for _, p := range d.Partitions {
			if p.Lag != 0 {
				return false
			}
		}
		return len(d.Members) == 2
	}, 20*time.Second, 100*time.Millisecond, "committed offsets reach the high watermark")

	// The longest gap between two acknowledgments of one partition: the
	// baseline of the members' gaps (a member cannot print records more
	// often than they arrive).
	var ackGap time.Duration
	pmu.Lock()
	for p, ts := range ackTimes {
		if victimParts[p] {
			continue
		}
		for i := 1; i < len(ts); i++ {
			ackGap = max(ackGap, ts[i].Sub(ts[i-1]))
		}
	}
	pmu.Unlock()
	t.Logf("longest gap between acknowledgments of the partitions that stayed: %v", ackGap)
	// The longest gap in what the members that stayed printed of their
	// own partitions, for the record.
	for name, out := range outs {
		if name == victim {
			continue
		}
		recs, times := out.records(t)
		var gap time.Duration
		last := map[int32]time.Time{}
		for i, r := range recs {
			if victimParts[r.Partition] {
				continue
			}
			if l, ok := last[r.Partition]; ok && times[i].Sub(l) > gap {
				gap = times[i].Sub(l)
			}
			last[r.Partition] = times[i]
		}
		t.Logf("%s: longest gap between records of its own partitions: %v (%.2fx the acknowledgments')", name, gap, float64(gap)/float64(ackGap))
		assert.Less(t, gap, ackGap+100*time.Millisecond, "%s paused on its own partitions", name)
	}
}

type procHandle struct {
	pid  int
	wait func() error
}

// A static gostream-ctl member killed with SIGKILL and started again
// within its session timeout gets its place back: the same member id and
// partitions, the same generation, and the other member never loses one
// of its own.
func TestStaticMemberKilledAndBack(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "ev", 4, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(args ...string) *exec.Cmd {
		cmd := c.CtlCommand(ctx, append([]string{"-o", "json", "consume", "ev", "--group", "g", "--follow", "--session-timeout", "10s"}, args...)...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	static := start("--instance-id", "pod-0")
	start()
	var d client.GroupDescription
	require.Eventually(t, func() bool {
		d = describeGroup(t, cl, "g")
		if len(d.Members) != 2 || d.State != "stable" {
			return false
		}
		for _, m := range d.Members {
			if len(m.Owned) != 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "two members, two partitions each: %+v", d)
	before := map[string][]client.TopicPartition{}
	for _, m := range d.Members {
		before[m.MemberID] = m.Owned
	}
	gen := d.GroupEpoch
	require.NoError(t, static.Process.Kill())
	static.Wait()
	killed := time.Now()
	start("--instance-id", "pod-0") // back within its 10 s session
	// The new process joins as the same member, at a new member epoch,
	// and owns the same partitions; nothing moved.
	require.Eventually(t, func() bool {
		d = describeGroup(t, cl, "g")
		for _, m := range d.Members {
			if m.InstanceID == "pod-0" && m.SinceHeartbeat >= 0 && m.SinceHeartbeat < 300*time.Millisecond && time.Since(killed) > m.SinceHeartbeat {
				return m.MemberEpoch > 0 && len(m.Owned) == 2
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("the static member heartbeats again %v after the kill", time.Since(killed).Round(time.Millisecond))
	assert.Len(t, d.Members, 2)
	after := map[string][]client.TopicPartition{}
	for _, m := range d.Members {
		after[m.MemberID] = m.Owned
	}
	assert.Equal(t, before, after, "same members, same partitions")
	assert.Equal(t, gen, d.GroupEpoch, "same generation: no rebalance")
	assert.Less(t, time.Since(killed), 10*time.Second, "within the session timeout")
}

// Auto-commit is off by default: a member that polls and never commits
// leaves nothing committed; with AutoCommitInterval its positions are
// committed from Poll, and at Close.
func TestGroupAutoCommit(t *testing.T) {
	c := startCluster(t, 1)
	cl := newClient(t, c)
	createTopic(t, cl, "ev", 2, 1)
	for p := range int32(2) {
		produceTo(t, cl, "ev", p, "r", 4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	consume := func(group string, every time.Duration) *client.GroupConsumer {
		gc, err := client.NewGroupConsumer(cl, client.GroupConfig{Group: group, Topics: []string{"ev"}, AutoCommitInterval: every})
		require.NoError(t, err)
		n := 0
		for n < 8 {
			got, err := gc.Poll(ctx, 200*time.Millisecond)
			require.NoError(t, err)
			for _, pr := range got {
				n += len(pr.Records)
			}
		}
		return gc
	}
	off := consume("manual", 0)
	on := consume("auto", 100*time.Millisecond)
	// Both keep polling; once the auto-committing one has committed, the
	// other, which polled as long, has committed nothing.
	require.Eventually(t, func() bool {
		_, err1 := off.Poll(ctx, 50*time.Millisecond)
		_, err2 := on.Poll(ctx, 50*time.Millisecond)
		got, err := cl.CommittedOffsets(ctx, "auto", "ev")
		return err1 == nil && err2 == nil && err == nil && len(got) == 2 && got[0].Offset == 4 && got[1].Offset == 4
	}, 10*time.Second, 20*time.Millisecond, "auto-commit commits what Poll returned")
	got, err := cl.CommittedOffsets(ctx, "manual", "ev")
	require.NoError(t, err)
	assert.Empty(t, got, "nothing committed unless asked")
	require.NoError(t, off.Close(ctx))
	got, err = cl.CommittedOffsets(ctx, "manual", "ev")
	require.NoError(t, err)
	assert.Empty(t, got, "nor at Close")
	require.NoError(t, on.Close(ctx))
}
