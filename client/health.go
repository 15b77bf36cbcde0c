package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"gostream/metadata"
	"gostream/transport"
)

// The judgement of a survey: partition health, and the warnings with
// their advice. Every command a warning gives is meant to be run as it is,
// and works when it is; a warning gives none when the step is no command
// or cannot work yet, and says why (NoCommandReason).

// judge builds the cluster report from a survey, measuring with prober
// the followers the survey could not confirm in sync.
func (s *survey) judge(ctx context.Context, prober replicaStater) ClusterReport {
	r := ClusterReport{BrokersReport: s.brokersReport(), Partitions: []PartitionReport{}, Warnings: []Warning{}}
	r.Warnings = append(r.Warnings, s.brokerWarnings(r.Brokers)...)

	var parts []*partitionCheck
	for _, t := range s.meta.Topics {
		for i, p := range t.Partitions {
			parts = append(parts, s.checkPartition(t.Name, int32(i), p))
		}
	}
	probeLags(ctx, prober, parts)
	inactive := map[int32][]string{} // broker -> partitions whose replica on it is not active
	offPreferred := 0
	for _, pc := range parts {
		pr := pc.report(s)
		r.Partitions = append(r.Partitions, pr)
		r.Counts.Total++
		if pr.Offline {
			r.Counts.Offline++
		}
		if pr.UnderReplicated {
			r.Counts.UnderReplicated++
		}
		for _, b := range pc.inactive {
			inactive[b] = append(inactive[b], pc.name())
		}
		if pr.OffPreferred {
			offPreferred++
		}
		r.Warnings = append(r.Warnings, pc.warnings()...)
	}
	r.Warnings = append(r.Warnings, s.inactiveWarnings(inactive)...)
	if len(r.Warnings) == 0 && offPreferred > 0 {
		// Only on an otherwise healthy cluster: a move needs every
		// preferred replica active and answering.
		r.Warnings = append(r.Warnings, fixedBy(
			fmt.Sprintf("%s led by another replica than the preferred one (a failover moves leadership, and it stays where it went)", plural(offPreferred, "partition")),
			"move it back", "gostream-ctl elect-leaders"))
	}
	// One command, given once: the first warning that needs it carries it.
	given := map[string]bool{}
	for i, w := range r.Warnings {
		if w.Command == "" {
			continue
		}
		if given[w.Command] {
			r.Warnings[i].Command, r.Warnings[i].NoCommand, r.Warnings[i].Pending = "", NoCommandCovered, w.Command
		}
		given[w.Command] = true
	}
	if !s.controllerAnswered() {
		// Every fix is an admin command, and the controller carries those
		// out: none works until it is back.
		for i, w := range r.Warnings {
			if w.Command != "" {
				r.Warnings[i].Command, r.Warnings[i].NoCommand, r.Warnings[i].Pending = "", NoCommandControllerDown, w.Command
			}
		}
	}
	// The controller group's own warnings come first, and their commands
	// read the candidates, which works with no controller.
	var gw []Warning
	r.Group, gw = s.groupReport()
	r.Warnings = append(gw, r.Warnings...)
	for i := range r.Warnings {
		r.Warnings[i].Message = r.Warnings[i].message(s.meta.ControllerID)
	}
	return r
}

// fixedBy is a warning that command fixes.
func fixedBy(problem, advice, command string) Warning {
	return Warning{Problem: problem, Advice: advice, Command: command}
}

// noCommand is a warning that no command fixes now, for reason; pending
// is the command to run once the reason no longer holds, if any.
func noCommand(problem, advice string, reason NoCommandReason, pending string) Warning {
	return Warning{Problem: problem, Advice: advice, NoCommand: reason, Pending: pending}
}

// message is the warning for people: problem — advice, and why its
// command is not to be run now.
func (w Warning) message(controller int32) string {
	m := w.Problem
	if w.Advice != "" {
		m += " — " + w.Advice
	}
	switch w.NoCommand {
	case NoCommandCovered:
		m += " — the fix above (" + w.Pending + ") covers it"
	case NoCommandControllerDown:
		m += fmt.Sprintf(" — admin commands wait for the controller, broker %d: once it is back, run: %s", controller, w.Pending)
	}
	return m
}

