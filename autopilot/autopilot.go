package autopilot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/client"
	"gostream/transport"
)

// Cluster is what the autopilot needs of a cluster: a *client.Client.
type Cluster interface {
	ClusterStatus(ctx context.Context) (client.ClusterReport, error)
	Failover(ctx context.Context, req client.FailoverRequest) (client.ChangeReport, error)
	Recover(ctx context.Context, req client.RecoverRequest) (client.ChangeReport, error)
	ElectLeaders(ctx context.Context, req client.ElectLeadersRequest) (client.ChangeReport, error)
	AutopilotLease(ctx context.Context, req client.AutopilotLeaseRequest) (client.AutopilotLeaseResponse, error)
}

// State is a broker's state as the autopilot sees it (docs/autopilot.md).
type State string

// The states of a broker.
const (
	// StateAnswering: it answers, its replicas are active, and the
	// partitions it is the preferred replica of are led by it.
	StateAnswering State = "answering"
	// StateSilent: no answer to the direct probe, or gone by gossip, and
	// still in some partition's active set.
	StateSilent State = "silent"
	// StateFailedOver: silent, and in no active set: nothing waits for it.
	StateFailedOver State = "failed-over"
	// StateReturning: it answers again and holds replicas outside their
	// active sets.
	StateReturning State = "returning"
	// StateRecovered: it answers with every replica active, but
	// partitions it is the preferred replica of are led elsewhere.
	StateRecovered State = "recovered"
)

var allStates = []State{StateAnswering, StateSilent, StateFailedOver, StateReturning, StateRecovered}

// Kinds of action.
const (
	kindFailover     = "failover"
	kindRecover      = "recover"
	kindElectLeaders = "elect-leaders"
)

// defaultCommandTimeout bounds a poll's survey and each command when
// Config.CommandTimeout is not set.
const defaultCommandTimeout = time.Minute

// Config is an autopilot's configuration.
type Config struct {
	Cluster Cluster
	Policy  Policy
	// Name names this autopilot: the holder of its lease, and the
	// requester of every command it runs (cluster history shows it).
	Name string
	// DryRun logs what the autopilot would run and runs nothing; it
	// takes no lease.
	DryRun bool
	Logger hclog.Logger
	// Metrics, when set, are updated at every poll and action.
	Metrics *Metrics
	// CommandTimeout bounds each poll's survey and each command (default
	// a minute).
	CommandTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Autopilot watches a cluster and acts by its policy. Run owns it: it is
// not for concurrent use.
type Autopilot struct {
	cfg Config
	log hclog.Logger
	m   *Metrics

	// leaseUntil is when this autopilot's lease runs out by its own
	// count (from when it sent the renewal that granted it); zero when it
	// does not hold it. holder is the holder the controller last named.
	leaseUntil time.Time
	holder     string
	leaseErr   string

	brokers map[int32]*track
	// crowdSince is the start of the first poll of a run of polls that
	// found half of the brokers or more silent (or none answering).
	crowdSince time.Time
	// wholeSince is the start of the first poll of a run that found no
	// broker silent or returning and some partition off its preferred
	// replica.
	wholeSince time.Time
	// failures counts the consecutive failures of a command, by action
	// key, while its reason holds.
	failures map[string]int
	// said holds lines logged once while their reason holds, by line key,
	// with the key of the reason.
	said map[string]string
	// checkedFor is the cluster size the policy was last checked for.
	checkedFor int
}

// track is what the autopilot remembers of one broker.
type track struct {
	silentSince    time.Time
	returningSince time.Time
}

// action is one command to run, and why.
type action struct {
	kind   string
	broker int32 // 0 for elect-leaders
	reason string
}

func (a action) key() string {
	if a.broker == 0 {
		return a.kind
	}
	return fmt.Sprintf("%s %d", a.kind, a.broker)
}

// command is the gostream-ctl command line an operator would type.
func (a action) command() string {
	if a.broker == 0 {
		return "gostream-ctl " + a.kind
	}
	return fmt.Sprintf("gostream-ctl %s --broker %d", a.kind, a.broker)
}

// New returns an autopilot of cfg, once its policy is valid (for a
// cluster of up to 9 brokers; Run checks it again for the cluster's
// size). Its errors match ErrInvalidPolicy.
func New(cfg Config) (*Autopilot, error) {
	if err := cfg.Policy.Validate(1); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: an autopilot needs a name", ErrInvalidPolicy)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = defaultCommandTimeout
	}
	return &Autopilot{cfg: cfg, log: cfg.Logger, m: cfg.Metrics, brokers: map[int32]*track{}, failures: map[string]int{}, said: map[string]string{}}, nil
}

