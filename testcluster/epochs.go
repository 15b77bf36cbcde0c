package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gostream/client"
	"gostream/record"
)

// Invariants 5 and 7 of docs/design.md section 10, checked from three sources
// that do not depend on each other: what clients saw of leadership while
// the workload ran (LeaderSampler), the controller's audit trail
// (LoadAuditTrail), and the bytes the replicas hold on disk (ReadReplica
// and each replica's quarantine/ directory).

// quarantineDir is the directory under a replica directory where the node
// keeps every byte it cut off the log (storage.QuarantineDir; the harness
// reads files, it does not import the node's packages).
const quarantineDir = "quarantine"

var (
	// segmentFileRE matches a segment file: its base offset, 20 digits.
	segmentFileRE = regexp.MustCompile(`^[0-9]{20}\.log$`)
	// truncationFileRE matches what storage.(*Log).TruncateTo cuts off:
	// <from>-<previous end>-<unix nanoseconds>.log, whole batches.
	truncationFileRE = regexp.MustCompile(`^([0-9]{20})-([0-9]{20})-[0-9]+\.log$`)
	// tornFileRE matches a torn tail cut when a log is opened:
	// torn-<offset after the last whole batch>-<unix nanoseconds>.bin.
	tornFileRE = regexp.MustCompile(`^torn-([0-9]{20})-[0-9]+\.bin$`)
)

// BatchInfo is one batch of a replica's log as its files hold it.
type BatchInfo struct {
	Base   int64    // offset of its first record
	Next   int64    // offset after its last record
	Epoch  int32    // leader epoch it was appended in
	Values []string // record values, in offset order
}

// ReadReplica reads the batches of the replica log in dir from its segment
// files (named by base offset, read in name order) without the node that
// writes them. Only whole, checksummed batches are decoded, so the log of a
// running node reads as a prefix of it: a partial batch at the end of the
// newest segment (an append in progress, or a torn write the node cuts
// when it next starts) is left out. Anything else that is not a whole valid
// batch is an error naming the file and position, returned with the
// batches before it. Nothing under quarantine/ is read. A directory that
// does not exist gives an error matching fs.ErrNotExist.
func ReadReplica(dir string) ([]BatchInfo, error) {
	batches, _, err := readReplica(dir)
	return batches, err
}

// readReplica is ReadReplica that also returns the log start offset (the
// first segment's base), or -1 when there is no segment.
func readReplica(dir string) ([]BatchInfo, int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, -1, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && segmentFileRE.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	start := int64(-1)
	if len(names) > 0 {
		start, _ = strconv.ParseInt(strings.TrimSuffix(names[0], ".log"), 10, 64)
	}
	var out []BatchInfo
	for i, name := range names {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return out, start, err
		}
		if out, err = appendBatches(out, data, path, i == len(names)-1); err != nil {
			return out, start, err
		}
	}
	return out, start, nil
}

// appendBatches appends the batches of data to out. A partial batch at the
// end is left out when partialTail is set, and an error otherwise; so are
// the zeros storage preallocates after the newest segment's data.
func appendBatches(out []BatchInfo, data []byte, path string, partialTail bool) ([]BatchInfo, error) {
	for pos := 0; pos < len(data); {
		if partialTail && onlyZeroBytes(data[pos:]) {
			break
		}
		b, _, err := record.Frame(data[pos:], record.MaxBatchSize)
		if errors.Is(err, record.ErrShort) && partialTail {
			break
		}
		if err != nil {
			return out, fmt.Errorf("%s at byte %d: %w", path, pos, err)
		}
		bi := BatchInfo{Base: b.BaseOffset(), Next: b.NextOffset(), Epoch: b.LeaderEpoch()}
		err = b.Records(func(r *record.Record) bool {
			bi.Values = append(bi.Values, string(r.Value))
			return true
		})
		if err != nil {
			return out, fmt.Errorf("%s at byte %d: %w", path, pos, err)
		}
		out = append(out, bi)
		pos += b.Size()
	}
	return out, nil
}

