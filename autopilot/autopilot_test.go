package autopilot

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// fakeCluster is a cluster the test describes by hand: its brokers, its
// partitions, whether the controller answers; it records the commands it
// is sent and keeps a lease as the controller does.
type fakeCluster struct {
	mu         sync.Mutex
	now        func() time.Time
	brokers    map[int32]client.BrokerReport
	partitions []client.PartitionReport
	controller int32
	ctrlDown   bool
	noAnswer   bool
	// failWith, when set, fails every command of that kind.
	failWith map[string]error
	commands []string // "failover 2 by a", ...

	holder  string
	expires time.Time
}

// newFake is n brokers, every one answering and alive by gossip, and one
// partition per broker, led by it, replicated on the next two.
func newFake(n int, now func() time.Time) *fakeCluster {
	f := &fakeCluster{now: now, brokers: map[int32]client.BrokerReport{}, controller: 1, failWith: map[string]error{}}
	for id := int32(1); id <= int32(n); id++ {
		f.brokers[id] = client.BrokerReport{ID: id, Registered: true, Answers: true, Gossip: transport.GossipAlive}
	}
	for p := 0; p < n; p++ {
		var replicas []int32
		for r := 0; r < min(3, n); r++ {
			replicas = append(replicas, int32((p+r)%n)+1)
		}
		f.partitions = append(f.partitions, client.PartitionReport{Topic: "t", Partition: int32(p), Leader: replicas[0],
			Replicas: replicas, Active: slices.Clone(replicas)})
	}
	return f
}

// set makes broker id answer or not, and gossip see it so.
func (f *fakeCluster) set(id int32, answers bool, gossip transport.GossipState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.brokers[id]
	b.Answers, b.Gossip = answers, gossip
	f.brokers[id] = b
}

func (f *fakeCluster) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

func (f *fakeCluster) ClusterStatus(context.Context) (client.ClusterReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noAnswer {
		return client.ClusterReport{}, fmt.Errorf("%w: no broker answered", transport.ErrBrokerNotAvailable)
	}
	r := client.ClusterReport{}
	r.Controller, r.ControllerAnswers = f.controller, !f.ctrlDown
	ids := mapKeys(f.brokers)
	slices.Sort(ids)
	for _, id := range ids {
		r.Brokers = append(r.Brokers, f.brokers[id])
	}
	for _, p := range f.partitions {
		p.Inactive = nil
		for _, b := range p.Replicas {
			if !slices.Contains(p.Active, b) {
				p.Inactive = append(p.Inactive, b)
			}
		}
		pref := p.Replicas[0]
		p.OffPreferred = p.Leader != pref && slices.Contains(p.Active, pref) && f.brokers[pref].Answers
		r.Partitions = append(r.Partitions, p)
	}
	return r, nil
}

func mapKeys[V any](m map[int32]V) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Failover moves leadership off the broker to the next active replica
// and drops it from every active set, as the controller does.
func (f *fakeCluster) Failover(_ context.Context, req client.FailoverRequest) (client.ChangeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, fmt.Sprintf("failover %d by %s", req.Broker, req.Requester))
	if err := f.failWith[kindFailover]; err != nil {
		return client.ChangeReport{}, err
	}
	var rep client.ChangeReport
	for i, p := range f.partitions {
		if !slices.Contains(p.Active, req.Broker) {
			continue
		}
		p.Active = slices.DeleteFunc(slices.Clone(p.Active), func(b int32) bool { return b == req.Broker })
		if p.Leader == req.Broker {
			p.Leader = p.Active[0]
		}
		f.partitions[i] = p
		rep.Results = append(rep.Results, client.ChangeResult{Topic: p.Topic, Partition: p.Partition, Action: client.ActionFailover})
	}
	return rep, nil
}

