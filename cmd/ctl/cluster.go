package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
)

// maxDialTimeout bounds opening one connection, below --timeout when that
// is longer, so that one unreachable bootstrap address leaves time to try
// the next.
const maxDialTimeout = 5 * time.Second

// connect returns a Client of the cluster that --bootstrap names, once one
// of its addresses has answered, or an error named for the failure
// (BrokerNotAvailable, Timeout, ...). Every request of the Client is bounded
// by --timeout, and so are the retries of a call made without a deadline
// of its own. The caller closes it.
func connect(ctx context.Context, g globals) (*client.Client, error) {
	cl, err := client.New(ctx, client.Config{
		Bootstrap:      g.bootstrap,
		RequestTimeout: g.timeout,
		DialTimeout:    min(g.timeout, maxDialTimeout),
		RetryTimeout:   g.timeout,
	})
	if err != nil {
		return nil, failed(err)
	}
	return cl, nil
}

// withClient runs fn with a Client under --timeout, for the commands that
// make a few requests and are done: --timeout bounds the whole command.
func withClient(c *cli.Context, fn func(ctx context.Context, cl *client.Client, g globals) error) error {
	g := globalsOf(c)
	ctx, cancel := context.WithTimeout(c.Context, g.timeout)
	defer cancel()
	cl, err := connect(ctx, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	return failed(fn(ctx, cl, g))
}

func clusterCommand() *cli.Command {
	return parent("cluster", "the cluster as a whole",
		leaf("status", "controller, brokers, partition health, and warnings with the command that fixes each",
			"", args(0, 0), clusterStatusAction),
		leaf("history", "the audit trail of failovers and recoveries, oldest first",
			"", args(0, 0), clusterHistoryAction),
		leaf("restore-metadata", "make the controller adopt the newest copy of the metadata the brokers hold, when its own is missing or older than theirs",
			"", args(0, 0), restoreMetadataAction,
			intFlag("from-broker", "adopt broker `B`'s copy instead of the newest"),
			&cli.BoolFlag{Name: "dry-run", Usage: "print every copy and what would change, and change nothing"},
		),
	)
}

func restoreMetadataAction(c *cli.Context) error {
	from := c.Int("from-broker")
	if c.IsSet("from-broker") && (from < 1 || from > math.MaxInt32) {
		return exitcode.Usagef("InvalidFlag", "--from-broker %d: want a broker id, a positive number", from)
	}
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		rep, err := cl.RestoreMetadata(ctx, client.RestoreRequest{FromBroker: int32(from), DryRun: dry, Requester: requester()})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			return writeJSON(w, rep)
		}
		return printRestore(w, rep)
	})
}