func (a *Autopilot) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// Run polls the cluster every PollInterval and acts, until ctx ends
// (then it gives its lease back and returns nil) or something calls for
// a person: an error matching ErrCommandFailedTwice or
// ErrMostBrokersSilent (or ErrInvalidPolicy, for a cluster too large for
// the grace period). A command under way when ctx ends is finished.
func (a *Autopilot) Run(ctx context.Context) error {
	a.log.Info("started", "name", a.cfg.Name, "policy", a.cfg.Policy.String(), "dry_run", a.cfg.DryRun)
	defer a.giveBack()
	t := time.NewTicker(a.cfg.Policy.PollInterval)
	defer t.Stop()
	for {
		if err := a.poll(ctx); err != nil {
			a.log.Error("stopped: a person must look", "err", err)
			return err
		}
		select {
		case <-ctx.Done():
			a.log.Info("stopped")
			return nil
		case <-t.C:
		}
	}
}

// poll looks at the cluster once and runs what is due.
func (a *Autopilot) poll(ctx context.Context) error {
	start := a.now()
	a.renew(ctx)
	sctx, cancel := context.WithTimeout(ctx, a.cfg.CommandTimeout)
	rep, err := a.cfg.Cluster.ClusterStatus(sctx)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		a.m.polls.WithLabelValues(resultFailed).Inc()
		return a.crowd(start, fmt.Sprintf("no broker answers this autopilot (%v)", err))
	}
	a.m.polls.WithLabelValues(resultOK).Inc()
	a.m.lastPoll.Set(float64(a.now().UnixNano()) / 1e9)
	registered := 0
	for _, b := range rep.Brokers {
		if b.Registered {
			registered++
		}
	}
	if registered >= 10 && registered != a.checkedFor {
		if err := a.cfg.Policy.Validate(registered); err != nil {
			return err
		}
		a.checkedFor = registered
	}
	silent := a.observe(rep, start)
	a.m.silent.Set(float64(len(silent)))
	if registered > 0 && 2*len(silent) >= registered {
		return a.crowd(start, fmt.Sprintf("%d of %d brokers are silent at once (%s)", len(silent), registered, ids(silent)))
	}
	if !a.crowdSince.IsZero() {
		a.log.Info("fewer than half of the brokers are silent again: acting again", "silent", ids(silent))
		a.crowdSince = time.Time{}
	}
	for _, act := range a.plan(rep, silent, start) {
		if err := a.act(ctx, act); err != nil {
			return err
		}
	}
	return nil
}

// crowd handles a poll that found half of the brokers or more silent, or
// none answering: it acts on nothing, and once that has lasted the grace
// period it stops.
func (a *Autopilot) crowd(start time.Time, what string) error {
	if a.crowdSince.IsZero() {
		a.crowdSince = start
		a.log.Warn("acting on nothing: "+what+": a network problem more likely than dead brokers", "stops_after", a.cfg.Policy.FailoverAfter)
	}
	if d := start.Sub(a.crowdSince); d >= a.cfg.Policy.FailoverAfter {
		return fmt.Errorf("%w: %s, for %s: brokers do not die by the half at once, networks fail (a switch, a partition, this autopilot's own link); "+
			"failing over would hand leadership to the wrong side, so nothing was failed over. Look at the network, then start the autopilot again",
			ErrMostBrokersSilent, what, d.Round(time.Millisecond))
	}
	return nil
}