func (f *fakeCluster) Recover(_ context.Context, req client.RecoverRequest) (client.ChangeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, fmt.Sprintf("recover %d by %s", req.Broker, req.Requester))
	if err := f.failWith[kindRecover]; err != nil {
		return client.ChangeReport{}, err
	}
	var rep client.ChangeReport
	for i, p := range f.partitions {
		if slices.Contains(p.Replicas, req.Broker) && !slices.Contains(p.Active, req.Broker) {
			f.partitions[i].Active = append(slices.Clone(p.Active), req.Broker)
			rep.Results = append(rep.Results, client.ChangeResult{Topic: p.Topic, Partition: p.Partition, Action: client.ActionRecover})
		}
	}
	return rep, nil
}

func (f *fakeCluster) ElectLeaders(_ context.Context, req client.ElectLeadersRequest) (client.ChangeReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, "elect-leaders by "+req.Requester)
	if err := f.failWith[kindElectLeaders]; err != nil {
		return client.ChangeReport{}, err
	}
	var rep client.ChangeReport
	for i, p := range f.partitions {
		if p.Leader != p.Replicas[0] && slices.Contains(p.Active, p.Replicas[0]) {
			f.partitions[i].Leader = p.Replicas[0]
			rep.Results = append(rep.Results, client.ChangeResult{Topic: p.Topic, Partition: p.Partition, Action: client.ActionElectLeader})
		}
	}
	return rep, nil
}

func (f *fakeCluster) AutopilotLease(_ context.Context, req client.AutopilotLeaseRequest) (client.AutopilotLeaseResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctrlDown || f.noAnswer {
		return client.AutopilotLeaseResponse{}, fmt.Errorf("%w: no active controller", transport.ErrControllerUnavailable)
	}
	now := f.now()
	switch {
	case req.Release:
		if f.holder == req.Holder {
			f.holder = ""
		}
		return client.AutopilotLeaseResponse{Holder: f.holder}, nil
	case f.holder == "" || f.holder == req.Holder || !now.Before(f.expires):
		f.holder, f.expires = req.Holder, now.Add(time.Duration(req.TTLMillis)*time.Millisecond)
		return client.AutopilotLeaseResponse{Holder: f.holder, Granted: true, Expires: f.expires.UnixMilli()}, nil
	}
	return client.AutopilotLeaseResponse{Holder: f.holder, Expires: f.expires.UnixMilli()}, nil
}

// clock is a test's clock, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)} }
func testPolicy() Policy             { return DefaultPolicy() }
func logTo(buf *bytes.Buffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Info})
}

func newPilot(t *testing.T, f *fakeCluster, c *clock, name string, dry bool, log *bytes.Buffer) *Autopilot {
	t.Helper()
	a, err := New(Config{Cluster: f, Policy: testPolicy(), Name: name, DryRun: dry, Logger: logTo(log), Now: c.now})
	require.NoError(t, err)
	return a
}

// pollEvery polls every poll interval over d.
func pollEvery(t *testing.T, a *Autopilot, c *clock, d time.Duration) {
	t.Helper()
	for end := c.now().Add(d); c.now().Before(end); c.add(a.cfg.Policy.PollInterval) {
		require.NoError(t, a.poll(context.Background()))
	}
}

// A broker killed (no answer, gossip dead) is failed over once its grace
// period has passed, not a poll before; then it is failed over, and
// nothing more is run for it.
func TestFailsOverASilentBrokerAfterTheGracePeriod(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	pollEvery(t, a, c, 3*time.Second)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, a.cfg.Policy.FailoverAfter) // polls at 0 s .. 9 s of silence
	assert.Empty(t, f.sent(), "within the grace period")
	require.NoError(t, a.poll(context.Background())) // 10 s
	assert.Equal(t, []string{"failover 2 by a"}, f.sent())
	assert.Contains(t, log.String(), `reason="broker 2 silent for 10s`)
	assert.Contains(t, log.String(), "does not answer (gossip: dead)")
	pollEvery(t, a, c, time.Minute)
	assert.Equal(t, []string{"failover 2 by a"}, f.sent(), "failed over: nothing waits for it")
	c.add(time.Second)
	require.NoError(t, a.poll(context.Background()))
	assert.Equal(t, 1.0, metric(t, a.m, `gostream_autopilot_brokers{state="failed-over"}`))
}