func printRestore(w io.Writer, rep client.RestoreReport) error {
	switch {
	case rep.Missing:
		fmt.Fprintln(w, "The controller's metadata file is missing.")
	default:
		fmt.Fprintf(w, "The controller's metadata is at epoch %d.\n", rep.ControllerEpoch)
	}
	if rep.Refused != "" {
		fmt.Fprintf(w, "It refuses every change: %s\n", rep.Refused)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tEPOCH\tTOPICS\tCHOSEN\tNOTE")
	for _, s := range rep.Sources {
		epoch := "?"
		if s.Answered && s.Epoch >= 0 {
			epoch = fmt.Sprint(s.Epoch)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", s.Broker, s.Address, epoch, s.Topics, yesNo(s.Chosen), s.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	verb := "Adopted"
	if rep.DryRun {
		verb = "Dry run: nothing was changed. Would adopt"
	}
	for _, s := range rep.Sources {
		if s.Chosen {
			fmt.Fprintf(w, "%s broker %d's copy as epoch %d.\n", verb, s.Broker, rep.NewEpoch)
		}
	}
	if len(rep.TopicsGained) > 0 {
		fmt.Fprintf(w, "Topics the controller gets back: %s\n", strings.Join(rep.TopicsGained, ", "))
	}
	if len(rep.TopicsLost) > 0 {
		fmt.Fprintf(w, "Topics only the controller's copy has (gone from the adopted one): %s\n", strings.Join(rep.TopicsLost, ", "))
	}
	return nil
}

func brokerCommand() *cli.Command {
	return parent("broker", "brokers",
		leaf("list", "brokers with addresses and states", "", args(0, 0), brokerListAction),
		leaf("replace", "accept a new storage root for broker ID, whose disk is lost: fail over what it leads, drop it everywhere; then start the new node and run recover --broker ID",
			"ID", args(1, 1), brokerReplaceAction,
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would change, and change nothing"},
		),
	)
}

// Registration states of a broker: in the controller's metadata, or only
// seen in gossip.
const (
	stateRegistered   = "registered"
	stateUnregistered = "unregistered"
)

// brokerStatus is one broker as cluster status and broker list show it.
type brokerStatus struct {
	ID         int32  `json:"id"`
	Address    string `json:"address"`
	Registered string `json:"registered"`
	// Gossip is the broker's gossip state as the controller sees it, or as
	// most answering brokers see it when the controller does not answer.
	Gossip string `json:"gossip"`

	// answers is whether the broker answered the survey (tables only: the
	// JSON of docs/cli.md has no field for it; warnings say it).
	answers bool
}

// clusterStatus is what cluster status prints (docs/cli.md).
type clusterStatus struct {
	Controller int32           `json:"controller"`
	Brokers    []brokerStatus  `json:"brokers"`
	Partitions partitionHealth `json:"partitions"`
	Warnings   []warning       `json:"warnings"`

	gossipFrom string // whose view Gossip is, for tables
}

type partitionHealth struct {
	Total           int `json:"total"`
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
}

// warning is something an operator should act on, with the command that
// does it when there is one.
type warning struct {
	Message string `json:"message"`
	Command string `json:"command,omitempty"`
}

func clusterStatusAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		s, err := surveyCluster(ctx, cl, g, true)
		if err != nil {
			return err
		}
		st := statusOf(ctx, s, newReplicaProber(cl, g))
		w := c.App.Writer
		if g.output == outputJSON {
			return writeJSON(w, st)
		}
		answers := "answers"
		if !s.controllerAnswered() {
			answers = "does not answer"
		}
		fmt.Fprintf(w, "Controller: broker %d (%s)\n\n", st.Controller, answers)
		if err := printBrokers(w, st.Brokers, st.Controller); err != nil {
			return err
		}
		fmt.Fprintf(w, "Gossip states as seen by %s.\n", st.gossipFrom)
		fmt.Fprintf(w, "\nPartitions: %d total, %d under-replicated, %d offline\n",
			st.Partitions.Total, st.Partitions.UnderReplicated, st.Partitions.Offline)
		if len(st.Warnings) == 0 {
			fmt.Fprintln(w, "\nNo warnings.")
			return nil
		}
		fmt.Fprintln(w, "\nWarnings:")
		for _, wn := range st.Warnings {
			fmt.Fprintf(w, "  - %s\n", wn.Message)
			if wn.Command != "" {
				fmt.Fprintf(w, "    fix: %s\n", wn.Command)
			}
		}
		return nil
	})
}

// brokerList is what broker list -o json prints.
type brokerList struct {
	Controller int32          `json:"controller"`
	Brokers    []brokerStatus `json:"brokers"`
}

func brokerListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		s, err := surveyCluster(ctx, cl, g, false)
		if err != nil {
			return err
		}
		brokers := brokerStatuses(s)
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, brokerList{Controller: s.meta.ControllerID, Brokers: brokers})
		}
		if err := printBrokers(c.App.Writer, brokers, s.meta.ControllerID); err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "Gossip states as seen by %s.\n", s.gossipFrom)
		return err
	})
}

func printBrokers(w io.Writer, brokers []brokerStatus, controller int32) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tADDRESS\tREGISTERED\tGOSSIP\tRPC\tROLE")
	for _, b := range brokers {
		role := "broker"
		if b.ID == controller {
			role = "controller"
		}
		rpc := "answers"
		if !b.answers {
			rpc = "unreachable"
		}
		addr := b.Address
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", b.ID, addr, b.Registered, b.Gossip, rpc, role)
	}
	return tw.Flush()
}