// observe updates what the autopilot remembers of each registered
// broker and returns the silent ones, by id.
func (a *Autopilot) observe(rep client.ClusterReport, start time.Time) []int32 {
	var silent []int32
	seen := map[int32]bool{}
	for _, b := range rep.Brokers {
		if !b.Registered {
			continue
		}
		seen[b.ID] = true
		tr := a.brokers[b.ID]
		if tr == nil {
			tr = &track{}
			a.brokers[b.ID] = tr
		}
		if !b.Answers || b.Gossip.Gone() {
			silent = append(silent, b.ID)
			if tr.silentSince.IsZero() {
				tr.silentSince = start
				a.log.Info("broker silent", "broker", b.ID, "why", silence(b))
			}
			continue
		}
		if !tr.silentSince.IsZero() {
			a.log.Info("broker answers again", "broker", b.ID, "silent_for", start.Sub(tr.silentSince).Round(time.Millisecond), "gossip", b.Gossip)
			tr.silentSince = time.Time{}
		}
	}
	for id := range a.brokers {
		if !seen[id] {
			delete(a.brokers, id)
		}
	}
	return silent
}

// silence says why a broker counts as silent.
func silence(b client.BrokerReport) string {
	if !b.Answers {
		return fmt.Sprintf("does not answer (gossip: %s)", b.Gossip)
	}
	return fmt.Sprintf("gossip says %s, though it answers", b.Gossip)
}

