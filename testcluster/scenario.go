package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gostream/client"
)

// Scenarios are the chaos scenarios, in the order `make chaos` runs them.
var Scenarios = []string{"leader-kill", "follower-kill", "leader-pause", "leader-isolated", "controller-isolated",
	"controller-mid-failover", "lost-unsynced", "slow-network", "rolling-restart",
	"duplicate-id", "bit-rot", "disk-full", "topic-recreate", "restart-one-down", "power-loss", "unreplicated-tail", "group-members", "random",
	"raft-controller-kill", "raft-controller-isolated", "raft-controller-mid-failover", "reassign", "reassign-7", autopilotScenario}

// needsNetwork lists the scenarios that cut links or slow them down: they
// run only inside the harness's network namespace.
var needsNetwork = map[string]bool{"leader-isolated": true, "controller-isolated": true, "slow-network": true, "random": true,
	"raft-controller-isolated": true, "unreplicated-tail": true}

// kafkaGroupScenarios run a Kafka consumer group beside the native one:
// those with the group faults.
var kafkaGroupScenarios = map[string]bool{"group-members": true, "random": true}

// ScenarioConfig is one run of one scenario.
type ScenarioConfig struct {
	Name     string
	Seed     int64
	Duration time.Duration // of the faults; healing and checking come on top
	// RunsDir receives the history, logs and data directories of a run
	// that found a violation (default testcluster/runs in the module).
	RunsDir string
	Race    bool
	// Out receives the harness's progress lines (default os.Stdout).
	Out io.Writer
	// Replay is the command line that reruns this scenario, printed on a
	// violation.
	Replay string
	// Keep saves the run into RunsDir even when it found no violation.
	Keep bool
	// PorcupineTimeout bounds porcupine's check of the history (default
	// DefaultPorcupineTimeout); a check that runs out of it is
	// inconclusive.
	PorcupineTimeout time.Duration
	// Secure runs the cluster with TLS, mutual TLS, gossip encryption and
	// authentication (Config.Secure).
	Secure bool
}

// DefaultPorcupineTimeout bounds porcupine's check of a run's history.
// A history of a million operations takes a few seconds.
const DefaultPorcupineTimeout = 5 * time.Minute

// Result is the outcome of one scenario run.
type Result struct {
	Scenario string
	Seed     int64
	Stats    CheckStats
	Faults   int
	// LeaderFaults counts the faults that hit a partition leader.
	LeaderFaults int
	Violations   []string
	// Porcupine is the second checker's verdict on the history; its
	// violations are among Violations too.
	Porcupine PorcupineResult
	SavedTo   string
	// Notes are observations that violate no invariant (an operator
	// command that needed a workaround).
	Notes []string
	Err   error // the harness could not run the scenario
}

const chaosTopic = "chaos"

type run struct {
	cfg  ScenarioConfig
	c    *Cluster
	rng  *rand.Rand
	hist *History
	w    *Workload
	// ghist and gw are the consumer group's members and what they printed;
	// khist and kgw the Kafka group's, in the scenarios that run it
	// (kafkaGroupScenarios), else nil.
	ghist  *History
	gw     *GroupWorkload
	khist  *History
	kgw    *GroupWorkload
	dir    string
	out    io.Writer
	logMu  sync.Mutex
	logf   *os.File
	faults int
	paused map[int32]bool
	notes  []string
	// violations found while the faults run (a node that did not come back
	// over a damaged tail, say), added to the checker's.
	violations []string

	leaderFaults int
	// partitions is the number of partitions of the workload's topic.
	partitions int
	// lastActive is each partition's active set before every node went
	// down.
	lastActive map[int32][]int32
	// side is topic-recreate's producer of the newest incarnation of
	// recreateTopic (incarnation sideGen), nil before its first fault.
	side    *sideProducer
	sideGen int
	// ap is the autopilot of the autopilot scenario, the only operator
	// there; nil in the others.
	ap *AutopilotProc
}

// violation records an invariant broken during the run.
func (r *run) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	r.say("VIOLATION %s", v)
	r.violations = append(r.violations, v)
}

func (r *run) say(format string, args ...any) {
	line := fmt.Sprintf("%s [%s seed %d] %s", time.Now().UTC().Format("15:04:05.000"), r.cfg.Name, r.cfg.Seed, fmt.Sprintf(format, args...))
	fmt.Fprintln(r.out, line)
	r.log("%s", line)
}