// Gossip decides with the direct probe: a broker that does not answer but
// that gossip sees alive is not failed over; one that answers but that
// gossip calls dead (cut off from its peers) is.
func TestGossipAndTheDirectProbeTogether(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	f.set(3, false, transport.GossipAlive)
	pollEvery(t, a, c, 30*time.Second)
	assert.Empty(t, f.sent())
	assert.Equal(t, 1, strings.Count(log.String(), "gossip sees it alive"), "said once")

	f.set(3, true, transport.GossipAlive)
	f.set(2, true, transport.GossipDead)
	pollEvery(t, a, c, 11*time.Second)
	assert.Equal(t, []string{"failover 2 by a"}, f.sent())
	assert.Contains(t, log.String(), "gossip says dead, though it answers")
}

// A broker that comes back within the grace period is not failed over.
func TestABrokerBackWithinTheGracePeriodIsLeftAlone(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	f.set(2, false, transport.GossipSuspect)
	pollEvery(t, a, c, 9*time.Second)
	f.set(2, true, transport.GossipAlive)
	pollEvery(t, a, c, time.Minute)
	assert.Empty(t, f.sent())
}

// A broker failed over and back is recovered once it has answered for
// the recover grace; leadership moves back once the cluster has been
// whole for its own; each step once.
func TestRecoversAReturningBrokerThenMovesLeadersBack(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, 11*time.Second)
	require.Equal(t, []string{"failover 2 by a"}, f.sent())
	f.set(2, true, transport.GossipAlive)
	pollEvery(t, a, c, 5*time.Second) // 0 s .. 4 s back
	assert.Len(t, f.sent(), 1, "within the recover grace")
	require.NoError(t, a.poll(context.Background()))
	assert.Equal(t, []string{"failover 2 by a", "recover 2 by a"}, f.sent())
	assert.Contains(t, log.String(), "with 3 replicas outside their active sets")
	c.add(time.Second)
	require.NoError(t, a.poll(context.Background()))
	assert.Equal(t, 1.0, metric(t, a.m, `gostream_autopilot_brokers{state="recovered"}`), "broker 2 leads nothing it should")
	pollEvery(t, a, c, 9*time.Second)
	assert.Len(t, f.sent(), 2, "within the leaders-back grace")
	pollEvery(t, a, c, 2*time.Second)
	assert.Equal(t, []string{"failover 2 by a", "recover 2 by a", "elect-leaders by a"}, f.sent())
	pollEvery(t, a, c, time.Minute)
	assert.Len(t, f.sent(), 3)
	for _, p := range f.partitions {
		assert.Equal(t, p.Replicas[0], p.Leader)
	}
}

// Recovery and moving leaders back can be left to the operator.
func TestOffLeavesStepsToTheOperator(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	p := testPolicy()
	p.RecoverAfter = Off
	a, err := New(Config{Cluster: f, Policy: p, Name: "a", Logger: logTo(log), Now: c.now})
	require.NoError(t, err)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, 11*time.Second)
	f.set(2, true, transport.GossipAlive)
	pollEvery(t, a, c, time.Minute)
	assert.Equal(t, []string{"failover 2 by a"}, f.sent())
}