// brokerStatuses lists the registered brokers, then the gossip members
// that are not registered, by id.
func brokerStatuses(s *survey) []brokerStatus {
	out := make([]brokerStatus, 0, len(s.meta.Brokers))
	for _, b := range s.meta.Brokers {
		out = append(out, brokerStatus{ID: b.ID, Address: b.Addr, Registered: stateRegistered, Gossip: s.gossipOf(b.ID), answers: s.reachable(b.ID)})
	}
	for _, id := range sortedKeys(s.unregisteredMembers()) {
		out = append(out, brokerStatus{ID: id, Registered: stateUnregistered, Gossip: s.gossipOf(id)})
	}
	slices.SortFunc(out, func(a, b brokerStatus) int { return int(a.ID - b.ID) })
	return out
}

// statusOf judges the cluster from a survey. Brokers come first: one that
// does not answer, or that gossip says is gone, gets a warning. Then every
// partition:
//
//   - offline: it has no leader, or its leader is not registered, does not
//     answer, or is dead or gone by gossip;
//   - under-replicated: its active set is smaller than its replicas, or an
//     active follower is not in sync: it does not answer or is gone by
//     gossip, or its leader reports it lagging or diverged (from the
//     leader's GET /api/status; when that is not available, by comparing
//     the replicas' log ends).
//
// A lagging follower's lag is its leader's log end minus its own, both
// asked with ReplicaState after the survey.
func statusOf(ctx context.Context, s *survey, prober replicaStater) clusterStatus {
	st := clusterStatus{
		Controller: s.meta.ControllerID, Brokers: brokerStatuses(s), Warnings: []warning{},
		gossipFrom: s.gossipFrom,
	}
	st.Warnings = append(st.Warnings, brokerWarnings(s, st.Brokers)...)

	var parts []*partitionCheck
	for _, t := range s.meta.Topics {
		for i, p := range t.Partitions {
			parts = append(parts, checkPartition(s, t.Name, int32(i), p))
		}
	}
	probeLags(ctx, prober, parts)
	inactive := map[int32][]string{} // broker -> partitions whose replica on it is not active
	offPreferred := 0
	for _, pc := range parts {
		st.Partitions.Total++
		if pc.offline {
			st.Partitions.Offline++
		}
		if pc.underReplicated() {
			st.Partitions.UnderReplicated++
		}
		for _, b := range pc.inactive {
			inactive[b] = append(inactive[b], pc.name())
		}
		if pc.offPreferred(s) {
			offPreferred++
		}
		st.Warnings = append(st.Warnings, pc.warnings()...)
	}
	st.Warnings = append(st.Warnings, inactiveWarnings(s, inactive)...)
	if len(st.Warnings) == 0 && offPreferred > 0 {
		// Only on an otherwise healthy cluster: a move needs every
		// preferred replica active and answering.
		st.Warnings = append(st.Warnings, warning{
			Message: fmt.Sprintf("%s led by another replica than the preferred one (a failover moves leadership, and it stays where it went) — move it back", plural(offPreferred, "partition")),
			Command: "gostream-ctl elect-leaders",
		})
	}
	// One command, given once: the first warning that needs it carries it.
	given := map[string]bool{}
	for i, w := range st.Warnings {
		if w.Command == "" {
			continue
		}
		if given[w.Command] {
			st.Warnings[i].Message += " — the fix above (" + w.Command + ") covers it"
			st.Warnings[i].Command = ""
		}
		given[w.Command] = true
	}
	if !s.controllerAnswered() {
		// Every fix is an admin command, and the controller carries those
		// out: none works until it is back.
		for i, w := range st.Warnings {
			if w.Command != "" {
				st.Warnings[i].Message += fmt.Sprintf(" — admin commands wait for the controller, broker %d: once it is back, run: %s", s.meta.ControllerID, w.Command)
				st.Warnings[i].Command = ""
			}
		}
	}
	return st
}