// inactiveWarnings are the warnings about replicas outside their
// partition's active set, one per broker: recover --broker brings all of a
// broker's replicas back at once, once the broker runs.
func (s *survey) inactiveWarnings(inactive map[int32][]string) []Warning {
	var out []Warning
	for _, b := range sortedKeys(inactive) {
		parts := inactive[b]
		what := fmt.Sprintf("broker %d holds %s (under-replicated: %s)", b, plural(len(parts), "inactive replica"), abbreviate(parts, 5))
		them := "them"
		if len(parts) == 1 {
			them = "it"
		}
		recover := fmt.Sprintf("gostream-ctl recover --broker %d", b)
		_, registered := s.meta.Broker(b)
		switch {
		case !registered:
			out = append(out, noCommand(what, fmt.Sprintf("broker %d is not registered: start it (or replace it: gostream-ctl broker replace %d), then run: %s", b, b, recover),
				NoCommandBrokerDown, recover))
		case !s.reachable(b) || s.gossipOf(b).Gone():
			out = append(out, noCommand(what, fmt.Sprintf("broker %d does not answer: start it first, then run: %s", b, recover), NoCommandBrokerDown, recover))
		default:
			out = append(out, fixedBy(what, "recover brings "+them+" back", recover))
		}
	}
	return out
}

// abbreviate joins up to n names, and says how many more there are.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// plural is n nouns: "1 partition", "2 partitions".
func plural(n int, noun string) string { return pluralOf(n, noun, noun+"s") }

// pluralOf is n of one or many: "1 batch", "2 batches".
func pluralOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// brokerWarnings are the warnings about brokers themselves.
func (s *survey) brokerWarnings(brokers []BrokerReport) []Warning {
	var out []Warning
	ctrl := s.meta.ControllerID
	if _, ok := s.meta.Broker(ctrl); !ok {
		out = append(out, noCommand(fmt.Sprintf("the controller, broker %d, is not among the registered brokers", ctrl),
			"check the nodes' --controller flags", NoCommandManual, ""))
	}
	if v := s.views[ctrl]; v.answered() && v.controllerRefusal != "" {
		out = append(out, fixedBy("the controller refuses every change: "+v.controllerRefusal, "", "gostream-ctl cluster restore-metadata --dry-run"))
	}
	gossipKnown := false
	seen := map[string]bool{}
	for _, id := range sortedKeys(s.views) {
		v := s.views[id]
		gossipKnown = gossipKnown || (v.answered() && len(v.members) > 0)
		if !v.answered() {
			continue
		}
		for _, m := range v.impostors {
			if seen[m.Gossip+m.RootID] || m.State.Gone() {
				continue
			}
			seen[m.Gossip+m.RootID] = true
			out = append(out, noCommand(fmt.Sprintf("another process claims broker id %d in gossip (at %s, storage root %s); the controller refuses it", m.BrokerID, m.Gossip, m.RootID),
				"stop it, or give it its own --id", NoCommandManual, ""))
		}
	}
	for _, b := range brokers {
		failover := fmt.Sprintf("gostream-ctl failover --broker %d", b.ID)
		if !b.Answers && b.ID != ctrl && b.Registered && !activeAnywhere(s.meta, b.ID) {
			// Failed over already: nothing waits for it, and failover
			// would find nothing to do.
			recover := fmt.Sprintf("gostream-ctl recover --broker %d", b.ID)
			out = append(out, noCommand(fmt.Sprintf("broker %d does not answer (gossip: %s); it is in no active set, so nothing waits for it", b.ID, b.Gossip),
				"start it again, then run: "+recover, NoCommandBrokerDown, recover))
			continue
		}
		switch {
		case !b.Registered:
			if !b.Gossip.Gone() {
				out = append(out, noCommand(fmt.Sprintf("broker %d is in gossip but not registered with the controller", b.ID),
					"check its log (a refused registration says why) and its --controller flag", NoCommandManual, ""))
			}
		case b.ID == ctrl && !b.Answers:
			out = append(out, noCommand(fmt.Sprintf("the controller, broker %d, does not answer (gossip: %s)", b.ID, b.Gossip),
				fmt.Sprintf("admin commands (failover included) fail until it is back, and the partitions whose active set holds broker %d take no writes meanwhile (reads from the other leaders go on); restart it", b.ID), NoCommandManual, ""))
		case b.Gossip.Gone() && !b.Answers:
			out = append(out, fixedBy(fmt.Sprintf("broker %d is registered but gossip says %s and it does not answer", b.ID, b.Gossip),
				"check the process; if it is gone for good, fail it over", failover))
		case b.Gossip.Gone():
			out = append(out, noCommand(fmt.Sprintf("broker %d answers but gossip says %s", b.ID, b.Gossip),
				"check its gossip address and that TCP and UDP pass between the nodes", NoCommandManual, ""))
		case !b.Answers:
			out = append(out, fixedBy(fmt.Sprintf("broker %d is registered but does not answer (gossip: %s)", b.ID, b.Gossip),
				fmt.Sprintf("check the process and its RPC address %s; if it is gone for good, fail it over", b.Address), failover))
		case b.Gossip == transport.GossipSuspect:
			out = append(out, noCommand(fmt.Sprintf("gossip suspects broker %d, which answers", b.ID),
				"check the network between the nodes", NoCommandManual, ""))
		case b.GossipDisputed:
			out = append(out, noCommand(fmt.Sprintf("the answering brokers disagree on broker %d's gossip state", b.ID),
				"check the network between the nodes", NoCommandManual, ""))
		case b.Gossip == transport.GossipUnknown && gossipKnown:
			out = append(out, noCommand(fmt.Sprintf("gossip does not know broker %d, which answers", b.ID),
				"check its --gossip address and --join seeds", NoCommandManual, ""))
		}
	}
	return out
}

