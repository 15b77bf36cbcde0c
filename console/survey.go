package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// The survey (docs/console.md): the topics and groups lists need, for
// every topic, its size and rate and the lag of every group that reads
// it, which is far too many calls for one page load. So the console asks
// the whole cluster every SurveyInterval, in rounds, and answers the
// lists from the last complete round. A round asks every broker for its
// status document (each replica's high watermark, log start and size,
// and the node's live readers of each stream) and every group's
// coordinator for its committed offsets, at most surveyCalls at once.
// The survey starts with the first API request and stops after
// SurveyIdle without one; it keeps, besides the last round, the lag of
// every group on every topic at each round of the last hour.

// Bounds of the survey.
const (
	// SurveyInterval is the time between the starts of two rounds.
	SurveyInterval = 10 * time.Second
	// SurveyIdle is how long the survey goes on without an API request.
	SurveyIdle = 10 * time.Minute
	// lagRounds is how many rounds of lag the survey keeps: an hour.
	lagRounds = 360
	// lagWindow is how far back the lag history goes.
	lagWindow = time.Hour
	// surveyCalls bounds the survey's calls in flight at once.
	surveyCalls = 8
	// roundTimeout bounds one round.
	roundTimeout = 30 * time.Second
	// statusTimeout bounds one broker's status document.
	statusTimeout = 5 * time.Second
	// firstRoundWait bounds how long a list waits for the first round.
	firstRoundWait = 20 * time.Second
)

// errClosed is the survey's answer once the console is closed.
var errClosed = errors.New("the console is closed")

// snapshot is one complete round of the survey. It is never changed
// once the round is done: requests read it without a lock.
type snapshot struct {
	at time.Time
	// took is how long the round took to ask the cluster.
	took   time.Duration
	topics []surveyTopic // by name
	groups []surveyGroup // by name
	// readers are the groups that read each topic (committed on it or
	// subscribe to it), by group name.
	readers map[string][]groupLag
	// streamReaders are the live readers of each Durable Streams path,
	// summed over the brokers' statuses (each node counts those it
	// serves); readersKnown is false when a broker's status is missing,
	// which leaves every stream's count unknown.
	streamReaders map[string]int
	readersKnown  bool
	// unavailable says what did not answer in the round.
	unavailable []string
}

// surveyTopic is one topic as a round found it.
type surveyTopic struct {
	meta client.TopicMetadata
	// parts is each partition as its leader's status told it, by
	// partition number.
	parts []partState
	// rate is the records appended per second between the round before
	// and this one; nil after the first round.
	rate *float64
}

// partState is one partition as its leader's status told it.
type partState struct {
	known         bool // false when its leader did not tell
	highWatermark int64
	logStart      int64
	bytes         int64
}

// sums adds up a topic's partitions that their leaders told: bytes and
// records held (one copy), and how many did not tell.
func (t *surveyTopic) sums() (bytes, records int64, unknown int) {
	for _, p := range t.parts {
		if !p.known {
			unknown++
			continue
		}
		bytes += p.bytes
		records += p.highWatermark - p.logStart
	}
	return bytes, records, unknown
}

// surveyGroup is one group as a round found it.
type surveyGroup struct {
	name    string
	state   string
	members int
	// protocol is "native" or the Kafka protocol type.
	protocol string
	// lag is the group's lag on each topic it reads; nil when its
	// coordinator did not answer (err says why).
	lag map[string]int64
	err error
}

// groupLag is one group's lag on one topic.
type groupLag struct {
	group string
	lag   int64
}

// groupTopic names one series of the lag history.
type groupTopic struct{ group, topic string }

// lagHistory is the lag of every group on every topic at each of the
// last lagRounds rounds: series aligned with times, -1 where the round
// did not measure it.
type lagHistory struct {
	times  []time.Time
	series map[groupTopic][]int64
}