// ReadTopicReplicas reads every replica of topic that a node's data
// directory holds, as CheckEpochs takes them: partition -> broker ->
// batches. A replica it cannot read whole keeps the batches read before
// the problem, and the problem is in the returned error.
func ReadTopicReplicas(c *Cluster, topic string) (map[int32]map[int32][]BatchInfo, error) {
	out := map[int32]map[int32][]BatchInfo{}
	var errs []error
	for _, n := range c.Nodes {
		parts, err := n.Partitions(topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", n.ID, err))
		}
		for _, p := range parts {
			b, err := ReadReplica(n.ReplicaDir(topic, p))
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d partition %d: %w", n.ID, p, err))
			}
			if out[p] == nil {
				out[p] = map[int32][]BatchInfo{}
			}
			out[p][n.ID] = b
		}
	}
	return out, errors.Join(errs...)
}

// LeaderSample is what one look at the cluster metadata showed of one
// partition's leadership.
type LeaderSample struct {
	Time      time.Time
	Partition int32
	Leader    int32
	Epoch     int32 // the leader epoch
	// MetadataEpoch is the epoch of the cluster metadata the sample was
	// read from (every change the controller makes bumps it); 0 when
	// unknown.
	MetadataEpoch int64
}

// TopicSamples returns the samples that one description of a topic gives,
// one per partition, for LeaderSampler.Record. metadataEpoch is 0 when the
// description does not say (client.DescribeTopic).
func TopicSamples(tm client.TopicMetadata, metadataEpoch int64, at time.Time) []LeaderSample {
	out := make([]LeaderSample, 0, len(tm.Partitions))
	for _, p := range tm.Partitions {
		out = append(out, LeaderSample{Time: at, Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch, MetadataEpoch: metadataEpoch})
	}
	return out
}

// LeaderSampler records the leadership of a topic's partitions as clients
// see it, polling the cluster's metadata every interval from Start until
// Stop. A poll that fails adds no sample. It is safe for concurrent use.
type LeaderSampler struct {
	c     *Cluster
	topic string
	every time.Duration

	mu struct {
		sync.Mutex
		samples []LeaderSample
		started bool
		cancel  context.CancelFunc // ends the polling; nil when not running
		done    chan struct{}      // closed when the polling has ended
	}
}

// finalSampleTimeout bounds the sample Stop takes after polling ends.
const finalSampleTimeout = 5 * time.Second

// NewLeaderSampler returns a sampler of topic's leadership in c that polls
// every interval (100ms when every is not positive) once started.
func NewLeaderSampler(c *Cluster, topic string, every time.Duration) *LeaderSampler {
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	return &LeaderSampler{c: c, topic: topic, every: every}
}

// Start starts polling. A sampler starts once: later calls do nothing.
func (s *LeaderSampler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started {
		return
	}
	s.mu.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.cancel, s.mu.done = cancel, make(chan struct{})
	go s.run(ctx, s.mu.done)
}

// Stop ends polling, takes one last sample (bounded by a few seconds, and
// skipped if it fails) so that a sampler stopped after the faults healed
// holds the settled leadership, and waits for the polling goroutine. It is
// idempotent.
func (s *LeaderSampler) Stop() {
	s.mu.Lock()
	cancel, done := s.mu.cancel, s.mu.done
	s.mu.cancel = nil
	s.mu.started = true // a stopped sampler never starts
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if done != nil {
		<-done
	}
}

// Record adds samples the caller took itself (for example TopicSamples of
// a description it made).
func (s *LeaderSampler) Record(samples ...LeaderSample) {
	s.mu.Lock()
	s.mu.samples = append(s.mu.samples, samples...)
	s.mu.Unlock()
}

// Samples returns a copy of the samples so far, in the order recorded.
func (s *LeaderSampler) Samples() []LeaderSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.samples)
}