// activeAnywhere reports whether broker is in some partition's active set.
func activeAnywhere(meta *metadata.Cluster, broker int32) bool {
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			if slices.Contains(p.Active, broker) {
				return true
			}
		}
	}
	return false
}

// partitionCheck is what the survey found out about one partition.
type partitionCheck struct {
	topic     string
	partition int32
	p         metadata.Partition

	offline     bool
	offlineWhy  string
	offlineWarn Warning
	inactive    []int32 // replicas outside the active set
	unreachable []int32 // active followers that do not answer or are gone
	inSync      []int32 // active followers the leader confirms in sync
	diverged    []int32 // active followers the leader calls diverged
	unusable    []unusableReplica
	lags        []*lagCheck
}

// unusableReplica is an active follower whose own node says its replica
// cannot serve.
type unusableReplica struct {
	broker int32
	why    string
}

// lagCheck is an active follower whose log end is compared with its
// leader's.
type lagCheck struct {
	follower int32
	// judge is set when the leader's own view of the follower is not
	// available: the comparison decides whether it is in sync.
	judge bool

	lag *int64 // leader log end minus the follower's, nil when unknown
	err error
	// leaderSays is the error the leader last had replicating to it.
	leaderSays string
}

// notInSync reports whether the follower is not in sync, once probed.
func (l *lagCheck) notInSync() bool {
	if l.judge {
		return l.lag != nil && *l.lag != 0
	}
	return true
}

// state is how the follower stands, once probed.
func (l *lagCheck) state() transport.FollowerState {
	switch {
	case l.lag != nil && *l.lag < 0:
		return transport.FollowerDiverged // its log passes the leader's
	case !l.judge:
		return transport.FollowerLagging // the leader says so
	case l.lag == nil:
		return transport.FollowerUnknown
	case *l.lag == 0:
		return transport.FollowerInSync
	}
	return transport.FollowerLagging
}