// add records a round's lags, dropping the oldest round beyond lagRounds
// and every series that no round kept measures any more.
func (h *lagHistory) add(snap *snapshot) {
	if h.series == nil {
		h.series = map[groupTopic][]int64{}
	}
	full := len(h.times) == lagRounds
	if full {
		copy(h.times, h.times[1:])
		h.times[len(h.times)-1] = snap.at
	} else {
		h.times = append(h.times, snap.at)
	}
	for k, s := range h.series {
		if full {
			copy(s, s[1:])
			s[len(s)-1] = -1
		} else {
			s = append(s, -1)
		}
		h.series[k] = s
	}
	for _, g := range snap.groups {
		for topic, lag := range g.lag {
			k := groupTopic{g.name, topic}
			s, ok := h.series[k]
			if !ok {
				s = make([]int64, len(h.times))
				for i := range s {
					s[i] = -1
				}
			}
			s[len(s)-1] = lag
			h.series[k] = s
		}
	}
	for k, s := range h.series {
		if !slices.ContainsFunc(s, func(v int64) bool { return v >= 0 }) {
			delete(h.series, k)
		}
	}
}

// survey runs the rounds and keeps their results. Its goroutine is
// started by touch and stops when idle or closed; close waits for it.
type survey struct {
	// round asks the cluster; a fake in tests.
	round func(ctx context.Context) (*snapshot, error)
	// interval and idle are SurveyInterval and SurveyIdle, shorter in
	// tests.
	interval time.Duration
	idle     time.Duration
	log      hclog.Logger

	wg sync.WaitGroup // the running goroutine

	mu struct {
		sync.Mutex
		running bool
		closed  bool
		// cancel stops the running goroutine's rounds.
		cancel  context.CancelFunc
		lastUse time.Time
		// snap is the last complete round, nil before the first one of
		// a run (and again once the survey idled); err is why the last
		// round failed, nil after a success.
		snap *snapshot
		err  error
		// done is closed at the end of each round (and by close), and
		// replaced: a list waiting for a round waits on it.
		done    chan struct{}
		history lagHistory
	}
}

func newSurvey(round func(ctx context.Context) (*snapshot, error), log hclog.Logger) *survey {
	v := &survey{round: round, interval: SurveyInterval, idle: SurveyIdle, log: log}
	v.mu.done = make(chan struct{})
	return v
}

// touch records an API request, and starts the survey if it is not
// running.
func (v *survey) touch() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.closed {
		return
	}
	v.mu.lastUse = time.Now()
	if v.mu.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.mu.running, v.mu.cancel = true, cancel
	v.wg.Add(1)
	go v.run(ctx)
}

// run makes a round at once and then every interval, until ctx is
// canceled (close) or no API request came for idle.
func (v *survey) run(ctx context.Context) {
	defer v.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !v.wanted() {
			return
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, roundTimeout)
		snap, err := v.round(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			snap.took = time.Since(start)
		}
		v.finish(snap, err)
		timer.Reset(max(v.interval-time.Since(start), 0))
	}
}

// wanted reports whether an API request came within idle; when none did,
// it stops the survey and forgets its last round (a list after a pause
// waits for a new one rather than answer one that old).
func (v *survey) wanted() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.closed {
		return false
	}
	if time.Since(v.mu.lastUse) < v.idle {
		return true
	}
	v.log.Debug("survey stops: no console request", "idle", v.idle)
	v.mu.running = false
	v.mu.cancel()
	v.mu.cancel, v.mu.snap, v.mu.err = nil, nil, nil
	return false
}

// finish keeps a round's result and wakes the lists waiting for it.
func (v *survey) finish(snap *snapshot, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.closed {
		return
	}
	if err != nil {
		v.log.Warn("survey round failed", "err", err)
		v.mu.err = err
	} else {
		snap.rateFrom(v.mu.snap)
		v.mu.snap, v.mu.err = snap, nil
		v.mu.history.add(snap)
	}
	close(v.mu.done)
	v.mu.done = make(chan struct{})
}

// current returns the last complete round. Before the first one it
// waits for it (up to firstRoundWait), rather than answer an empty list;
// when the last round failed it returns why.
func (v *survey) current(ctx context.Context) (*snapshot, error) {
	v.mu.Lock()
	snap, err, done, closed := v.mu.snap, v.mu.err, v.mu.done, v.mu.closed
	v.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case snap != nil:
		return snap, nil
	case err != nil:
		return nil, fmt.Errorf("the survey of the cluster failed: %w", err)
	}
	timer := time.NewTimer(firstRoundWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("%w: the survey of the cluster has not answered in %s", transport.ErrTimeout, firstRoundWait)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.mu.closed:
		return nil, errClosed
	case v.mu.snap != nil:
		return v.mu.snap, nil
	}
	return nil, fmt.Errorf("the survey of the cluster failed: %w", v.mu.err)
}

