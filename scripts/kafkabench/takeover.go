package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/groups"
)

// takeoverResult is what takeover prints with -json.
type takeoverResult struct {
	Mode        string  `json:"mode"`
	Member      string  `json:"member"` // kcat, franz-go or native
	Topic       string  `json:"topic"`
	Group       string  `json:"group"`
	Members     int     `json:"members"`
	SessionMs   int64   `json:"session_ms"`
	HeartbeatMs int64   `json:"heartbeat_ms"`
	SteadyS     float64 `json:"steady_s"` // from the members' start to the steady state before the kill
	// TakeoverS is from the kill -9 to the first record of one of the
	// killed member's partitions read by another member; AllS to the
	// first record of each of them.
	TakeoverS float64 `json:"takeover_s"`
	AllS      float64 `json:"all_s"`
	Victim    []int32 `json:"victim_partitions"`
	Settings  string  `json:"settings"`
}

// steadyWindow is how far back a member's reads of a partition count for
// its owning it; steadyFor is how long every partition must have had one
// owner (and every member a partition) before the kill.
// steadyWait bounds the wait for the steady state; the wait for the
// takeover is bounded by three sessions and takeoverSlack.
const (
	steadyWindow  = time.Second
	steadyFor     = 2 * time.Second
	steadyWait    = 90 * time.Second
	takeoverSlack = 30 * time.Second
)

// takeoverMember is one member process of takeover.
type takeoverMember struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // its stderr, for the error of a run that fails
	done   chan struct{}
}

// takeoverWatch is what takeover knows of its members' reads.
type takeoverWatch struct {
	mu     sync.Mutex
	last   []map[int32]time.Time // per member, when it last read a record of each partition
	killed time.Time             // zero before the kill
	victim int
	parts  map[int32]bool          // the killed member's partitions
	taken  map[int32]time.Duration // from the kill to another member's first record of each of them
	change chan struct{}           // signalled when taken grows
}

func (w *takeoverWatch) saw(member int, partition int32, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[member][partition] = at
	if w.killed.IsZero() || member == w.victim || !w.parts[partition] || !at.After(w.killed) {
		return
	}
	if _, ok := w.taken[partition]; !ok {
		w.taken[partition] = at.Sub(w.killed)
		select {
		case w.change <- struct{}{}:
		default:
		}
	}
}

// owners returns, per partition of ids, the members that read it within
// steadyWindow before now, and whether that is one member for each
// partition and at least one partition for each member.
func (w *takeoverWatch) owners(ids []int32, now time.Time) (map[int32][]int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int32][]int{}
	owning := make([]int, len(w.last))
	for m, last := range w.last {
		for p, at := range last {
			if now.Sub(at) <= steadyWindow {
				out[p] = append(out[p], m)
				owning[m]++
			}
		}
	}
	steady := !slices.Contains(owning, 0)
	for _, id := range ids {
		steady = steady && len(out[id]) == 1
	}
	return out, steady
}

// memberCommand is the command of one member process of kind cfg.member.
func memberCommand(cfg config) (*exec.Cmd, error) {
	session, heartbeat := strconv.FormatInt(cfg.session.Milliseconds(), 10), strconv.FormatInt(cfg.heartbeat.Milliseconds(), 10)
	switch cfg.member {
	case "kcat":
		return exec.Command(cfg.kcat, "-b", strings.Join(cfg.brokers, ","), "-G", cfg.group, cfg.topic, "-q", "-u",
			"-f", "%p %o\n", "-X", "session.timeout.ms="+session, "-X", "heartbeat.interval.ms="+heartbeat,
			"-X", "auto.commit.interval.ms=200", "-X", "auto.offset.reset=earliest"), nil
	case "franz-go":
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		return exec.Command(self, "-brokers", strings.Join(cfg.brokers, ","), "-topic", cfg.topic, "-group", cfg.group,
			"-session", cfg.session.String(), "-heartbeat", cfg.heartbeat.String(), "member"), nil
	case "native":
		return exec.Command(cfg.ctl, "--bootstrap", cfg.nativeBootstrap, "consume", cfg.topic, "--group", cfg.group,
			"--follow", "--session-timeout", cfg.session.String(), "-o", "json"), nil
	}
	return nil, fmt.Errorf("-member %q: want kcat, franz-go or native", cfg.member)
}