// Several brokers silent at once, fewer than half: each is failed over.
// Half or more: nothing is, and once that has lasted the grace period
// the autopilot stops; no broker answering at all, too.
func TestHalfTheBrokersSilentIsANetworkProblem(t *testing.T) {
	t.Run("two of five", func(t *testing.T) {
		c, log := newClock(), &bytes.Buffer{}
		f := newFake(5, c.now)
		a := newPilot(t, f, c, "a", false, log)
		f.set(4, false, transport.GossipDead)
		f.set(5, false, transport.GossipDead)
		pollEvery(t, a, c, 11*time.Second)
		assert.Equal(t, []string{"failover 4 by a", "failover 5 by a"}, f.sent())
	})
	t.Run("two of three", func(t *testing.T) {
		c, log := newClock(), &bytes.Buffer{}
		f := newFake(3, c.now)
		a := newPilot(t, f, c, "a", false, log)
		f.set(2, false, transport.GossipDead)
		pollEvery(t, a, c, 5*time.Second)
		f.set(3, false, transport.GossipDead)
		pollEvery(t, a, c, 10*time.Second) // broker 2 is due, but 2 of 3 are silent
		err := a.poll(context.Background())
		require.ErrorIs(t, err, ErrMostBrokersSilent)
		assert.Contains(t, err.Error(), "2 of 3 brokers are silent at once (2, 3), for 10s")
		assert.Empty(t, f.sent())
	})
	t.Run("two of four", func(t *testing.T) {
		c, log := newClock(), &bytes.Buffer{}
		f := newFake(4, c.now)
		a := newPilot(t, f, c, "a", false, log)
		f.set(3, false, transport.GossipDead)
		f.set(4, false, transport.GossipDead)
		pollEvery(t, a, c, 10*time.Second)
		require.ErrorIs(t, a.poll(context.Background()), ErrMostBrokersSilent)
		assert.Empty(t, f.sent())
	})
	t.Run("a blip", func(t *testing.T) {
		c, log := newClock(), &bytes.Buffer{}
		f := newFake(3, c.now)
		a := newPilot(t, f, c, "a", false, log)
		f.set(2, false, transport.GossipDead)
		f.set(3, false, transport.GossipDead)
		pollEvery(t, a, c, 5*time.Second)
		f.set(3, true, transport.GossipAlive)
		pollEvery(t, a, c, 6*time.Second)
		assert.Equal(t, []string{"failover 2 by a"}, f.sent(), "one of three is handled")
	})
	t.Run("nobody answers", func(t *testing.T) {
		c, log := newClock(), &bytes.Buffer{}
		f := newFake(3, c.now)
		a := newPilot(t, f, c, "a", false, log)
		f.noAnswer = true
		pollEvery(t, a, c, 10*time.Second)
		err := a.poll(context.Background())
		require.ErrorIs(t, err, ErrMostBrokersSilent)
		assert.Contains(t, err.Error(), "no broker answers this autopilot")
	})
}

// A command that fails is run again at the next poll; a second failure
// in a row stops the autopilot. A reason that goes away clears the count.
func TestACommandFailingTwiceStops(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	f.failWith[kindFailover] = fmt.Errorf("failover of broker 2: %w", transport.ErrNoEligibleReplica)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, 11*time.Second)
	assert.Equal(t, []string{"failover 2 by a"}, f.sent(), "failed once")
	assert.Contains(t, log.String(), "a second failure stops the autopilot")
	// It comes back: the count starts again.
	f.set(2, true, transport.GossipAlive)
	pollEvery(t, a, c, 2*time.Second)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, 11*time.Second)
	assert.Len(t, f.sent(), 2, "failed once more, not twice in a row")
	err := a.poll(context.Background())
	require.ErrorIs(t, err, ErrCommandFailedTwice)
	assert.Contains(t, err.Error(), "gostream-ctl failover --broker 2 failed twice in a row")
	assert.Contains(t, err.Error(), "NoEligibleReplica")
	assert.Len(t, f.sent(), 3)
}

// A change of several partitions that fails for some counts as failed.
func TestFailedResults(t *testing.T) {
	assert.NoError(t, failedResults([]client.ChangeResult{{Topic: "t"}}))
	err := failedResults([]client.ChangeResult{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1, ErrorName: "NoEligibleReplica", Error: "no replica answers"}})
	require.Error(t, err)
	assert.Equal(t, "1 of 2 partitions failed: t/1: NoEligibleReplica: no replica answers", err.Error())
}

// Nothing fails over while the controller does not answer: no command
// could run; it is said once.
func TestWaitsForTheController(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", false, log)
	pollEvery(t, a, c, time.Second) // takes the lease
	f.set(1, false, transport.GossipDead)
	f.ctrlDown = true
	pollEvery(t, a, c, 30*time.Second)
	assert.Empty(t, f.sent())
	assert.Equal(t, 1, strings.Count(log.String(), "the controller does not answer"))
	f.ctrlDown, f.controller = false, 2 // another candidate took over
	pollEvery(t, a, c, time.Second)
	assert.Equal(t, []string{"failover 1 by a"}, f.sent())
}