// lags returns a copy of the lag history.
func (v *survey) lags() lagHistory {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := lagHistory{times: slices.Clone(v.mu.history.times), series: make(map[groupTopic][]int64, len(v.mu.history.series))}
	for k, s := range v.mu.history.series {
		h.series[k] = slices.Clone(s)
	}
	return h
}

// running reports whether the survey's goroutine runs.
func (v *survey) running() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.running
}

// close stops the survey and waits for its goroutine. It may be called
// more than once.
func (v *survey) close() {
	v.mu.Lock()
	if !v.mu.closed {
		v.mu.closed = true
		if v.mu.cancel != nil {
			v.mu.cancel()
		}
		v.mu.running = false
		close(v.mu.done)
	}
	v.mu.Unlock()
	v.wg.Wait()
}

// rateFrom sets each topic's rate from the high watermarks of the round
// before, prev (nil for none): the records appended per second over the
// partitions both rounds know, of the same incarnation of the topic.
func (s *snapshot) rateFrom(prev *snapshot) {
	if prev == nil {
		return
	}
	secs := s.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return
	}
	for i := range s.topics {
		t := &s.topics[i]
		j, ok := slices.BinarySearchFunc(prev.topics, t.meta.Name, func(p surveyTopic, name string) int { return strings.Compare(p.meta.Name, name) })
		if !ok || prev.topics[j].meta.ID != t.meta.ID {
			continue
		}
		before := prev.topics[j].parts
		var appended int64
		measured := false
		for p, now := range t.parts {
			if p < len(before) && now.known && before[p].known {
				appended += max(now.highWatermark-before[p].highWatermark, 0)
				measured = true
			}
		}
		if measured {
			rate := float64(appended) / secs
			t.rate = &rate
		}
	}
}

// topic returns the round's topic of that name.
func (s *snapshot) topic(name string) (*surveyTopic, bool) {
	i, ok := slices.BinarySearchFunc(s.topics, name, func(t surveyTopic, name string) int { return strings.Compare(t.meta.Name, name) })
	if !ok {
		return nil, false
	}
	return &s.topics[i], true
}

// surveyRound asks the cluster, through the node's client, for a round:
// the metadata, every broker's status, every group's description.
func (s *Server) surveyRound(ctx context.Context) (*snapshot, error) {
	c, err := s.cfg.Client(ctx)
	if err != nil {
		return nil, err
	}
	md, err := c.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("the cluster's metadata: %w", err)
	}
	snap := &snapshot{at: time.Now()}
	statuses, unavailable := nodeStatuses(ctx, c, md.Brokers)
	snap.unavailable = unavailable

	list, err := c.ListGroups(ctx)
	if err != nil {
		snap.unavailable = append(snap.unavailable, fmt.Sprintf("the groups: %v", err))
	}
	for _, e := range list.Unavailable {
		snap.unavailable = append(snap.unavailable, fmt.Sprintf("groups of %v", e))
	}
	descs := make([]client.GroupDescription, len(list.Groups))
	descErrs := make([]error, len(list.Groups))
	bounded(len(list.Groups), func(i int) {
		descs[i], descErrs[i] = c.DescribeGroupCommitted(ctx, list.Groups[i].Name)
	})

	snap.build(md, statuses, list.Groups, descs, descErrs)
	slices.Sort(snap.unavailable)
	return snap, nil
}