// parseLine returns the partition of a record line a member printed.
func parseLine(member, line string) (int32, bool) {
	if member == "native" {
		var r struct {
			Partition *int32 `json:"partition"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.Partition == nil {
			return 0, false
		}
		return *r.Partition, true
	}
	f, _, _ := strings.Cut(line, " ")
	p, err := strconv.ParseInt(f, 10, 32)
	return int32(p), err == nil
}

// runTakeover is takeover: a producer writes -rate records a second,
// round robin, to the topic while -members member processes of kind
// -member consume it as group -group, each printing a line per record;
// once every partition has been read by one member only (and every
// member reads some) for steadyFor, the first member is killed with
// SIGKILL, and the time from the kill to another member's first record of
// each of its partitions is measured.
func runTakeover(ctx context.Context, cfg config) (takeoverResult, error) {
	r := takeoverResult{Mode: "takeover", Member: cfg.member, Topic: cfg.topic, Group: cfg.group, Members: cfg.members,
		SessionMs: cfg.session.Milliseconds(), HeartbeatMs: cfg.heartbeat.Milliseconds()}
	switch cfg.member {
	case "native":
		r.HeartbeatMs = groups.HeartbeatInterval(cfg.session).Milliseconds()
		r.Settings = fmt.Sprintf("%d gostream-ctl consume --group --follow processes, session %s (the coordinator's heartbeat interval, %s), commits every 200 ms",
			cfg.members, cfg.session, groups.HeartbeatInterval(cfg.session))
	case "kcat":
		r.Settings = fmt.Sprintf("%d kcat -G processes (librdkafka's balanced consumer, range), session.timeout.ms %d, heartbeat.interval.ms %d, auto.commit.interval.ms 200",
			cfg.members, cfg.session.Milliseconds(), cfg.heartbeat.Milliseconds())
	default:
		r.Settings = fmt.Sprintf("%d kafkabench member processes (franz-go, cooperative-sticky), session %s, heartbeat %s, autocommit every 200 ms",
			cfg.members, cfg.session, cfg.heartbeat)
	}
	r.Settings += fmt.Sprintf("; a franz-go producer writes %d records/s round robin", cfg.rate)

	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.DefaultProduceTopic(cfg.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return r, fmt.Errorf("new client: %w", err)
	}
	defer prod.Close()
	ids, err := partitions(ctx, prod, cfg.topic)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(ctx)
	prodErr := make(chan error, 1)
	var producing sync.WaitGroup
	defer func() {
		cancel()
		producing.Wait()
	}()
	producing.Add(1)
	go func() {
		defer producing.Done()
		tick := time.NewTicker(time.Second / time.Duration(cfg.rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					select {
					case prodErr <- err:
					default:
					}
				}
			})
		}
	}()

	w := &takeoverWatch{last: make([]map[int32]time.Time, cfg.members), parts: map[int32]bool{},
		taken: map[int32]time.Duration{}, change: make(chan struct{}, 1)}
	ms := make([]*takeoverMember, cfg.members)
	defer func() {
		// The members left: SIGTERM (each leaves its group), SIGKILL after 10 s.
		for _, m := range ms {
			if m != nil {
				m.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		for _, m := range ms {
			if m == nil {
				continue
			}
			select {
			case <-m.done:
			case <-time.After(10 * time.Second):
				m.cmd.Process.Kill()
				<-m.done
			}
		}
	}()
	exited := make(chan int, cfg.members)
	started := time.Now()
	for i := range ms {
		w.last[i] = map[int32]time.Time{}
		cmd, err := memberCommand(cfg)
		if err != nil {
			return r, err
		}
		m := &takeoverMember{cmd: cmd, done: make(chan struct{})}
		cmd.Stderr = &m.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			return r, fmt.Errorf("start member %d: %w", i, err)
		}
		ms[i] = m
		go func() {
			defer close(m.done)
			s := bufio.NewScanner(out)
			for s.Scan() {
				if p, ok := parseLine(cfg.member, s.Text()); ok {
					w.saw(i, p, time.Now())
				}
			}
			io.Copy(io.Discard, out)
			cmd.Wait()
			exited <- i
		}()
	}
	memberFailed := func(i int) error {
		return fmt.Errorf("member %d (%s) exited: %s; stderr: %s", i, ms[i].cmd, ms[i].cmd.ProcessState, tail(ms[i].stderr.String()))
	}

	// The steady state.
	var steadySince time.Time
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	steadyBy := time.After(steadyWait)
	for {
		select {
		case <-ctx.Done():
			o, _ := w.owners(ids, time.Now())
			return r, fmt.Errorf("no steady state within -timeout (partitions read by members: %v): %w", o, ctx.Err())
		case <-steadyBy:
			o, _ := w.owners(ids, time.Now())
			return r, fmt.Errorf("no steady state within %s: partitions read by members (0, 1, ...) in the last %s: %v", steadyWait, steadyWindow, o)
		case i := <-exited:
			return r, memberFailed(i)
		case err := <-prodErr:
			return r, fmt.Errorf("produce: %w", err)
		case <-poll.C:
		}
		now := time.Now()
		if _, ok := w.owners(ids, now); !ok {
			steadySince = time.Time{}
			continue
		}
		if steadySince.IsZero() {
			steadySince = now
		}
		if now.Sub(steadySince) >= steadyFor {
			r.SteadyS = now.Sub(started).Seconds()
			break
		}
	}

	// kill -9 of the first member.
	o, _ := w.owners(ids, time.Now())
	w.mu.Lock()
	for p, owners := range o {
		if owners[0] == 0 {
			w.parts[p] = true
			r.Victim = append(r.Victim, p)
		}
	}
	slices.Sort(r.Victim)
	w.killed = time.Now()
	w.mu.Unlock()
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return r, fmt.Errorf("kill -9 of member 0: %w", err)
	}
	<-ms[0].done
	takeoverBy := time.After(3*cfg.session + takeoverSlack)
	for {
		w.mu.Lock()
		n := len(w.taken)
		first, all := time.Duration(0), time.Duration(0)
		for _, d := range w.taken {
			if first == 0 || d < first {
				first = d
			}
			all = max(all, d)
		}
		w.mu.Unlock()
		if n == len(r.Victim) {
			r.TakeoverS, r.AllS = first.Seconds(), all.Seconds()
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("%d of the killed member's %d partitions read by another within -timeout: %w", n, len(r.Victim), ctx.Err())
		case <-takeoverBy:
			return r, fmt.Errorf("%d of the killed member's %d partitions (%v) read by another within %s of the kill", n, len(r.Victim), r.Victim, 3*cfg.session+takeoverSlack)
		case i := <-exited:
			if i != 0 {
				return r, memberFailed(i)
			}
		case err := <-prodErr:
			return r, fmt.Errorf("produce: %w", err)
		case <-w.change:
		}
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return strings.TrimSpace(s)
}

// runMember is member, takeover's franz-go member process: a group
// member of -group subscribed to -topic, with -session and -heartbeat,
// committing every 200 ms, printing "partition offset" for each record
// it gets, until SIGTERM or SIGINT (then it leaves the group).
func runMember(ctx context.Context, cfg config) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.ConsumerGroup(cfg.group), kgo.ConsumeTopics(cfg.topic),
		kgo.SessionTimeout(cfg.session), kgo.HeartbeatInterval(cfg.heartbeat), kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "kafkabench member: fetch %s/%d: %v\n", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			fmt.Fprintf(out, "%d %d\n", r.Partition, r.Offset)
		})
		if err := out.Flush(); err != nil {
			return err
		}
	}
}