// Of two autopilots, the one that holds the lease acts; the other stands
// by, and takes over once the lease has expired (the holder died). One
// that stops cleanly gives the lease back at once.
func TestOnlyTheLeaseHolderActs(t *testing.T) {
	c := newClock()
	f := newFake(3, c.now)
	la, lb := &bytes.Buffer{}, &bytes.Buffer{}
	a, b := newPilot(t, f, c, "a", false, la), newPilot(t, f, c, "b", false, lb)
	both := func(d time.Duration) {
		for end := c.now().Add(d); c.now().Before(end); c.add(time.Second) {
			require.NoError(t, a.poll(context.Background()))
			require.NoError(t, b.poll(context.Background()))
		}
	}
	both(2 * time.Second)
	assert.Contains(t, la.String(), "acting: the lease is this autopilot's")
	assert.Contains(t, lb.String(), "standing by: the lease is another autopilot's: holder=a")
	assert.Equal(t, 1.0, metric(t, a.m, "gostream_autopilot_lease_held"))
	assert.Equal(t, 0.0, metric(t, b.m, "gostream_autopilot_lease_held"))
	f.set(3, false, transport.GossipDead)
	both(12 * time.Second)
	assert.Equal(t, []string{"failover 3 by a"}, f.sent())
	assert.NotContains(t, lb.String(), "standing by: would run", "a acted first")

	// a dies; b takes over when a's lease runs out.
	f.set(3, true, transport.GossipAlive)
	for end := c.now().Add(a.cfg.Policy.LeaseTTL - time.Second); c.now().Before(end); c.add(time.Second) {
		require.NoError(t, b.poll(context.Background()))
	}
	assert.Len(t, f.sent(), 1, "b waits while a's lease lasts")
	assert.Contains(t, lb.String(), "standing by: would run, but the lease is another autopilot's: holder=a command=\"gostream-ctl recover --broker 3\"")
	pollEvery(t, b, c, 2*time.Second)
	assert.Equal(t, []string{"failover 3 by a", "recover 3 by b"}, f.sent())

	// b stops cleanly: a (back) takes over at its next poll.
	b.giveBack()
	require.NoError(t, a.poll(context.Background()))
	assert.True(t, a.held())
}

// A dry run asks for no lease, runs nothing, and says what it would run,
// once per reason.
func TestDryRunActsOnNothing(t *testing.T) {
	c, log := newClock(), &bytes.Buffer{}
	f := newFake(3, c.now)
	a := newPilot(t, f, c, "a", true, log)
	f.set(2, false, transport.GossipDead)
	pollEvery(t, a, c, time.Minute)
	assert.Empty(t, f.sent())
	assert.Empty(t, f.holder, "no lease taken")
	assert.Equal(t, 1, strings.Count(log.String(), `would run (dry run): command="gostream-ctl failover --broker 2"`))
	assert.Equal(t, 1.0, metric(t, a.m, `gostream_autopilot_actions_total{kind="failover",result="dry-run"}`))
}

// Run polls until its context ends, then gives the lease back; it
// returns the error that stops it.
func TestRunStopsAndGivesTheLeaseBack(t *testing.T) {
	f := newFake(3, time.Now)
	p := testPolicy()
	p.PollInterval, p.LeaseTTL = 10*time.Millisecond, time.Second
	a, err := New(Config{Cluster: f, Policy: p, Name: "a"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.holder == "a" }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, f.holder, "given back")

	f.noAnswer = true
	p.FailoverAfter = 6 * time.Second
	a, err = New(Config{Cluster: f, Policy: p, Name: "a", Now: func() time.Time { return time.Now().Add(time.Hour) }})
	require.NoError(t, err)
	a.crowdSince = time.Now() // an hour before its clock
	assert.ErrorIs(t, a.Run(context.Background()), ErrMostBrokersSilent)
}