func (r *run) log(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.logf, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

// RunScenario starts a 3-node cluster in a temporary directory, runs the
// workload on a replicated topic while injecting the scenario's faults and
// running the operator's commands, heals, drains and checks.
func RunScenario(cfg ScenarioConfig) (res Result) {
	res = Result{Scenario: cfg.Name, Seed: cfg.Seed}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	fault, partitions, ok := scenarioFault(cfg.Name)
	if !ok {
		res.Err = fmt.Errorf("unknown scenario %q (have %s)", cfg.Name, strings.Join(Scenarios, ", "))
		return res
	}
	dir, err := os.MkdirTemp("", "gostream-chaos-")
	if err != nil {
		res.Err = err
		return res
	}
	defer os.RemoveAll(dir)
	r := &run{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), hist: &History{}, ghist: &History{}, dir: dir, out: cfg.Out, paused: map[int32]bool{},
		partitions: partitions}
	if r.logf, err = os.Create(filepath.Join(dir, "harness.log")); err != nil {
		res.Err = err
		return res
	}
	defer r.logf.Close()
	defer func() {
		if len(res.Violations) > 0 || res.Err != nil || cfg.Keep {
			res.SavedTo = r.save(res)
		}
	}()
	netErr := Netns()
	if netErr != nil && needsNetwork[cfg.Name] {
		res.Err = fmt.Errorf("scenario %s needs network faults: %w", cfg.Name, netErr)
		return res
	}
	// Every node runs on the crashfs build: kill -9 loses what a node had
	// not fsync'd, as a machine crash does, and disks can fill.
	nodes, candidates := 3, 0
	if isRaftScenario(cfg.Name) {
		nodes, candidates = raftScenarioNodes, raftCandidates
	}
	if isReassignScenario(cfg.Name) {
		nodes, candidates = reassignShape(cfg.Name)
	}
	if cfg.Name == autopilotScenario {
		nodes, candidates = 3, 3 // as make run
	}
	r.c, err = New(Config{Nodes: nodes, Candidates: candidates, Dir: dir, Race: cfg.Race, Logf: r.log, Netns: netErr == nil, Seed: cfg.Seed, CrashFS: true, Secure: cfg.Secure, Kafka: true})
	if err != nil {
		res.Err = err
		return res
	}
	defer r.c.Close()
	if err := r.c.Start(); err != nil {
		res.Err = err
		return res
	}
	if err := r.createTopic(partitions, replicationFactor(cfg.Name)); err != nil {
		res.Err = err
		return res
	}
	if cfg.Name == autopilotScenario {
		if err := r.startAutopilot(); err != nil {
			res.Err = err
			return res
		}
		defer func() { r.ap.Kill() }()
	}
	wcfg := WorkloadConfig{Topic: chaosTopic, Partitions: partitions, Producers: 4, Consumers: 2, Secured: r.c.Secured}
	for _, n := range r.c.Nodes {
		wcfg.Kafka = append(wcfg.Kafka, n.Kafka)
	}
	if s := r.c.Secure; s != nil {
		wcfg.KafkaTLS, wcfg.KafkaUser, wcfg.KafkaPassword = kafkaTLS(s), "admin", s.AdminToken
	}
	w := NewWorkload(strings.Split(r.c.Bootstrap(), ","), wcfg, r.hist)
	r.w = w
	if err := w.Start(); err != nil {
		res.Err = err
		return res
	}
	r.gw = NewGroupWorkload(r.c, chaosTopic, r.ghist, r.log)
	if err := r.gw.Start(); err != nil {
		res.Err = err
		return res
	}
	groupsLine := fmt.Sprintf("a group of %d members (one static)", groupMembers)
	if kafkaGroupScenarios[cfg.Name] {
		r.khist = &History{}
		r.kgw = NewKafkaGroupWorkload(r.c, chaosTopic, r.khist, r.log)
		if err := r.kgw.Start(); err != nil {
			res.Err = err
			return res
		}
		groupsLine = fmt.Sprintf("a native group and a Kafka group (franz-go) of %d members each (one static)", groupMembers)
	}
	sampler := NewLeaderSampler(r.c, chaosTopic, 250*time.Millisecond)
	sampler.Start()
	defer sampler.Stop()
	var csampler *ControllerSampler
	if candidates > 0 {
		csampler = NewControllerSampler(r.c, 200*time.Millisecond)
		defer csampler.Stop()
	}
	r.say("cluster up in %s, workload started: 4 producers and 2 consumers (native), a Kafka producer (idempotent) and reader, %s, %d partitions", dir, groupsLine, partitions)

	end := time.Now().Add(cfg.Duration)
	for time.Now().Before(end) {
		r.sleep(1000, 3000)
		if !time.Now().Before(end) {
			break
		}
		if err := fault(r); err != nil {
			r.say("fault: %v", err)
			res.Err = err
			break
		}
		r.faults++
	}
	if r.side != nil {
		r.side.stop()
	}
	res.Faults = r.faults
	res.LeaderFaults = r.leaderFaults
	defer func() { res.Notes = r.notes }()
	r.say("healing")
	if err := r.heal(); err != nil {
		r.say("heal: %v", err)
		res.Violations = append(res.Violations, "heal: "+err.Error())
	}
	if err := r.waitProgress(partitions, time.Now(), 30*time.Second); err != nil {
		res.Violations = append(res.Violations, "no-progress: "+err.Error())
	}
	if r.ap != nil {
		// Healed: the checks read a cluster nobody changes any more.
		r.autopilotAlive()
		if code, err := r.ap.Stop(30 * time.Second); err != nil || code != 0 {
			r.violation("autopilot: stopped with exit %d (%v): %s", code, err, strings.TrimSpace(r.ap.Stderr()))
		}
	}
	w.StopProducers()
	res.Violations = append(res.Violations, r.violations...)
	r.say("producers stopped; draining the consumers")
	if err := w.Drain(90 * time.Second); err != nil {
		r.say("%v", err)
		res.Violations = append(res.Violations, "drain (acknowledged writes past what was read may show as lost): "+err.Error())
	}
	if err := w.ReadFinal(30 * time.Second); err != nil {
		r.say("%v", err)
		res.Violations = append(res.Violations, "final-read (the records read there cannot be checked): "+err.Error())
	}
	ops := r.hist.Ops()
	r.say("waiting for the group's commits to reach the high watermarks")
	hws, acked := r.highWatermarks(), ackedProduces(ops)
	res.Violations = append(res.Violations, r.gw.Finish(hws, acked, 90*time.Second)...)
	res.Violations = append(res.Violations, CheckGroupReads(r.ghist.Ops(), ops)...)
	if r.kgw != nil {
		r.say("waiting for the Kafka group's commits to reach the high watermarks")
		res.Violations = append(res.Violations, r.kgw.Finish(hws, acked, 90*time.Second)...)
		r.say("%s: %s", r.kgw.name(), r.kgw.stats)
		res.Violations = append(res.Violations, CheckGroupReads(r.khist.Ops(), ops)...)
	}
	v, st := CheckHistory(ops)
	res.Stats = st
	res.Violations = append(res.Violations, v...)
	res.Porcupine = r.checkPorcupine(ops)
	if res.Porcupine.Verdict == PorcupineViolation {
		res.Violations = append(res.Violations, res.Porcupine.Violations...)
	}
	res.Violations = append(res.Violations, CheckReplicas(r.c, chaosTopic, 30*time.Second)...)
	res.Violations = append(res.Violations, CheckOffsetsLogs(r.c, r.gw.group)...)
	if r.kgw != nil {
		res.Violations = append(res.Violations, CheckOffsetsLogs(r.c, r.kgw.group)...)
	}
	sampler.Stop() // takes a last sample, of the healed cluster
	res.Violations = append(res.Violations, r.checkEpochsAndTruncations(sampler.Samples())...)
	if csampler != nil {
		cs := csampler.Stop()
		r.say("controller group: %d samples", len(cs))
		res.Violations = append(res.Violations, CheckControllerSamples(cs)...)
	}
	// With --race a race in a node is printed to its log, where no one
	// would see it: it is a violation of the run.
	for _, race := range r.c.DataRaces() {
		res.Violations = append(res.Violations, "data-race: "+race)
	}
	r.say("checked: %d operations, %d produces, %d acknowledged, %d records read (%d different, found at their offsets by the final read of %d records), %d violations",
		st.Ops, st.Produces, st.Acked, st.Reads, st.Kept, st.Final, len(res.Violations))
	return res
}