func (s *LeaderSampler) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	// One client for the whole run: it never takes metadata older than
	// what it holds, so its samples never go back in metadata epoch.
	var cl *client.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		cl = s.poll(ctx, cl)
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), finalSampleTimeout)
			cl = s.poll(fctx, cl)
			cancel()
			return
		case <-t.C:
		}
	}
}

// poll takes one sample of every partition with cl (a new client when cl
// is nil) and returns the client to use next.
func (s *LeaderSampler) poll(ctx context.Context, cl *client.Client) *client.Client {
	if ctx.Err() != nil {
		return cl
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cl == nil {
		var err error
		cl, err = client.New(ctx, s.c.Secured(client.Config{Bootstrap: strings.Split(s.c.Bootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
		if err != nil {
			return nil
		}
	}
	m, err := cl.Metadata(ctx)
	if err != nil {
		return cl
	}
	for _, t := range m.Topics {
		if t.Name == s.topic {
			s.Record(TopicSamples(t, m.Epoch, time.Now())...)
		}
	}
	return cl
}

// violationList collects violations by kind, listing at most maxReported of
// each, as CheckHistory does.
type violationList struct {
	list   []string
	counts map[string]int
}

func (v *violationList) add(kind, format string, args ...any) {
	if v.counts == nil {
		v.counts = map[string]int{}
	}
	v.counts[kind]++
	if v.counts[kind] <= maxReported {
		v.list = append(v.list, kind+": "+fmt.Sprintf(format, args...))
	}
}

// result returns the violations, sorted, with a line per kind for those
// not listed.
func (v *violationList) result() []string {
	for kind, n := range v.counts {
		if n > maxReported {
			v.list = append(v.list, fmt.Sprintf("%s: %d more not listed", kind, n-maxReported))
		}
	}
	sort.Strings(v.list)
	return v.list
}

func rfc3339(t time.Time) string { return t.Format(time.RFC3339Nano) }

// controllerChange reports whether ev is a change the controller made and
// persisted: a failover, a dropped follower or a recovery that succeeded
// and was not a dry run. Only these state the controller's metadata;
// catch-up events are added by a leader from its own view.
func controllerChange(ev client.HistoryEvent) bool {
	switch ev.Action {
	case client.ActionFailover, client.ActionElectLeader, client.ActionDropFollower, client.ActionRecover:
		return ev.Error == "" && !ev.DryRun
	}
	return false
}

// TopicEvents returns the events of the audit trail about topic, in order.
func TopicEvents(events []client.HistoryEvent, topic string) []client.HistoryEvent {
	var out []client.HistoryEvent
	for _, ev := range events {
		if ev.Topic == topic {
			out = append(out, ev)
		}
	}
	return out
}

func sortedKeys[K int32 | int64, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CheckEpochs checks invariant 5 of docs/design.md section 10, "one leader per
// (partition, epoch); epochs only increase; no replica accepts an append
// from an older epoch", for one topic: samples of its leadership
// (LeaderSampler), the audit trail's events about it (TopicEvents of
// LoadAuditTrail; events of several topics are refused as a harness
// error), its replicas' logs read after the faults healed (partition ->
// broker -> batches, ReadTopicReplicas) and its active sets then
// (partition -> brokers). Each check uses only what the controller or the
// storage promises, so correct behaviour cannot trip it:
//
//   - two-leaders: no (partition, epoch) is named with two leaders by the
//     samples and the trail together. Every sample is a copy of metadata
//     the controller persisted (a broker's cache may be stale, never
//     invented), a failover persists its new leader with an epoch above
//     any handed out or reserved, and the trail's controller events
//     (failover, drop-follower, recover) name the leader and epoch they
//     read and wrote. Samples naming no leader claim nothing.
//   - epoch-back (samples): ordered by metadata epoch, a partition's leader
//     epoch never decreases; metadata-epoch: one metadata epoch never shows
//     two leader epochs. Samples are not ordered by time: a client asking
//     a broker whose cache is stale (a resumed zombie) sees an older epoch
//     later, which is not a violation. Samples with no metadata epoch take
//     part in two-leaders only.
//   - epoch-back (trail): in the order the controller wrote the trail, every
//     failover's new epoch is above its old one, and every controller
//     event starts from an epoch no lower than the last one the partition
//     reached; together these make failovers' new epochs strictly
//     increase. A failover that died after reserving its epoch leaves a
//     gap, never a decrease. After a violation the partition's epoch is
//     resynchronized, so one bad event is reported once.
//   - log-epoch, log-gap: in every replica's log (active or not), batch
//     epochs never decrease with offset and each batch starts where the
//     one before ended: the storage refuses anything else on append and on
//     open, retention removes whole old segments and truncation cuts a
//     tail. A rebuilt replica may start past 0; only contiguity counts.
//   - zombie: for every failover to epoch E whose new leader's log ended at
//     L (LostFrom), no active replica holds a batch from offset L on with
//     an epoch below E. The new leader was fenced at E when its log end L
//     was read, the other new active replicas agreed with it and ended at
//     or before L, and every replica added later was cut to the leader's
//     log and copied from it; so such a batch can only be an append from
//     an older epoch accepted after the new epoch began. The deposed
//     leader's own log may hold such batches until recovery cuts them: only
//     active replicas are checked.
//   - epoch-ahead: no batch has an epoch above the highest epoch the samples
//     and the trail know for its partition: a leader stamps only the epoch
//     the controller gave it. This relies on a sample taken after the last
//     failover: a LeaderSampler stopped after healing takes one (Stop);
//     a partition with no samples and no events is not checked.
//
// A topic deleted and created again under the same name during the run
// restarts its epochs, which these checks would report.
func CheckEpochs(samples []LeaderSample, events []client.HistoryEvent, replicas map[int32]map[int32][]BatchInfo, active map[int32][]int32) []string {
	var v violationList
	var changes []client.HistoryEvent
	topics := map[string]bool{}
	for _, ev := range events {
		if controllerChange(ev) {
			changes = append(changes, ev)
			topics[ev.Topic] = true
		}
	}
	if len(topics) > 1 {
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		sort.Strings(names)
		v.add("harness", "CheckEpochs was given audit trail events of topics %s; pass one topic's (TopicEvents)", strings.Join(names, ", "))
		return v.result()
	}
	checkLeaderClaims(&v, samples, changes)
	checkSampleOrder(&v, samples)
	checkTrailEpochs(&v, changes)
	checkLogs(&v, replicas)
	checkZombies(&v, changes, replicas, active)
	checkKnownEpochs(&v, samples, changes, replicas)
	return v.result()
}

type partitionEpoch struct {
	p     int32
	epoch int32
}

// checkLeaderClaims reports a (partition, epoch) that the samples and the
// controller's events name with more than one leader.
func checkLeaderClaims(v *violationList, samples []LeaderSample, changes []client.HistoryEvent) {
	claims := map[partitionEpoch]map[int32]string{} // leader -> where it was first named
	var order []partitionEpoch
	claim := func(p, epoch, leader int32, where string) {
		if leader <= 0 {
			return // no leader: a claim about nobody
		}
		k := partitionEpoch{p, epoch}
		if claims[k] == nil {
			claims[k] = map[int32]string{}
			order = append(order, k)
		}
		if _, ok := claims[k][leader]; !ok {
			claims[k][leader] = where
		}
	}
	for _, ev := range changes {
		where := fmt.Sprintf("the audit trail's %s at %s", ev.Action, rfc3339(ev.Time))
		claim(ev.Partition, ev.OldEpoch, ev.OldLeader, where)
		claim(ev.Partition, ev.NewEpoch, ev.NewLeader, where)
	}
	for _, s := range samples {
		claim(s.Partition, s.Epoch, s.Leader, fmt.Sprintf("a sample at %s (metadata epoch %d)", rfc3339(s.Time), s.MetadataEpoch))
	}
	for _, k := range order {
		if len(claims[k]) < 2 {
			continue
		}
		var named []string
		for _, leader := range sortedKeys(claims[k]) {
			named = append(named, fmt.Sprintf("broker %d (%s)", leader, claims[k][leader]))
		}
		v.add("two-leaders", "partition %d epoch %d is led by %s", k.p, k.epoch, strings.Join(named, " and by "))
	}
}

// checkSampleOrder reports a leader epoch that decreases as the metadata
// epoch of the samples increases.
func checkSampleOrder(v *violationList, samples []LeaderSample) {
	byPartition := map[int32][]LeaderSample{}
	for _, s := range samples {
		if s.MetadataEpoch > 0 {
			byPartition[s.Partition] = append(byPartition[s.Partition], s)
		}
	}
	for _, p := range sortedKeys(byPartition) {
		list := byPartition[p]
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].MetadataEpoch != list[j].MetadataEpoch {
				return list[i].MetadataEpoch < list[j].MetadataEpoch
			}
			return list[i].Time.Before(list[j].Time)
		})
		var top *LeaderSample // the highest leader epoch at a lower metadata epoch
		for i := 0; i < len(list); {
			first := list[i]
			j := i + 1
			for ; j < len(list) && list[j].MetadataEpoch == first.MetadataEpoch; j++ {
			}
			for _, s := range list[i+1 : j] {
				if s.Epoch != first.Epoch {
					v.add("metadata-epoch", "partition %d: metadata epoch %d shows leader epoch %d (sample at %s) and %d (sample at %s)",
						p, first.MetadataEpoch, first.Epoch, rfc3339(first.Time), s.Epoch, rfc3339(s.Time))
					break
				}
			}
			switch {
			case top != nil && first.Epoch < top.Epoch:
				v.add("epoch-back", "partition %d: leader epoch %d (broker %d) at metadata epoch %d (sample at %s) after leader epoch %d (broker %d) at metadata epoch %d (sample at %s)",
					p, first.Epoch, first.Leader, first.MetadataEpoch, rfc3339(first.Time), top.Epoch, top.Leader, top.MetadataEpoch, rfc3339(top.Time))
			case top == nil || first.Epoch > top.Epoch:
				top = &list[i]
			}
			i = j
		}
	}
}

// checkTrailEpochs reports, in trail order, a failover that does not raise
// the epoch and an event that starts below the epoch its partition reached.
func checkTrailEpochs(v *violationList, changes []client.HistoryEvent) {
	type reached struct {
		epoch int32
		ev    client.HistoryEvent
	}
	last := map[int32]reached{}
	for _, ev := range changes {
		p := ev.Partition
		prev, seen := last[p]
		switch {
		case (ev.Action == client.ActionFailover || ev.Action == client.ActionElectLeader) && ev.NewEpoch <= ev.OldEpoch:
			v.add("epoch-back", "partition %d: the failover at %s from broker %d to broker %d went from epoch %d to epoch %d, not higher",
				p, rfc3339(ev.Time), ev.OldLeader, ev.NewLeader, ev.OldEpoch, ev.NewEpoch)
			last[p] = reached{ev.NewEpoch, ev} // resynchronize: report one bad event once
			continue
		case seen && ev.OldEpoch < prev.epoch:
			v.add("epoch-back", "partition %d: the audit trail's %s at %s starts from epoch %d after its %s at %s reached epoch %d",
				p, ev.Action, rfc3339(ev.Time), ev.OldEpoch, prev.ev.Action, rfc3339(prev.ev.Time), prev.epoch)
			last[p] = reached{ev.NewEpoch, ev} // resynchronize: report one bad event once
			continue
		}
		last[p] = reached{max(ev.OldEpoch, ev.NewEpoch), ev}
	}
}

// checkLogs reports, in every replica's log, an epoch that decreases with
// offset and offsets that are not contiguous.
func checkLogs(v *violationList, replicas map[int32]map[int32][]BatchInfo) {
	for _, p := range sortedKeys(replicas) {
		for _, b := range sortedKeys(replicas[p]) {
			log := replicas[p][b]
			for i := 1; i < len(log); i++ {
				prev, cur := log[i-1], log[i]
				if cur.Base != prev.Next {
					v.add("log-gap", "partition %d broker %d: batch [%d, %d) follows batch [%d, %d)", p, b, cur.Base, cur.Next, prev.Base, prev.Next)
				}
				if cur.Epoch < prev.Epoch {
					v.add("log-epoch", "partition %d broker %d: batch [%d, %d) has epoch %d after epoch %d of batch [%d, %d)",
						p, b, cur.Base, cur.Next, cur.Epoch, prev.Epoch, prev.Base, prev.Next)
				}
			}
		}
	}
}

// checkZombies reports active replicas holding, at or past where a
// failover's new epoch began, a batch of an older epoch.
func checkZombies(v *violationList, changes []client.HistoryEvent, replicas map[int32]map[int32][]BatchInfo, active map[int32][]int32) {
	for _, ev := range changes {
		if (ev.Action != client.ActionFailover && ev.Action != client.ActionElectLeader) || ev.LostFrom == nil {
			continue
		}
		p, from, epoch := ev.Partition, *ev.LostFrom, ev.NewEpoch
		var holders []string
		var first BatchInfo
		var firstBroker int32
		ids := slices.Clone(active[p])
		slices.Sort(ids)
		for _, b := range ids {
			n := 0
			for _, bi := range replicas[p][b] {
				if bi.Base >= from && bi.Epoch < epoch {
					if len(holders) == 0 && n == 0 {
						first, firstBroker = bi, b
					}
					n++
				}
			}
			if n > 0 {
				holders = append(holders, fmt.Sprintf("broker %d (%d batches)", b, n))
			}
		}
		if len(holders) > 0 {
			v.add("zombie", "partition %d: the failover at %s made broker %d leader in epoch %d from offset %d, yet active %s hold batches of older epochs from there, first [%d, %d) epoch %d on broker %d",
				p, rfc3339(ev.Time), ev.NewLeader, epoch, from, strings.Join(holders, ", "), first.Base, first.Next, first.Epoch, firstBroker)
		}
	}
}

// checkKnownEpochs reports batches stamped with an epoch above any the
// samples and the trail know for their partition.
func checkKnownEpochs(v *violationList, samples []LeaderSample, changes []client.HistoryEvent, replicas map[int32]map[int32][]BatchInfo) {
	known := map[int32]int32{}
	note := func(p, epoch int32) {
		if cur, ok := known[p]; !ok || epoch > cur {
			known[p] = epoch
		}
	}
	for _, s := range samples {
		note(s.Partition, s.Epoch)
	}
	for _, ev := range changes {
		note(ev.Partition, ev.OldEpoch)
		note(ev.Partition, ev.NewEpoch)
	}
	for _, p := range sortedKeys(replicas) {
		top, ok := known[p]
		if !ok {
			continue
		}
		for _, b := range sortedKeys(replicas[p]) {
			n := 0
			var first BatchInfo
			for _, bi := range replicas[p][b] {
				if bi.Epoch > top {
					if n == 0 {
						first = bi
					}
					n++
				}
			}
			if n > 0 {
				v.add("epoch-ahead", "partition %d broker %d: %d batches have epochs above %d, the highest the samples and the audit trail know; first [%d, %d) epoch %d",
					p, b, n, top, first.Base, first.Next, first.Epoch)
			}
		}
	}
}

// LoadAuditTrail returns the controller's audit trail as an operator gets
// it, `gostream-ctl cluster history -o json`, oldest first. It retries for
// a while when the command fails (a controller restarting).
func LoadAuditTrail(c *Cluster) ([]client.HistoryEvent, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, err := loadAuditTrailOnce(c)
		if err == nil {
			return evs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("audit trail: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func loadAuditTrailOnce(c *Cluster) ([]client.HistoryEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "cluster", "history", "-o", "json")
	if err != nil {
		return nil, err
	}
	if res.Exit != 0 {
		return nil, fmt.Errorf("gostream-ctl cluster history exit %d: %s", res.Exit, strings.TrimSpace(res.Stderr))
	}
	return parseAuditTrail([]byte(res.Stdout))
}

// parseAuditTrail decodes the output of cluster history -o json.
func parseAuditTrail(data []byte) ([]client.HistoryEvent, error) {
	var out struct {
		Events *[]client.HistoryEvent `json:"events"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decode cluster history: %w", err)
	}
	if out.Events == nil {
		return nil, errors.New("decode cluster history: no events list")
	}
	return *out.Events, nil
}

// CheckTruncations checks invariant 7 of docs/design.md section 10, "every
// truncation point is above the highest acknowledged offset", for one
// topic, from the files every node's replicas hold after the faults healed
// and from the audit trail:
//
//   - truncated-acked: every record in a file that TruncateTo quarantined
//     (quarantine/<from>-<end>-<time>.log, whole batches) is compared with
//     the acknowledged produces of ops (Kind produce, Result ok). One
//     whose (partition, offset, value) was acknowledged is a violation
//     when no replica's log holds that value at that offset now. This
//     asks exactly whether a cut removed an acknowledged record the
//     replica held, which a bound on offsets cannot: a replica that was
//     out of the active set for a while holds none of the writes
//     acknowledged meanwhile, and writes of a newer epoch are acknowledged
//     at offsets at or past the cut, so an acknowledged offset above a
//     truncation point proves nothing. The "still held" exception keeps
//     correct behaviour out: recovery may cut further than the common
//     prefix and copy the same batches back from the leader (it does when
//     a digest comparison fails), and a truncation that died after its
//     quarantine file was written cut nothing. A cut record below the log
//     start of every replica (removed by retention since) is not judged.
//   - truncated-unquarantined: every recovery in the trail that cut a
//     replica (Truncated = [end, t]) left a file in that replica's
//     quarantine/ starting at t (or, if the replica restarted in between
//     and lost its unsynced tail just down to t, a torn-* file there), so
//     the content check above saw every recorded cut. The recovered broker
//     is the one its event adds to the active set. This assumes no node's
//     data directory is wiped during the run; a replica a move took off
//     its broker later (reassign-finish, reassign-cancel) was deleted with
//     its quarantine/ and is not judged.
//   - truncated-unreadable: a quarantined truncation or a replica's log that
//     cannot be decoded, so the checks above cannot vouch for it.
//
// torn-* files (a torn tail: bytes that were never durable) and damaged-*
// directories (a whole replica moved aside to be rebuilt, whose
// acknowledged records survive elsewhere) are not truncations and are not
// read as such.
func CheckTruncations(c *Cluster, topic string, ops []Op, events []client.HistoryEvent) []string {
	var v violationList
	type rec struct {
		p     int32
		off   int64
		value string
	}
	acked := map[rec]Op{}
	for _, op := range ops {
		if op.Kind == OpProduce && op.Result == ResultOK && op.Offset >= 0 && (op.Topic == topic || op.Topic == "") {
			acked[rec{op.Partition, op.Offset, op.Value}] = op
		}
	}
	type cut struct {
		broker int32
		p      int32
		file   string
		log    []BatchInfo
	}
	type replica struct{ broker, p int32 }
	var cuts []cut
	held := map[rec]bool{}           // what the replicas' logs hold now
	starts := map[int32][]int64{}    // partition -> the log start of each replica
	cutFrom := map[replica][]int64{} // where each replica's quarantined cuts start
	for _, n := range c.Nodes {
		parts, err := n.Partitions(topic)
		if err != nil {
			v.add("truncated-unreadable", "broker %d: %v", n.ID, err)
		}
		for _, p := range parts {
			dir := n.ReplicaDir(topic, p)
			log, start, err := readReplica(dir)
			if err != nil {
				v.add("truncated-unreadable", "partition %d broker %d: log: %v", p, n.ID, err)
			}
			if start >= 0 {
				starts[p] = append(starts[p], start)
			}
			for _, b := range log {
				for i, val := range b.Values {
					held[rec{p, b.Base + int64(i), val}] = true
				}
			}
			entries, err := os.ReadDir(filepath.Join(dir, quarantineDir))
			if err != nil {
				continue // nothing was ever cut
			}
			for _, e := range entries {
				if !e.Type().IsRegular() {
					continue // damaged-* directories among others
				}
				if m := tornFileRE.FindStringSubmatch(e.Name()); m != nil {
					from, _ := strconv.ParseInt(m[1], 10, 64)
					cutFrom[replica{n.ID, p}] = append(cutFrom[replica{n.ID, p}], from)
					continue
				}
				m := truncationFileRE.FindStringSubmatch(e.Name())
				if m == nil {
					continue
				}
				from, _ := strconv.ParseInt(m[1], 10, 64)
				cutFrom[replica{n.ID, p}] = append(cutFrom[replica{n.ID, p}], from)
				path := filepath.Join(dir, quarantineDir, e.Name())
				data, err := os.ReadFile(path)
				if err != nil {
					v.add("truncated-unreadable", "partition %d broker %d: %v", p, n.ID, err)
					continue
				}
				// A partial batch at the end is a quarantine write that
				// died before it was synced, and before anything was cut.
				bs, err := appendBatches(nil, data, path, true)
				if err != nil {
					v.add("truncated-unreadable", "partition %d broker %d: %v", p, n.ID, err)
				}
				cuts = append(cuts, cut{n.ID, p, e.Name(), bs})
			}
		}
	}
	belowEveryStart := func(p int32, off int64) bool {
		if len(starts[p]) == 0 {
			return false
		}
		for _, s := range starts[p] {
			if off >= s {
				return false
			}
		}
		return true
	}
	for _, ct := range cuts {
		for _, b := range ct.log {
			for i, val := range b.Values {
				k := rec{ct.p, b.Base + int64(i), val}
				op, ok := acked[k]
				if !ok || held[k] || belowEveryStart(k.p, k.off) {
					continue
				}
				v.add("truncated-acked", "partition %d offset %d: acknowledged %q (producer %d, acked %s) was cut off broker %d's log (%s/%s, epoch %d) and no replica holds it there now",
					k.p, k.off, val, op.Worker, rfc3339(op.End), ct.broker, quarantineDir, ct.file, b.Epoch)
			}
		}
	}
	// A move that took a broker's replica off deleted it, its quarantine/
	// with it: what a recovery cut before that is gone with the replica.
	removed := map[replica][]time.Time{}
	for _, ev := range events {
		if ev.Topic != topic || ev.Action != client.ActionReassignFinish && ev.Action != client.ActionReassignCancel {
			continue
		}
		for _, b := range ev.OldReplicas {
			if !slices.Contains(ev.NewReplicas, b) {
				removed[replica{b, ev.Partition}] = append(removed[replica{b, ev.Partition}], ev.Time)
			}
		}
	}
	for _, ev := range events {
		if ev.Topic != topic || ev.Action != client.ActionRecover || !controllerChange(ev) || ev.Truncated == nil {
			continue
		}
		var added []int32
		for _, b := range ev.NewActive {
			if !slices.Contains(ev.OldActive, b) {
				added = append(added, b)
			}
		}
		if len(added) != 1 || !slices.ContainsFunc(c.Nodes, func(n *Node) bool { return n.ID == added[0] }) {
			continue
		}
		if slices.Contains(cutFrom[replica{added[0], ev.Partition}], ev.Truncated[1]) {
			continue
		}
		if slices.ContainsFunc(removed[replica{added[0], ev.Partition}], func(at time.Time) bool { return at.After(ev.Time) }) {
			continue
		}
		v.add("truncated-unquarantined", "partition %d: the recovery of broker %d at %s cut its log from %d back to %d, but its %s/ holds nothing cut from offset %d",
			ev.Partition, added[0], rfc3339(ev.Time), ev.Truncated[0], ev.Truncated[1], quarantineDir, ev.Truncated[1])
	}
	return v.result()
}

// onlyZeroBytes reports whether b holds nothing but zeros.
func onlyZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