// nodeStatuses asks each of brokers for its status document, at most
// surveyCalls at once and each within statusTimeout. A broker with no
// HTTP address, or that did not answer, has nil in statuses and a line
// saying why in unavailable (in no particular order; never nil).
func nodeStatuses(ctx context.Context, c *client.Client, brokers []client.Broker) (statuses []*transport.NodeStatus, unavailable []string) {
	statuses = make([]*transport.NodeStatus, len(brokers))
	unavailable = []string{}
	var mu sync.Mutex // guards unavailable while the calls run
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		unavailable = append(unavailable, fmt.Sprintf(format, args...))
	}
	bounded(len(brokers), func(i int) {
		b := brokers[i]
		if b.HTTP == "" {
			problem("broker %d: no HTTP address to ask its status", b.ID)
			return
		}
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		st, err := c.NodeStatus(sctx, b.HTTP)
		if err != nil {
			problem("broker %d's status: %v", b.ID, err)
			return
		}
		statuses[i] = &st
	})
	return statuses, unavailable
}

// build makes the snapshot from what the round's calls answered: each
// partition as its current leader's status tells it, and each group's
// lag on each topic it reads.
func (s *snapshot) build(md client.Metadata, statuses []*transport.NodeStatus, groups []client.GroupSummary, descs []client.GroupDescription, descErrs []error) {
	type tp struct {
		topic     string
		partition int32
	}
	led := map[tp]transport.PartitionStatus{}
	s.streamReaders, s.readersKnown = map[string]int{}, true
	for _, st := range statuses {
		if st == nil {
			s.readersKnown = false
			continue
		}
		for _, r := range st.StreamReaders {
			s.streamReaders[r.Path] += r.Readers
		}
		for _, p := range st.Partitions {
			if p.Leader == st.Node && p.Offline == "" {
				led[tp{p.Topic, p.Partition}] = p
			}
		}
	}
	s.topics = make([]surveyTopic, len(md.Topics))
	for i, t := range md.Topics {
		st := surveyTopic{meta: t, parts: make([]partState, len(t.Partitions))}
		for j, p := range t.Partitions {
			ls, ok := led[tp{t.Name, p.Partition}]
			if !ok || p.Leader != ls.Leader || int(p.Partition) != j {
				continue
			}
			st.parts[j] = partState{known: true, highWatermark: ls.HighWatermark, logStart: ls.LogStartOffset, bytes: ls.SizeBytes}
		}
		s.topics[i] = st
	}
	slices.SortFunc(s.topics, func(a, b surveyTopic) int { return strings.Compare(a.meta.Name, b.meta.Name) })

	s.readers = map[string][]groupLag{}
	s.groups = make([]surveyGroup, len(groups))
	for i, g := range groups {
		sg := surveyGroup{name: g.Name, state: g.State, members: g.Members, protocol: "native"}
		if err := descErrs[i]; err != nil {
			sg.err = err
			s.unavailable = append(s.unavailable, fmt.Sprintf("group %s: %v", g.Name, err))
			s.groups[i] = sg
			continue
		}
		d := descs[i]
		sg.state, sg.members = d.State, len(d.Members)
		if d.ProtocolType != "" {
			sg.protocol = d.ProtocolType
		}
		sg.lag = s.lagOf(d)
		for topic, lag := range sg.lag {
			s.readers[topic] = append(s.readers[topic], groupLag{group: g.Name, lag: lag})
		}
		s.groups[i] = sg
	}
	slices.SortFunc(s.groups, func(a, b surveyGroup) int { return strings.Compare(a.name, b.name) })
	for _, rs := range s.readers {
		sort.Slice(rs, func(i, j int) bool { return rs[i].group < rs[j].group })
	}
}

// lagOf is a group's lag on each topic it reads, as client.DescribeGroup
// counts it: over every partition of each topic it committed on or its
// members subscribe to, the records from its committed offset (its log
// start when never committed) to its high watermark; partitions whose
// leader did not tell are left out.
func (s *snapshot) lagOf(d client.GroupDescription) map[string]int64 {
	committed := map[string]map[int32]int64{}
	for _, p := range d.Partitions {
		if committed[p.Topic] == nil {
			committed[p.Topic] = map[int32]int64{}
		}
		committed[p.Topic][p.Partition] = p.Committed
	}
	for _, m := range d.Members {
		for _, t := range m.Topics {
			if committed[t] == nil {
				committed[t] = map[int32]int64{}
			}
		}
	}
	out := make(map[string]int64, len(committed))
	for topic, offsets := range committed {
		t, ok := s.topic(topic)
		if !ok {
			continue
		}
		var lag int64
		for p, ps := range t.parts {
			if !ps.known {
				continue
			}
			committed, ok := offsets[int32(p)]
			if !ok {
				committed = client.Never
			}
			lag += client.Lag(committed, ps.logStart, ps.highWatermark)
		}
		out[topic] = lag
	}
	return out
}