// highWatermarks is every partition's high watermark now, as its leader
// says; a partition whose leader does not answer is left out (the drain
// has already failed for it).
func (r *run) highWatermarks() map[int32]int64 {
	out := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, r.c.Secured(client.Config{Bootstrap: strings.Split(r.c.Bootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
	if err != nil {
		return out
	}
	defer cl.Close()
	for p := range int32(r.partitions) {
		if offs, err := cl.ListOffsets(ctx, chaosTopic, p); err == nil {
			out[p] = offs.HighWatermark
		}
	}
	return out
}

// ackedProduces is the acknowledged produces of ops.
func ackedProduces(ops []Op) []Op {
	var out []Op
	for _, op := range ops {
		if op.Kind == OpProduce && op.Result == ResultOK && op.Err == "" {
			out = append(out, op)
		}
	}
	return out
}

// checkPorcupine checks the history with porcupine, noting an
// inconclusive check.
func (r *run) checkPorcupine(ops []Op) PorcupineResult {
	timeout := r.cfg.PorcupineTimeout
	if timeout <= 0 {
		timeout = DefaultPorcupineTimeout
	}
	pr := CheckPorcupine(ops, timeout)
	r.say("porcupine: %s", pr.Summary())
	if pr.Verdict == PorcupineInconclusive {
		r.note(pr.Violations[0])
	}
	return pr
}

// scenarioFault returns a scenario's fault step and its topic's partitions.
func scenarioFault(name string) (func(*run) error, int, bool) {
	switch name {
	case "leader-kill":
		return (*run).leaderKill, 3, true
	case "follower-kill":
		// Two partitions led by brokers 1 and 2: broker 3 only follows.
		return (*run).followerKill, 2, true
	case "leader-pause":
		return (*run).leaderPause, 3, true
	case "controller-mid-failover":
		return (*run).controllerMidFailover, 3, true
	case "rolling-restart":
		return (*run).rollingRestart, 3, true
	case "leader-isolated":
		return (*run).leaderIsolated, 3, true
	case "controller-isolated":
		return (*run).controllerIsolated, 3, true
	case "lost-unsynced":
		return (*run).lostUnsynced, 3, true
	case "slow-network":
		return (*run).slowNetwork, 3, true
	case "duplicate-id":
		return (*run).duplicateID, 3, true
	case "bit-rot":
		return (*run).bitRot, 3, true
	case "disk-full":
		return (*run).diskFull, 3, true
	case "topic-recreate":
		return (*run).topicRecreate, 3, true
	case "restart-one-down":
		return (*run).restartOneDown, 3, true
	case "power-loss":
		return (*run).powerLoss, 3, true
	case "unreplicated-tail":
		return (*run).unreplicatedTail, 3, true
	case "group-members":
		return (*run).groupFault, 3, true
	case "random":
		return (*run).randomFault, 3, true
	case "raft-controller-kill":
		return (*run).raftControllerKill, 4, true
	case "raft-controller-isolated":
		return (*run).raftControllerIsolated, 4, true
	case "raft-controller-mid-failover":
		return (*run).raftControllerMidFailover, 4, true
	case "reassign", "reassign-7":
		return (*run).reassignFault, 3, true
	case autopilotScenario:
		return (*run).autopilotFault, 3, true
	}
	return nil, 0, false
}

// replicationFactor is the replication factor of a scenario's topic: 3,
// but 2 in unreplicated-tail, which needs a partition whose replicas
// leave out the controller's node (brokers 2 and 3 hold partition 1).
func replicationFactor(name string) int {
	if name == "unreplicated-tail" {
		return 2
	}
	return 3
}

func (r *run) sleep(minMs, maxMs int) {
	time.Sleep(time.Duration(minMs+r.rng.Intn(maxMs-minMs+1)) * time.Millisecond)
}

// describe returns the topic's metadata as the cluster reports it now.
func describe(c *Cluster, topic string) (client.TopicMetadata, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.Secured(client.Config{Bootstrap: strings.Split(c.Bootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
	if err != nil {
		return client.TopicMetadata{}, err
	}
	defer cl.Close()
	if err := cl.RefreshMetadata(ctx, topic); err != nil {
		return client.TopicMetadata{}, err
	}
	return cl.DescribeTopic(ctx, topic)
}

func (r *run) createTopic(partitions, replicationFactor int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl, err := client.New(ctx, r.c.Secured(client.Config{Bootstrap: strings.Split(r.c.Bootstrap(), ","), RequestTimeout: 5 * time.Second}))
		if err == nil {
			// Cluster.Start has waited for every broker to register.
			_, err = cl.CreateTopic(ctx, chaosTopic, partitions, replicationFactor)
			cl.Close()
		}
		cancel()
		if err == nil || errors.Is(err, client.ErrNotServing) {
			return nil // created; a partition not serving yet is the workload's to wait for
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create topic: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ctl runs gostream-ctl until it exits 0, as an operator retries a command
// the cluster is not ready for yet. It names every broker in --bootstrap
// first; when that times out while bootstrapping (a paused broker accepts
// the connection and never answers), it names only the brokers known to be
// up and running, as an operator would next, and notes it.
func (r *run) ctl(timeout time.Duration, args ...string) error {
	deadline := time.Now().Add(timeout)
	bootstrap := r.c.Bootstrap()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := r.ctlAt(ctx, bootstrap, args...)
		cancel()
		if err == nil && res.Exit == 0 {
			r.say("gostream-ctl --bootstrap %s %s: ok", bootstrap, strings.Join(args, " "))
			return nil
		}
		if err == nil && len(args) > 1 && args[0] == "topic" && args[1] == "create" && strings.HasPrefix(res.Stderr, "NotReady: ") {
			// Created; a partition whose leader is down serves after the
			// operator's failover, which is not this step's to make.
			r.note(fmt.Sprintf("gostream-ctl %s: created, not every partition serving yet: %s", strings.Join(args, " "), strings.TrimSpace(res.Stderr)))
			return nil
		}
		if err == nil {
			err = fmt.Errorf("exit %d: %s", res.Exit, strings.TrimSpace(res.Stderr))
			if strings.Contains(res.Stderr, "bootstrap: ") && strings.Contains(res.Stderr, "context deadline exceeded") && bootstrap == r.c.Bootstrap() {
				r.note(fmt.Sprintf("gostream-ctl --bootstrap <all brokers> %s timed out bootstrapping (%s) with a broker paused %v; retried naming only the live brokers",
					strings.Join(args, " "), strings.TrimSpace(res.Stderr), r.pausedIDs()))
				bootstrap = r.liveBootstrap()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gostream-ctl %s: %w", strings.Join(args, " "), err)
		}
		r.say("gostream-ctl %s failed, retrying: %v", strings.Join(args, " "), err)
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *run) ctlAt(ctx context.Context, bootstrap string, args ...string) (CtlResult, error) {
	cmd := exec.CommandContext(ctx, r.c.Bins.Ctl, append([]string{"--bootstrap", bootstrap}, args...)...)
	cmd.Env = append(append(cleanEnv(), "GORACE=atexit_sleep_ms=0"), r.c.Secure.ctlEnv()...)
	res, err := ctlResult(cmd)
	if err != nil {
		return res, err
	}
	r.log("ctl --bootstrap %s %s -> exit %d\n%s%s", bootstrap, strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
	return res, nil
}

// liveBootstrap names the brokers running and not paused.
func (r *run) liveBootstrap() string {
	var addrs []string
	for _, n := range r.c.Nodes {
		if n.Running() && !r.paused[n.ID] {
			addrs = append(addrs, n.Addr())
		}
	}
	return strings.Join(addrs, ",")
}

func (r *run) pausedIDs() []int32 {
	var ids []int32
	for _, n := range r.c.Nodes {
		if r.paused[n.ID] {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// note records an observation that is not an invariant violation.
func (r *run) note(s string) {
	r.say("note: %s", s)
	r.notes = append(r.notes, s)
}

func (r *run) failover(id int32) error {
	return r.ctl(60*time.Second, "failover", "--broker", fmt.Sprint(id))
}

func (r *run) recover(id int32) error {
	return r.ctl(60*time.Second, "recover", "--broker", fmt.Sprint(id))
}

// restart starts a stopped node and runs recover for it.
func (r *run) restart(id int32) error {
	if err := r.c.StartNode(id); err != nil {
		return err
	}
	r.say("node %d restarted", id)
	return r.recoverAndRebalance(id)
}

// recoverAndRebalance runs recover for a broker that is back, then
// rebalance.
func (r *run) recoverAndRebalance(id int32) error {
	if err := r.recover(id); err != nil {
		return err
	}
	r.rebalance()
	return nil
}

// rebalance, two times in three, runs gostream-ctl elect-leaders, as an
// operator does once the brokers are back: failovers prefer the lowest
// broker id, so without it leadership gathers on the controller, which no
// scenario fails over, and the leader faults would dry up. It is a fault
// of its own too: a leadership move under load. A refusal is noted, not
// retried (a replica may still be out of the active set).
func (r *run) rebalance() {
	if r.rng.Intn(3) == 0 {
		return
	}
	r.electLeaders()
}

// electLeaders runs gostream-ctl elect-leaders; a refusal is noted.
func (r *run) electLeaders() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.ctlAt(ctx, r.c.Bootstrap(), "elect-leaders")
	switch {
	case err != nil:
		r.note(fmt.Sprintf("gostream-ctl elect-leaders: %v", err))
	case res.Exit != 0:
		r.note(fmt.Sprintf("gostream-ctl elect-leaders: exit %d: %s", res.Exit, strings.TrimSpace(res.Stderr)))
	default:
		r.say("gostream-ctl elect-leaders: ok\n%s", strings.TrimSpace(res.Stdout))
	}
}

// leaders returns the brokers leading a partition of the topic.
func (r *run) leaders() (map[int32]bool, error) {
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		return nil, err
	}
	out := map[int32]bool{}
	for _, p := range tm.Partitions {
		out[p.Leader] = true
	}
	return out, nil
}

// victim picks a broker other than the controller (failover needs the
// controller): a leader when leader is true, otherwise one leading nothing
// if there is one. what describes the pick. Failover prefers the lowest
// broker id among equally complete replicas, so leadership drifts to the
// controller (broker 1), which these scenarios never fail over; once it
// leads every partition no other broker is a leader, the pick is a
// follower, and the fault is counted as such.
func (r *run) victim(leader bool) (id int32, what string, err error) {
	ls, err := r.leaders()
	if err != nil {
		return 0, "", err
	}
	var pick []int32
	for _, id := range []int32{2, 3} {
		if ls[id] == leader {
			pick = append(pick, id)
		}
	}
	what = "a follower"
	if leader {
		what = "a leader"
	}
	if len(pick) == 0 {
		pick = []int32{2, 3}
		what = "a follower: no broker but the controller leads a partition now"
		if !leader {
			what = "a leader: every broker leads a partition"
		}
	}
	id = pick[r.rng.Intn(len(pick))]
	if strings.HasPrefix(what, "a leader") {
		r.leaderFaults++
	}
	return id, what, nil
}

func (r *run) killAndFailover(id int32, what string) error {
	if err := r.c.Node(id).Kill(); err != nil {
		return err
	}
	r.say("killed node %d (%s)", id, what)
	if err := r.failover(id); err != nil {
		return err
	}
	r.sleep(2000, 5000)
	return r.restart(id)
}

func (r *run) leaderKill() error {
	id, what, err := r.victim(true)
	if err != nil {
		return err
	}
	return r.killAndFailover(id, what)
}

func (r *run) followerKill() error {
	id, what, err := r.victim(false)
	if err != nil {
		return err
	}
	return r.killAndFailover(id, what)
}

func (r *run) leaderPause() error {
	id, what, err := r.victim(true)
	if err != nil {
		return err
	}
	if err := r.c.Node(id).Pause(); err != nil {
		return err
	}
	r.paused[id] = true
	r.say("paused node %d (%s)", id, what)
	if err := r.failover(id); err != nil {
		return err
	}
	r.sleep(2000, 5000)
	if err := r.c.Node(id).Resume(); err != nil {
		return err
	}
	delete(r.paused, id)
	r.say("resumed node %d (the zombie)", id)
	if err := r.c.Node(id).WaitHealthy(30 * time.Second); err != nil {
		return err
	}
	return r.recoverAndRebalance(id)
}

func (r *run) controllerMidFailover() error {
	id, what, err := r.victim(true)
	if err != nil {
		return err
	}
	if err := r.c.Node(id).Kill(); err != nil {
		return err
	}
	r.say("killed node %d (%s)", id, what)
	ctrl := r.c.Node(1)
	if err := ctrl.Stop(10 * time.Second); err != nil {
		r.say("stop node 1: %v", err)
	}
	ctrl.Env = []string{"GOSTREAM_CRASHPOINT=failover-after-fence"}
	err = r.c.StartNode(1)
	ctrl.Env = nil
	if err != nil {
		return err
	}
	r.say("node 1 (controller) restarted with crash point failover-after-fence")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := r.c.Ctl(ctx, "", "failover", "--broker", fmt.Sprint(id))
	cancel()
	if err != nil {
		return err
	}
	r.say("gostream-ctl failover --broker %d with the crash point: exit %d %s", id, res.Exit, strings.TrimSpace(res.Stderr))
	for deadline := time.Now().Add(15 * time.Second); ctrl.Running() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if ctrl.Running() {
		r.note("node 1 did not die at the crash point (no partition of the victim needed a leader failover); killed it")
		ctrl.Kill()
	}
	if err := r.c.StartNode(1); err != nil {
		return err
	}
	r.say("node 1 (controller) restarted")
	if err := r.failover(id); err != nil {
		return err
	}
	if err := r.recover(1); err != nil {
		return err
	}
	r.sleep(1000, 3000)
	return r.restart(id)
}

// countIfLeader counts a fault on broker id if it leads a partition.
func (r *run) countIfLeader(id int32) {
	if ls, err := r.leaders(); err == nil && ls[id] {
		r.leaderFaults++
	}
}

func (r *run) rollingRestart() error {
	for _, id := range []int32{1, 2, 3} {
		r.countIfLeader(id)
		if err := r.c.Node(id).Stop(10 * time.Second); err != nil {
			r.say("stop node %d: %v", id, err)
		}
		r.say("stopped node %d", id)
		if id != 1 {
			if err := r.failover(id); err != nil {
				return err
			}
		}
		r.sleep(500, 1500)
		if err := r.restart(id); err != nil {
			return err
		}
		r.sleep(500, 1500)
	}
	return nil
}

func (r *run) randomFault() error {
	switch k := r.rng.Intn(17); k {
	case 16:
		return r.groupFault()
	case 10:
		return r.duplicateID()
	case 11:
		return r.bitRot()
	case 12:
		return r.diskFull()
	case 13:
		return r.topicRecreate()
	case 14:
		return r.restartOneDown()
	case 15:
		return r.powerLoss()
	case 6:
		return r.leaderIsolated()
	case 7:
		return r.controllerIsolated()
	case 8:
		return r.lostUnsynced()
	case 9:
		return r.slowNetwork()
	case 0:
		return r.leaderKill()
	case 1:
		return r.followerKill()
	case 2:
		return r.leaderPause()
	case 3:
		return r.controllerMidFailover()
	case 4:
		// The controller killed and restarted: nothing to fail over to.
		r.countIfLeader(1)
		if err := r.c.Node(1).Kill(); err != nil {
			return err
		}
		r.say("killed node 1 (the controller)")
		r.sleep(500, 3000)
		return r.restart(1)
	default:
		id := int32(2 + r.rng.Intn(2))
		r.countIfLeader(id)
		if err := r.c.Node(id).Stop(10 * time.Second); err != nil {
			r.say("stop node %d: %v", id, err)
		}
		r.say("stopped node %d cleanly", id)
		if err := r.failover(id); err != nil {
			return err
		}
		r.sleep(500, 3000)
		return r.restart(id)
	}
}

// heal brings every node back, resumed and running, recovers each and
// waits until every partition's active set holds all its replicas.
func (r *run) heal() error {
	var errs []error
	for _, g := range []*GroupWorkload{r.gw, r.kgw} {
		if g != nil {
			if err := g.Heal(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := r.c.HealNetwork(); err != nil {
		errs = append(errs, err)
	}
	for _, n := range r.c.Nodes {
		if r.paused[n.ID] {
			n.Resume()
			delete(r.paused, n.ID)
		}
		if !n.Running() {
			if err := r.c.StartNode(n.ID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
	}
	for _, n := range r.c.Nodes {
		if r.ap != nil {
			break // the autopilot recovers them
		}
		if err := r.recover(n.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if isReassignScenario(r.cfg.Name) {
		// A partition being moved lists the replicas it takes off beside
		// those it adds: its active set is full once the move ends.
		r.waitMovesDone()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		tm, err := describe(r.c, chaosTopic)
		if err == nil {
			full := true
			for _, p := range tm.Partitions {
				full = full && len(p.Active) == len(p.Replicas)
			}
			if full {
				break
			}
			err = fmt.Errorf("active sets not full: %+v", tm.Partitions)
		}
		if time.Now().After(deadline) {
			errs = append(errs, err)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// save copies the history, the logs and the data directories of a run
// into RunsDir/<scenario>-<seed>/ and returns that directory.
func (r *run) save(res Result) string {
	root := r.cfg.RunsDir
	if root == "" {
		mod, err := moduleRoot()
		if err != nil {
			r.say("save: %v", err)
			return ""
		}
		root = filepath.Join(mod, "testcluster", "runs")
	}
	dst := filepath.Join(root, fmt.Sprintf("%s-%d", r.cfg.Name, r.cfg.Seed))
	os.RemoveAll(dst)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		r.say("save: %v", err)
		return ""
	}
	if r.c != nil {
		r.c.Close() // stop writers before copying their files
	}
	if err := r.hist.Save(filepath.Join(dst, "history.jsonl")); err != nil {
		r.say("save history: %v", err)
	}
	if r.ghist != nil {
		if err := r.ghist.Save(filepath.Join(dst, "group-history.jsonl")); err != nil {
			r.say("save the group's history: %v", err)
		}
	}
	if r.khist != nil {
		if err := r.khist.Save(filepath.Join(dst, "kafka-group-history.jsonl")); err != nil {
			r.say("save the Kafka group's history: %v", err)
		}
		if err := r.kgw.SaveKafkaLogs(filepath.Join(dst, "kafka-members.jsonl")); err != nil {
			r.say("save the Kafka members' lines: %v", err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s\nseed %d\nduration %s\nreplay: %s\n", r.cfg.Name, r.cfg.Seed, r.cfg.Duration, r.cfg.Replay)
	if res.Err != nil {
		fmt.Fprintf(&b, "harness error: %v\n", res.Err)
	}
	if res.Porcupine.Verdict != "" {
		fmt.Fprintf(&b, "porcupine: %s\n", res.Porcupine.Summary())
	}
	fmt.Fprintf(&b, "\n%d violations:\n", len(res.Violations))
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	os.WriteFile(filepath.Join(dst, "violations.txt"), []byte(b.String()), 0o644)
	if res.Porcupine.Verdict == PorcupineViolation {
		if err := res.Porcupine.SaveVisualization(filepath.Join(dst, "porcupine.html")); err != nil {
			r.say("save porcupine visualization: %v", err)
		}
	}
	if err := copyTree(r.dir, dst); err != nil {
		r.say("save: %v", err)
	}
	r.say("saved history, logs and data directories to %s", dst)
	if r.cfg.Replay != "" {
		r.say("replay with: %s", r.cfg.Replay)
	}
	return dst
}

// copyTree copies the regular files under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// checkEpochsAndTruncations checks invariants 5 and 7 once the cluster has
// healed: epochs and leaders from the samples, the audit trail and the
// replicas' own batches; truncations from what recover set aside.
func (r *run) checkEpochsAndTruncations(samples []LeaderSample) []string {
	events, err := LoadAuditTrail(r.c)
	if err != nil {
		return []string{"harness: audit trail: " + err.Error()}
	}
	events = TopicEvents(events, chaosTopic)
	replicas, err := ReadTopicReplicas(r.c, chaosTopic)
	if err != nil {
		return []string{"replicas: read: " + err.Error()}
	}
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		return []string{"harness: describe: " + err.Error()}
	}
	active := map[int32][]int32{}
	for _, p := range tm.Partitions {
		active[p.Partition] = p.Active
	}
	v := CheckEpochs(samples, events, replicas, active)
	v = append(v, CheckTruncations(r.c, chaosTopic, r.hist.Ops(), events)...)
	r.say("invariants 5 and 7: %d leader samples, %d audit events, %d violations", len(samples), len(events), len(v))
	return v
}