// plan decides each broker's state and what is due now.
func (a *Autopilot) plan(rep client.ClusterReport, silent []int32, start time.Time) []action {
	p := a.cfg.Policy
	active, inactive, preferredOff := map[int32]bool{}, map[int32]int{}, map[int32]bool{}
	offPreferred := 0
	for _, pr := range rep.Partitions {
		for _, b := range pr.Active {
			active[b] = true
		}
		for _, b := range pr.Inactive {
			inactive[b]++
		}
		if pr.OffPreferred && len(pr.Replicas) > 0 {
			offPreferred++
			preferredOff[pr.Replicas[0]] = true
		}
	}
	holds := map[string]bool{}
	if !rep.ControllerAnswers {
		holds["controller"] = true
	}
	counts := map[State]int{}
	returning := 0
	var acts []action
	for _, b := range rep.Brokers {
		tr := a.brokers[b.ID]
		if !b.Registered || tr == nil {
			continue
		}
		switch {
		case !tr.silentSince.IsZero():
			tr.returningSince = time.Time{}
			if !active[b.ID] {
				counts[StateFailedOver]++
				continue
			}
			counts[StateSilent]++
			act := action{kind: kindFailover, broker: b.ID}
			holds[act.key()] = true
			d := start.Sub(tr.silentSince)
			if d < p.FailoverAfter {
				continue
			}
			if !b.Answers && b.Gossip == transport.GossipAlive {
				a.once(act.key()+" alive", act.key(), "broker does not answer, but gossip sees it alive: not failing it over (check the network between this autopilot and it)",
					"broker", b.ID, "silent_for", d.Round(time.Millisecond))
				continue
			}
			if !rep.ControllerAnswers {
				a.controllerDown(rep.Controller)
				continue
			}
			act.reason = fmt.Sprintf("broker %d silent for %s (since %s; grace %s): %s", b.ID, d.Round(100*time.Millisecond),
				tr.silentSince.Format("15:04:05.000"), p.FailoverAfter, silence(b))
			acts = append(acts, act)
		case inactive[b.ID] > 0:
			counts[StateReturning]++
			returning++
			if b.Gossip != transport.GossipAlive {
				tr.returningSince = time.Time{}
				continue
			}
			if tr.returningSince.IsZero() {
				tr.returningSince = start
				a.log.Info("broker returning", "broker", b.ID, "inactive_replicas", inactive[b.ID])
			}
			act := action{kind: kindRecover, broker: b.ID}
			holds[act.key()] = true
			d := start.Sub(tr.returningSince)
			if p.RecoverAfter == Off || d < p.RecoverAfter {
				continue
			}
			if !rep.ControllerAnswers {
				a.controllerDown(rep.Controller)
				continue
			}
			act.reason = fmt.Sprintf("broker %d answers again (gossip: %s) for %s, with %s outside their active sets", b.ID, b.Gossip,
				d.Round(100*time.Millisecond), plural(inactive[b.ID], "replica"))
			acts = append(acts, act)
		default:
			tr.returningSince = time.Time{}
			if preferredOff[b.ID] {
				counts[StateRecovered]++
			} else {
				counts[StateAnswering]++
			}
		}
	}
	if len(silent) == 0 && returning == 0 && offPreferred > 0 {
		act := action{kind: kindElectLeaders}
		holds[act.key()] = true
		if a.wholeSince.IsZero() {
			a.wholeSince = start
		}
		d := start.Sub(a.wholeSince)
		if p.LeadersBackAfter != Off && d >= p.LeadersBackAfter && rep.ControllerAnswers {
			act.reason = fmt.Sprintf("%s led off the preferred replica, the cluster whole for %s", plural(offPreferred, "partition"), d.Round(100*time.Millisecond))
			acts = append(acts, act)
		}
	} else {
		a.wholeSince = time.Time{}
	}
	for _, s := range allStates {
		a.m.brokers.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
	// A reason gone clears its count of failures and its lines said once.
	for k := range a.failures {
		if !holds[k] {
			delete(a.failures, k)
		}
	}
	for line, reason := range a.said {
		if !holds[reason] {
			delete(a.said, line)
		}
	}
	return acts
}

// controllerDown says once, while it lasts, that no command can run.
func (a *Autopilot) controllerDown(id int32) {
	a.once("controller down", "controller", "the controller does not answer: no command can run until it does (with a replicated controller, another candidate takes over within seconds)",
		"controller", id)
}

// once logs a line the first time, while its reason holds.
func (a *Autopilot) once(line, reason, msg string, args ...any) {
	if _, ok := a.said[line]; ok {
		return
	}
	a.said[line] = reason
	a.log.Warn(msg, args...)
}

// act runs an action, if this autopilot holds the lease; a dry run or an
// autopilot that stands by says what it would run, once per reason.
func (a *Autopilot) act(ctx context.Context, act action) error {
	cmd := act.command()
	if a.cfg.DryRun {
		if _, ok := a.said[act.key()+" dry-run"]; !ok {
			a.said[act.key()+" dry-run"] = act.key()
			a.m.actions.WithLabelValues(act.kind, resultDryRun).Inc()
			a.log.Info("would run (dry run)", "command", cmd, "reason", act.reason)
		}
		return nil
	}
	if !a.held() {
		if _, ok := a.said[act.key()+" standby"]; !ok {
			a.said[act.key()+" standby"] = act.key()
			a.log.Info("standing by: would run, but the lease is another autopilot's", "holder", a.holder, "command", cmd, "reason", act.reason)
		}
		return nil
	}
	a.log.Info("run", "command", cmd, "reason", act.reason)
	// A command under way is finished when the autopilot is stopped: a
	// failover cut off part way is safe, but leaves work for a person.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.CommandTimeout)
	began := a.now()
	rep, err := a.run(cctx, act)
	cancel()
	if err == nil {
		err = failedResults(rep.Results)
	} else {
		err = named(err)
	}
	if err != nil {
		a.failures[act.key()]++
		a.m.actions.WithLabelValues(act.kind, resultFailed).Inc()
		if a.failures[act.key()] >= 2 {
			return fmt.Errorf("%w: %s failed twice in a row (run because %s): %v", ErrCommandFailedTwice, cmd, act.reason, err)
		}
		a.log.Error("command failed: it runs again at the next poll if its reason still holds, and a second failure stops the autopilot",
			"command", cmd, "err", err)
		return nil
	}
	delete(a.failures, act.key())
	a.m.actions.WithLabelValues(act.kind, resultOK).Inc()
	a.log.Info("done", "command", cmd, "partitions", len(rep.Results), "took", a.now().Sub(began).Round(time.Millisecond))
	switch act.kind {
	case kindRecover:
		if tr := a.brokers[act.broker]; tr != nil {
			tr.returningSince = time.Time{}
		}
	case kindElectLeaders:
		a.wholeSince = time.Time{}
	}
	return nil
}

// run sends an action's command to the controller.
func (a *Autopilot) run(ctx context.Context, act action) (client.ChangeReport, error) {
	switch act.kind {
	case kindFailover:
		return a.cfg.Cluster.Failover(ctx, client.FailoverRequest{Broker: act.broker, Requester: a.cfg.Name})
	case kindRecover:
		return a.cfg.Cluster.Recover(ctx, client.RecoverRequest{Broker: act.broker, Requester: a.cfg.Name})
	default:
		return a.cfg.Cluster.ElectLeaders(ctx, client.ElectLeadersRequest{Requester: a.cfg.Name})
	}
}

// named makes sure an error the cluster answered with says its code's
// name (NoEligibleReplica, LeaderStillAvailable), as gostream-ctl's
// errors do.
func named(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		if name := te.Code.String(); !strings.Contains(err.Error(), name) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return err
}

// failedResults is the failures of a change of several partitions as
// one error, nil when none failed.
func failedResults(results []client.ChangeResult) error {
	var msgs []string
	for _, r := range results {
		if r.Error == "" {
			continue
		}
		msg := r.Error
		if r.ErrorName != "" && !strings.HasPrefix(msg, r.ErrorName) {
			msg = r.ErrorName + ": " + msg
		}
		msgs = append(msgs, fmt.Sprintf("%s/%d: %s", r.Topic, r.Partition, msg))
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %s failed: %s", len(msgs), plural(len(results), "partition"), strings.Join(msgs, "; "))
}

// renew takes or renews the lease, unless this is a dry run.
func (a *Autopilot) renew(ctx context.Context) {
	defer func() { a.m.leaseHeld.Set(b2f(a.held())) }()
	if a.cfg.DryRun {
		return
	}
	was := a.held()
	sent := a.now()
	lctx, cancel := context.WithTimeout(ctx, max(a.cfg.Policy.PollInterval, 2*time.Second))
	resp, err := a.cfg.Cluster.AutopilotLease(lctx, client.AutopilotLeaseRequest{Holder: a.cfg.Name, TTLMillis: a.cfg.Policy.LeaseTTL.Milliseconds()})
	cancel()
	if err != nil {
		if ctx.Err() == nil && a.leaseErr == "" {
			a.log.Warn("cannot take or renew the lease", "err", err, "held_until", a.leaseUntil)
		}
		a.leaseErr = err.Error()
		return
	}
	if a.leaseErr != "" {
		a.log.Info("the controller answers lease requests again")
		a.leaseErr = ""
	}
	switch {
	case resp.Granted:
		a.leaseUntil = sent.Add(a.cfg.Policy.LeaseTTL)
		if !was {
			a.log.Info("acting: the lease is this autopilot's", "ttl", a.cfg.Policy.LeaseTTL)
		}
	default:
		a.leaseUntil = time.Time{}
		if was || resp.Holder != a.holder {
			a.log.Info("standing by: the lease is another autopilot's", "holder", resp.Holder, "expires", time.UnixMilli(resp.Expires).Format(time.RFC3339Nano))
		}
	}
	a.holder = resp.Holder
}

// held reports whether this autopilot holds the lease now, by its own
// count.
func (a *Autopilot) held() bool { return a.now().Before(a.leaseUntil) }

// giveBack releases the lease, if held, so that another autopilot takes
// over at once.
func (a *Autopilot) giveBack() {
	if a.cfg.DryRun || !a.held() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := a.cfg.Cluster.AutopilotLease(ctx, client.AutopilotLeaseRequest{Holder: a.cfg.Name, Release: true}); err != nil {
		a.log.Warn("could not give the lease back; another autopilot takes over when it expires", "err", err, "expires", a.leaseUntil)
		return
	}
	a.leaseUntil = time.Time{}
	a.m.leaseHeld.Set(0)
	a.log.Info("gave the lease back")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ids lists broker ids for people: "2, 3".
func ids(list []int32) string {
	s := slices.Clone(list)
	slices.Sort(s)
	out := make([]string, len(s))
	for i, id := range s {
		out[i] = fmt.Sprint(id)
	}
	return strings.Join(out, ", ")
}

// plural is n nouns: "1 partition", "2 partitions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