func (pc *partitionCheck) name() string { return fmt.Sprintf("%s/%d", pc.topic, pc.partition) }

// offPreferred reports whether an online partition is led by another
// replica than its preferred one (the first), which is active and answers.
func (pc *partitionCheck) offPreferred(s *survey) bool {
	if pc.offline || len(pc.p.Replicas) == 0 {
		return false
	}
	pref := pc.p.Replicas[0]
	return pc.p.Leader != pref && slices.Contains(pc.p.Active, pref) && s.reachable(pref)
}

func (pc *partitionCheck) underReplicated() bool {
	if len(pc.inactive) > 0 || len(pc.unreachable) > 0 || len(pc.diverged) > 0 {
		return true
	}
	for _, l := range pc.lags {
		if l.notInSync() {
			return true
		}
	}
	return false
}

// report is the partition's part of the cluster report, once probed.
func (pc *partitionCheck) report(s *survey) PartitionReport {
	pr := PartitionReport{
		Topic: pc.topic, Partition: pc.partition, Leader: pc.p.Leader, LeaderEpoch: pc.p.LeaderEpoch,
		Replicas: slices.Clone(pc.p.Replicas), Active: slices.Clone(pc.p.Active), Inactive: pc.inactive,
		Offline: pc.offline, OfflineReason: pc.offlineWhy, UnderReplicated: pc.underReplicated(), OffPreferred: pc.offPreferred(s),
	}
	if pc.offline {
		return pr
	}
	unusable := map[int32]string{}
	for _, u := range pc.unusable {
		unusable[u.broker] = u.why
	}
	add := func(f FollowerReport) {
		f.Unusable = unusable[f.Broker]
		pr.Followers = append(pr.Followers, f)
	}
	for _, f := range pc.inSync {
		add(FollowerReport{Broker: f, State: transport.FollowerInSync})
	}
	for _, f := range pc.unreachable {
		add(FollowerReport{Broker: f, State: transport.FollowerOffline})
	}
	for _, f := range pc.diverged {
		add(FollowerReport{Broker: f, State: transport.FollowerDiverged})
	}
	for _, l := range pc.lags {
		fr := FollowerReport{Broker: l.follower, State: l.state(), Lag: l.lag, LeaderError: l.leaderSays}
		if l.err != nil {
			fr.LagError = l.err.Error()
		}
		add(fr)
	}
	slices.SortFunc(pr.Followers, func(a, b FollowerReport) int { return int(a.Broker - b.Broker) })
	return pr
}