// inactiveWarnings are the warnings about replicas outside their
// partition's active set, one per broker: recover --broker brings all of a
// broker's replicas back at once, once the broker runs.
func inactiveWarnings(s *survey, inactive map[int32][]string) []warning {
	var out []warning
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
			out = append(out, warning{Message: what + fmt.Sprintf(" — broker %d is not registered: start it (or replace it: gostream-ctl broker replace %d), then run: %s", b, b, recover)})
		case !s.reachable(b) || gone(s.gossipOf(b)):
			out = append(out, warning{Message: what + fmt.Sprintf(" — broker %d does not answer: start it first, then run: %s", b, recover)})
		default:
			out = append(out, warning{Message: what + " — recover brings " + them + " back", Command: recover})
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

// brokerWarnings are the warnings about brokers themselves.
func brokerWarnings(s *survey, brokers []brokerStatus) []warning {
	var out []warning
	ctrl := s.meta.ControllerID
	if _, ok := s.meta.Broker(ctrl); !ok {
		out = append(out, warning{
			Message: fmt.Sprintf("the controller, broker %d, is not among the registered brokers — check the nodes' --controller flags", ctrl),
		})
	}
	if v := s.views[ctrl]; v.answered() && v.controllerRefusal != "" {
		out = append(out, warning{
			Message: "the controller refuses every change: " + v.controllerRefusal,
			Command: "gostream-ctl cluster restore-metadata --dry-run",
		})
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
			if seen[m.Gossip+m.RootID] || gone(m.State) {
				continue
			}
			seen[m.Gossip+m.RootID] = true
			out = append(out, warning{Message: fmt.Sprintf(
				"another process claims broker id %d in gossip (at %s, storage root %s); the controller refuses it — stop it, or give it its own --id", m.BrokerID, m.Gossip, m.RootID)})
		}
	}
	for _, b := range brokers {
		failover := fmt.Sprintf("gostream-ctl failover --broker %d", b.ID)
		if !b.answers && b.ID != ctrl && b.Registered == stateRegistered && !activeAnywhere(s.meta, b.ID) {
			// Failed over already: nothing waits for it, and failover
			// would find nothing to do.
			out = append(out, warning{Message: fmt.Sprintf(
				"broker %d does not answer (gossip: %s); it is in no active set, so nothing waits for it — start it again, then run: gostream-ctl recover --broker %d", b.ID, b.Gossip, b.ID)})
			continue
		}
		switch {
		case b.Registered != stateRegistered:
			if !gone(b.Gossip) {
				out = append(out, warning{Message: fmt.Sprintf(
					"broker %d is in gossip but not registered with the controller — check its log (a refused registration says why) and its --controller flag", b.ID)})
			}
		case b.ID == ctrl && !b.answers:
			out = append(out, warning{Message: fmt.Sprintf(
				"the controller, broker %d, does not answer (gossip: %s) — admin commands fail until it is back; produce and consume go on; restart it", b.ID, b.Gossip)})
		case gone(b.Gossip) && !b.answers:
			out = append(out, warning{
				Message: fmt.Sprintf("broker %d is registered but gossip says %s and it does not answer — check the process; if it is gone for good, fail it over", b.ID, b.Gossip),
				Command: failover,
			})
		case gone(b.Gossip):
			out = append(out, warning{Message: fmt.Sprintf(
				"broker %d answers but gossip says %s — check its gossip address and that TCP and UDP pass between the nodes", b.ID, b.Gossip)})
		case !b.answers:
			out = append(out, warning{
				Message: fmt.Sprintf("broker %d is registered but does not answer (gossip: %s) — check the process and its RPC address %s; if it is gone for good, fail it over", b.ID, b.Gossip, b.Address),
				Command: failover,
			})
		case b.Gossip == gossipSuspect:
			out = append(out, warning{Message: fmt.Sprintf(
				"gossip suspects broker %d, which answers — check the network between the nodes", b.ID)})
		case s.disputed[b.ID]:
			out = append(out, warning{Message: fmt.Sprintf(
				"the answering brokers disagree on broker %d's gossip state — check the network between the nodes", b.ID)})
		case b.Gossip == gossipUnknown && gossipKnown:
			out = append(out, warning{Message: fmt.Sprintf(
				"gossip does not know broker %d, which answers — check its --gossip address and --join seeds", b.ID)})
		}
	}
	return out
}