// bounded calls fn(0) to fn(n-1), at most surveyCalls at once, and
// returns when all have.
func bounded(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, surveyCalls)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// SurveyRound is the round of the survey a list answers from.
type SurveyRound struct {
	// At is when the round was taken, in Unix milliseconds; RoundMs how
	// long it took to ask the cluster.
	At      int64 `json:"at"`
	RoundMs int64 `json:"roundMs"`
}

// SurveyReport is the round of the survey a list answers from, and what
// did not answer in it.
type SurveyReport struct {
	SurveyRound
	// Unavailable says what did not answer in the round (a broker's
	// status, a coordinator); shown only to a principal that may describe
	// the cluster, empty for others.
	Unavailable []string `json:"unavailable"`
}

// round is the round s as a list says it.
func (s *snapshot) round() SurveyRound {
	return SurveyRound{At: s.at.UnixMilli(), RoundMs: s.took.Milliseconds()}
}

// surveyReport is the round snap as a list says it to the request's
// principal: what did not answer in it only to a principal that may
// describe the cluster, as the messages name brokers, groups and topics.
func (s *Server) surveyReport(r *http.Request, snap *snapshot) SurveyReport {
	out := SurveyReport{SurveyRound: snap.round(), Unavailable: []string{}}
	if s.may(r, metadata.OpDescribe, metadata.ResourceCluster, "") {
		out.Unavailable = append(out.Unavailable, snap.unavailable...)
	}
	return out
}

// snapshot returns the survey's last round, waiting for the first one,
// or writes why there is none and returns nil.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) *snapshot {
	snap, err := s.survey.current(r.Context())
	if err != nil {
		writeErr(w, err)
		return nil
	}
	return snap
}

// LagHistory is the answer of GET /ui/api/lag: every group's lag at
// each of the survey's rounds of the last hour, as this node sampled it.
type LagHistory struct {
	// Times are the rounds, oldest first, in Unix milliseconds.
	Times []int64 `json:"times"`
	// Groups are the groups the principal may describe that the hour's
	// rounds measured, by name.
	Groups []GroupLagHistory `json:"groups"`
}

// GroupLagHistory is one group's lag over the hour.
type GroupLagHistory struct {
	Group string `json:"group"`
	// Lag has one entry per round of Times: the group's lag summed over
	// the topics it reads that the principal may describe; null where
	// the round did not measure it (its coordinator did not answer, or
	// it did not exist yet).
	Lag []*int64 `json:"lag"`
}

func (s *Server) lag(w http.ResponseWriter, r *http.Request) {
	h := s.survey.lags()
	from := 0
	cutoff := time.Now().Add(-lagWindow)
	for from < len(h.times) && h.times[from].Before(cutoff) {
		from++
	}
	out := LagHistory{Times: make([]int64, 0, len(h.times)-from), Groups: []GroupLagHistory{}}
	for _, t := range h.times[from:] {
		out.Times = append(out.Times, t.UnixMilli())
	}
	byGroup := map[string][]*int64{}
	for k, series := range h.series {
		if !s.may(r, metadata.OpDescribe, metadata.ResourceGroup, k.group) || !s.may(r, metadata.OpDescribe, metadata.ResourceTopic, k.topic) {
			continue
		}
		sums, ok := byGroup[k.group]
		if !ok {
			sums = make([]*int64, len(out.Times))
		}
		for i, v := range series[from:] {
			if v < 0 {
				continue
			}
			if sums[i] == nil {
				sums[i] = new(int64)
			}
			*sums[i] += v
		}
		byGroup[k.group] = sums
	}
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		if slices.ContainsFunc(byGroup[g], func(v *int64) bool { return v != nil }) {
			out.Groups = append(out.Groups, GroupLagHistory{Group: g, Lag: byGroup[g]})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