// checkPartition judges a partition from the survey, leaving lags to probe.
func (s *survey) checkPartition(topic string, partition int32, p metadata.Partition) *partitionCheck {
	pc := &partitionCheck{topic: topic, partition: partition, p: p}
	adding := p.Adding() // replicas a move is copying: not missing
	for _, r := range p.Replicas {
		if !slices.Contains(p.Active, r) && !slices.Contains(adding, r) {
			pc.inactive = append(pc.inactive, r)
		}
	}
	byPartition := fmt.Sprintf("gostream-ctl failover --topic %s --partition %d", topic, partition)
	byBroker := fmt.Sprintf("gostream-ctl failover --broker %d", p.Leader)
	_, registered := s.meta.Broker(p.Leader)
	leaderGossip := s.gossipOf(p.Leader)
	offline := func(why string, w Warning) {
		pc.offline, pc.offlineWhy, pc.offlineWarn = true, why, w
	}
	switch {
	case p.Leader < 0:
		why := "it has no leader"
		offline(why, fixedBy(fmt.Sprintf("partition %s is offline: %s", pc.name(), why), "", byPartition))
	case !registered:
		why := fmt.Sprintf("its leader, broker %d, is not registered", p.Leader)
		offline(why, fixedBy(fmt.Sprintf("partition %s is offline: %s", pc.name(), why), "", byPartition))
	case !s.reachable(p.Leader) && p.Leader == s.meta.ControllerID:
		// No failover runs without the controller; once its node is
		// back, so is this leader.
		why := fmt.Sprintf("its leader, broker %d, is the controller's node, which does not answer (gossip: %s)", p.Leader, leaderGossip)
		offline(why, noCommand(fmt.Sprintf("partition %s: %s", pc.name(), why),
			"restart it; no failover can run without the controller", NoCommandManual, ""))
	case !s.reachable(p.Leader):
		why := fmt.Sprintf("leader broker %d is unreachable (gossip: %s)", p.Leader, leaderGossip)
		offline(why, fixedBy(fmt.Sprintf("partition %s: %s", pc.name(), why), "", byBroker))
	case leaderGossip.Gone():
		why := fmt.Sprintf("gossip says its leader, broker %d, is %s, though it answers", p.Leader, leaderGossip)
		offline(why, fixedBy(fmt.Sprintf("partition %s: %s", pc.name(), why), "fail over only if the broker is really gone", byBroker))
	}
	if why := s.unusable(p.Leader, topic, partition); !pc.offline && why != "" {
		fix := fmt.Sprintf("fail the partition over, then recover broker %d's replica", p.Leader)
		if diskFull(why) {
			fix = fmt.Sprintf("free space on broker %d's disk and it goes on by itself (a failed log resumes within seconds); or fail the partition over", p.Leader)
		}
		what := fmt.Sprintf("its leader, broker %d, answers but its replica cannot lead (%s)", p.Leader, why)
		offline(what, fixedBy(fmt.Sprintf("partition %s: %s", pc.name(), what), fix, byPartition))
	}
	if pc.offline {
		return pc // nobody can say how its followers stand
	}
	for _, f := range p.Active {
		if why := s.unusable(f, topic, partition); f != p.Leader && why != "" {
			pc.unusable = append(pc.unusable, unusableReplica{f, why})
		}
	}
	view, fromLeader := s.leaderView(p.Leader, topic, partition, p.LeaderEpoch)
	for _, f := range p.Active {
		if f == p.Leader {
			continue
		}
		if !s.reachable(f) || s.gossipOf(f).Gone() {
			pc.unreachable = append(pc.unreachable, f)
			continue
		}
		fs, ok := view[f]
		switch {
		case !fromLeader || !ok:
			pc.lags = append(pc.lags, &lagCheck{follower: f, judge: true})
		case fs.State == transport.FollowerInSync:
			pc.inSync = append(pc.inSync, f)
		case fs.State == transport.FollowerDiverged:
			pc.diverged = append(pc.diverged, f)
		default:
			pc.lags = append(pc.lags, &lagCheck{follower: f, leaderSays: fs.Error})
		}
	}
	return pc
}

// probeLags asks the followers and then their leaders for their log ends,
// in parallel. The follower goes first: the leader appends before it
// replicates, so a healthy follower never seems ahead.
func probeLags(ctx context.Context, prober replicaStater, parts []*partitionCheck) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentProbes)
	for _, pc := range parts {
		for _, l := range pc.lags {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				f, err := prober.state(ctx, l.follower, pc.topic, pc.partition)
				if err != nil {
					l.err = fmt.Errorf("follower: %w", err)
					return
				}
				ld, err := prober.state(ctx, pc.p.Leader, pc.topic, pc.partition)
				if err != nil {
					l.err = fmt.Errorf("leader: %w", err)
					return
				}
				lag := ld.LogEndOffset - f.LogEndOffset
				l.lag = &lag
			}()
		}
	}
	wg.Wait()
}