// partitionCheck is what cluster status found out about one partition.
type partitionCheck struct {
	topic     string
	partition int32
	p         metadata.Partition

	offline     bool
	offlineWarn warning
	inactive    []int32 // replicas outside the active set
	unreachable []int32 // active followers that do not answer or are gone
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

func (pc *partitionCheck) name() string { return fmt.Sprintf("%s/%d", pc.topic, pc.partition) }

// offPreferred reports whether a healthy partition is led by another
// replica than its preferred one (the first), which is active and answers.
func (pc *partitionCheck) offPreferred(s *survey) bool {
	if pc.offline || len(pc.p.Replicas) == 0 {
		return false
	}
	pref := pc.p.Replicas[0]
	return pc.p.Leader != pref && slices.Contains(pc.p.Active, pref) && s.reachable(pref)
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

// checkPartition judges a partition from the survey, leaving lags to probe.
func checkPartition(s *survey, topic string, partition int32, p metadata.Partition) *partitionCheck {
	pc := &partitionCheck{topic: topic, partition: partition, p: p}
	for _, r := range p.Replicas {
		if !slices.Contains(p.Active, r) {
			pc.inactive = append(pc.inactive, r)
		}
	}
	byPartition := fmt.Sprintf("gostream-ctl failover --topic %s --partition %d", topic, partition)
	byBroker := fmt.Sprintf("gostream-ctl failover --broker %d", p.Leader)
	_, registered := s.meta.Broker(p.Leader)
	leaderGossip := s.gossipOf(p.Leader)
	switch {
	case p.Leader < 0:
		pc.offline = true
		pc.offlineWarn = warning{Message: fmt.Sprintf("partition %s is offline: it has no leader", pc.name()), Command: byPartition}
	case !registered:
		pc.offline = true
		pc.offlineWarn = warning{Message: fmt.Sprintf("partition %s is offline: its leader, broker %d, is not registered", pc.name(), p.Leader), Command: byPartition}
	case !s.reachable(p.Leader) && p.Leader == s.meta.ControllerID:
		// No failover runs without the controller; once its node is
		// back, so is this leader.
		pc.offline = true
		pc.offlineWarn = warning{Message: fmt.Sprintf(
			"partition %s: its leader, broker %d, is the controller's node, which does not answer (gossip: %s) — restart it; no failover can run without the controller",
			pc.name(), p.Leader, leaderGossip)}
	case !s.reachable(p.Leader):
		pc.offline = true
		pc.offlineWarn = warning{Message: fmt.Sprintf("partition %s: leader broker %d is unreachable (gossip: %s)", pc.name(), p.Leader, leaderGossip), Command: byBroker}
	case gone(leaderGossip):
		pc.offline = true
		pc.offlineWarn = warning{Message: fmt.Sprintf(
			"partition %s: gossip says its leader, broker %d, is %s, though it answers — fail over only if the broker is really gone", pc.name(), p.Leader, leaderGossip), Command: byBroker}
	}
	if why := s.statusOf(p.Leader).unusable(topic, partition); !pc.offline && why != "" {
		pc.offline = true
		fix := fmt.Sprintf("fail the partition over, then recover broker %d's replica", p.Leader)
		if diskFull(why) {
			fix = fmt.Sprintf("free space on broker %d's disk and it goes on by itself (a failed log resumes within seconds); or fail the partition over", p.Leader)
		}
		pc.offlineWarn = warning{Message: fmt.Sprintf(
			"partition %s: its leader, broker %d, answers but its replica cannot lead (%s) — %s", pc.name(), p.Leader, why, fix),
			Command: byPartition}
	}
	if pc.offline {
		return pc // nobody can say how its followers stand
	}
	for _, f := range p.Active {
		if why := s.statusOf(f).unusable(topic, partition); f != p.Leader && why != "" {
			pc.unusable = append(pc.unusable, unusableReplica{f, why})
		}
	}
	view, fromLeader := s.views[p.Leader].status.followers(topic, partition, p.LeaderEpoch)
	for _, f := range p.Active {
		if f == p.Leader {
			continue
		}
		if !s.reachable(f) || gone(s.gossipOf(f)) {
			pc.unreachable = append(pc.unreachable, f)
			continue
		}
		fs, ok := view[f]
		switch {
		case !fromLeader || !ok:
			pc.lags = append(pc.lags, &lagCheck{follower: f, judge: true})
		case fs.State == followerInSync:
		case fs.State == followerDiverged:
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

// warnings are the partition's warnings, each with the command that fixes
// it.
func (pc *partitionCheck) warnings() []warning {
	var out []warning
	if pc.offline {
		out = append(out, pc.offlineWarn)
	}
	// Replicas outside the active set: inactiveWarnings, per broker.
	for _, u := range pc.unusable {
		// Each fix names this one replica: failover --broker would also
		// act on the broker's healthy replicas (and refuse them).
		if diskFull(u.why) {
			out = append(out, warning{
				Message: fmt.Sprintf("partition %s: its follower on broker %d cannot serve (%s) — writes to the partition fail until space is freed on broker %d, "+
					"then the replica resumes by itself; to take writes meanwhile, drop it with: %s", pc.name(), u.broker, u.why, u.broker, pc.fix("failover", u.broker)),
			})
			continue
		}
		out = append(out, warning{
			Message: fmt.Sprintf("partition %s: its follower on broker %d cannot serve (%s) — writes to the partition fail until it is dropped; "+
				"the fix drops it and rebuilds it from the leader", pc.name(), u.broker, u.why),
			Command: rebuildCommand(pc.topic, pc.partition, u.broker),
		})
	}
	for _, f := range pc.diverged {
		out = append(out, warning{
			Message: fmt.Sprintf("partition %s: follower %d diverged from its leader — writes to the partition fail until it is dropped; the fix drops it, cuts what it holds that the leader does not, and rebuilds it", pc.name(), f),
			Command: rebuildCommand(pc.topic, pc.partition, f),
		})
	}
	for _, l := range pc.lags {
		var w warning
		switch {
		case l.judge && (l.lag == nil || *l.lag == 0):
			continue // in sync, or unknown both ways: nothing to act on
		case l.lag == nil:
			w.Message = fmt.Sprintf("partition %s: follower %d lags; by how much is unknown (%v)", pc.name(), l.follower, l.err)
		case *l.lag < 0:
			// Its log passes the leader's: catch-up would refuse it.
			out = append(out, warning{
				Message: fmt.Sprintf("partition %s: follower %d is %d records ahead of its leader: it diverged", pc.name(), l.follower, -*l.lag),
				Command: rebuildCommand(pc.topic, pc.partition, l.follower),
			})
			continue
		case *l.lag == 0:
			w.Message = fmt.Sprintf("partition %s: follower %d has its leader's log end, but the leader has not confirmed it in sync", pc.name(), l.follower)
		default:
			w.Message = fmt.Sprintf("partition %s: follower %d lags by %d records", pc.name(), l.follower, *l.lag)
		}
		w.Command = pc.fix("catch-up", l.follower)
		if diskFull(l.leaderSays) {
			// Catch-up cannot help before space is back; then it is automatic.
			w.Message += fmt.Sprintf(": broker %d's disk is full (%s) — free space on it, and the follower catches up by itself", l.follower, l.leaderSays)
			w.Command = ""
		} else if l.leaderSays != "" {
			w.Message += " (the leader's last error replicating to it: " + l.leaderSays + ")"
		}
		out = append(out, w)
	}
	return out
}

// fix is the command that runs op (catch-up, recover) on broker's replica
// of the partition.
func (pc *partitionCheck) fix(op string, broker int32) string {
	return replicaCommand(op, pc.topic, pc.partition, broker)
}

// replicaCommand is gostream-ctl op for broker's replica of a partition.
func replicaCommand(op, topic string, partition, broker int32) string {
	return fmt.Sprintf("gostream-ctl %s --topic %s --partition %d --broker %d", op, topic, partition, broker)
}

// rebuildCommand is the fix for an active replica that cannot be trusted
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