// warnings are the partition's warnings, each with its advice.
func (pc *partitionCheck) warnings() []Warning {
	var out []Warning
	if pc.offline {
		out = append(out, pc.offlineWarn)
	}
	// Replicas outside the active set: inactiveWarnings, per broker.
	unusable := map[int32]bool{}
	for _, u := range pc.unusable {
		unusable[u.broker] = true
		// Each fix names this one replica: failover --broker would also
		// act on the broker's healthy replicas (and refuse them).
		what := fmt.Sprintf("partition %s: its follower on broker %d cannot serve (%s)", pc.name(), u.broker, u.why)
		if diskFull(u.why) {
			out = append(out, fixedBy(what, fmt.Sprintf("writes to the partition fail until space is freed on broker %d (then the replica resumes by itself) "+
				"or it is dropped from the active set; the fix drops it, so that writes go on with the other replicas "+
				"(gostream-ctl failover --broker %d drops each replica of broker %d that reports a full disk), "+
				"and once space is back gostream-ctl recover --broker %d brings it back", u.broker, u.broker, u.broker, u.broker),
				pc.fix("failover", u.broker)))
			continue
		}
		out = append(out, fixedBy(what, "writes to the partition fail until it is dropped; the fix drops it and rebuilds it from the leader",
			rebuildCommand(pc.topic, pc.partition, u.broker)))
	}
	for _, f := range pc.diverged {
		out = append(out, fixedBy(fmt.Sprintf("partition %s: follower %d diverged from its leader", pc.name(), f),
			"writes to the partition fail until it is dropped; the fix drops it, cuts what it holds that the leader does not, and rebuilds it",
			rebuildCommand(pc.topic, pc.partition, f)))
	}
	for _, l := range pc.lags {
		var what string
		switch {
		case unusable[l.follower]:
			continue // its own node's word, above, says why and what fixes it
		case l.judge && (l.lag == nil || *l.lag == 0):
			continue // in sync, or unknown both ways: nothing to act on
		case l.lag == nil:
			what = fmt.Sprintf("partition %s: follower %d lags; by how much is unknown (%v)", pc.name(), l.follower, l.err)
		case *l.lag < 0:
			// Its log passes the leader's: catch-up would refuse it.
			out = append(out, fixedBy(fmt.Sprintf("partition %s: follower %d is %s ahead of its leader: it diverged", pc.name(), l.follower, plural(int(-*l.lag), "record")),
				"", rebuildCommand(pc.topic, pc.partition, l.follower)))
			continue
		case *l.lag == 0:
			what = fmt.Sprintf("partition %s: follower %d has its leader's log end, but the leader has not confirmed it in sync", pc.name(), l.follower)
		default:
			what = fmt.Sprintf("partition %s: follower %d lags by %s", pc.name(), l.follower, plural(int(*l.lag), "record"))
		}
		switch {
		case diskFull(l.leaderSays):
			// Catch-up cannot help before space is back; then it is automatic.
			out = append(out, noCommand(what+fmt.Sprintf(": broker %d's disk is full (%s)", l.follower, l.leaderSays),
				"free space on it, and the follower catches up by itself", NoCommandResumes, ""))
		case l.leaderSays != "":
			out = append(out, fixedBy(what+" (the leader's last error replicating to it: "+l.leaderSays+")", "", pc.fix("catch-up", l.follower)))
		default:
			out = append(out, fixedBy(what, "", pc.fix("catch-up", l.follower)))
		}
	}
	return out
}

// fix is the command that runs op (catch-up, failover, recover) on
// broker's replica of the partition.
func (pc *partitionCheck) fix(op string, broker int32) string {
	return replicaCommand(op, pc.topic, pc.partition, broker)
}

// replicaCommand is gostream-ctl op for broker's replica of a partition.
func replicaCommand(op, topic string, partition, broker int32) string {
	return fmt.Sprintf("gostream-ctl %s --topic %s --partition %d --broker %d", op, topic, partition, broker)
}

// rebuildCommand is the gostream-ctl command line that rebuilds broker's
// replica of a partition when it is active but cannot be trusted
// (damaged, diverged): recover refuses an active replica, so it is dropped
// from the active set first, then cut to the leader's log and copied.
func rebuildCommand(topic string, partition, broker int32) string {
	return replicaCommand("failover", topic, partition, broker) + " && " + replicaCommand("recover", topic, partition, broker)
}

// diskFull reports whether an error a node reported is a full disk, which
// clears by itself once space is freed.
func diskFull(why string) bool {
	return strings.Contains(why, "NoSpace") || strings.Contains(why, "no space left")
}
