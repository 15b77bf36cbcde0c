// Command kafkabench measures a Kafka client, franz-go (pkg/kgo), through
// gostream's Kafka listeners, the way `gostream-ctl bench produce`,
// `bench consume`, `bench consume --group` and `bench commit` measure the
// native client, so that scripts/bench-compare.sh can set the two side by
// side in one run (rows B4 to B8; docs/benchmarks.md).
//
//	kafkabench -brokers HOST:PORT,... [-topic T] [-json] [flags] produce|consume|commit|takeover
//
// The topic must exist.
//
//   - produce: -producers producers, each a kgo.Client of its own (so its
//     own connections), send their share of -records records of -size
//     random bytes, without keys, round robin over the partitions (as
//     gostream-ctl bench produce does), acks=all and idempotent (franz-go's
//     defaults), no compression, linger -linger (5ms), batches up to
//     -batch-bytes (256 KiB) and at most -buffer-bytes (32 MiB) buffered
//     per producer: gostream-ctl bench produce's settings. The latency of
//     a record is from its Produce call to its promise, so it includes the
//     wait in the buffer, as the native bench's does.
//   - consume: one kgo.Client, outside any group, reads every partition
//     from its log start offset, all at once, up to the high watermarks it
//     found at start (or -records records in all), fetching up to
//     -fetch-partition-bytes (1 MiB) per partition, as gostream-ctl bench
//     consume does. Bytes count keys and values. Its percentiles are those
//     of one PollFetches that returned records: franz-go fetches in the
//     background, so they are the wait for buffered data, not one fetch.
//   - consume -group G: -members (1) group members of G, each a
//     kgo.Client of its own, franz-go's default balancer
//     (cooperative-sticky), no commits, read the topic from the log start
//     up to the high watermarks found at start, each record counted once,
//     as gostream-ctl bench consume --group G --members N does. The clock
//     starts when the members are created, so seconds include the join;
//     first_records_s says when the first records came (the join alone)
//     and member_records what each member contributed.
//   - commit: -committers (16) goroutines sharing one kgo.Client, each
//     committing synchronously, one commit at a time, as its own group
//     (-group-prefix P: P-i) from outside any membership (OffsetCommit,
//     generation -1), one offset of its own partition (i modulo the
//     partitions): that partition's high watermark at start, given a
//     record first if it has none. -commits (20000) in all. That is
//     gostream-ctl bench commit's shape; one untimed commit each comes
//     first.
//   - takeover: a producer writes -rate (500) records a second, round
//     robin, while -members (3) member processes of kind -member (kcat:
//     kcat -G; franz-go: this program's member mode; native:
//     gostream-ctl consume --group --follow, at -native-bootstrap) read
//     the topic as group -group with -session and -heartbeat, each
//     printing a line per record. Once every partition has been read by
//     one member only, and every member reads some, for two seconds, the
//     first member is killed with SIGKILL; the run ends when another
//     member has read a record of each of its partitions. It prints
//     takeover_s, the time from the kill to the first of those records,
//     and all_s, to the last partition's. The topic should be new: the
//     members read it from its start.
//
// The clock starts once every client has loaded the topic's metadata (and,
// for consume, found the partitions' offsets).
//
// It prints one human line (stderr with -json) and, with -json, one JSON
// object on stdout with the fields gostream-ctl bench -o json prints
// (records, bytes, seconds, records_per_sec, mb_per_sec, p50_ms, p99_ms,
// p999_ms; MB is 2^20 bytes) and the settings (takeover: its own fields).
// A record that fails, an error from a fetch or a commit, a member that
// exits, or a run not done within -timeout ends it with exit status 2;
// bad usage exits 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type config struct {
	brokers        []string
	topic          string
	records        int64
	size           int
	producers      int
	linger         time.Duration
	batchBytes     int
	bufferBytes    int
	partitioner    string
	fetchPartBytes int
	timeout        time.Duration

	group       string // consume -group, takeover, member
	members     int
	committers  int
	commits     int64
	groupPrefix string

	clientPerCommitter bool

	member          string // takeover: kcat, franz-go or native
	kcat            string
	ctl             string
	nativeBootstrap string
	session         time.Duration
	heartbeat       time.Duration
	rate            int
}

// result is what kafkabench prints with -json: gostream-ctl bench's
// summary, then the settings.
type result struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`

	Mode       string `json:"mode"`
	Client     string `json:"client"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Producers  int    `json:"producers,omitempty"`
	Members    int    `json:"members,omitempty"`
	Committers int    `json:"committers,omitempty"`
	Settings   string `json:"settings"`

	// consume -group: from the start to the first records, what each
	// member counted, and the records read again (not counted).
	FirstRecordsS *float64 `json:"first_records_s,omitempty"`
	MemberRecords []int64  `json:"member_records,omitempty"`
	ReadAgain     *int64   `json:"read_again,omitempty"`
}

const mebibyte = 1 << 20

func main() {
	var cfg config
	brokers := flag.String("brokers", "", "Kafka bootstrap addresses HOST:PORT, comma separated (required)")
	asJSON := flag.Bool("json", false, "print one JSON object on stdout (the human line goes to stderr)")
	flag.StringVar(&cfg.topic, "topic", "bench", "topic to write or read; it must exist")
	flag.Int64Var(&cfg.records, "records", 0, "produce: records in all (default 100000); consume: stop after that many (default every record below the high watermarks)")
	flag.IntVar(&cfg.size, "size", 1024, "produce: value size in bytes")
	flag.IntVar(&cfg.producers, "producers", 1, "produce: producers at once, each its own client, each with its share of -records")
	flag.DurationVar(&cfg.linger, "linger", 5*time.Millisecond, "produce: how long a batch waits for more records")
	flag.IntVar(&cfg.batchBytes, "batch-bytes", 256<<10, "produce: largest batch in bytes")
	flag.IntVar(&cfg.bufferBytes, "buffer-bytes", 32<<20, "produce: bytes of records one producer buffers before Produce waits")
	flag.StringVar(&cfg.partitioner, "partitioner", "round-robin", "produce: round-robin (gostream-ctl bench's) or uniform-bytes (franz-go's default)")
	flag.IntVar(&cfg.fetchPartBytes, "fetch-partition-bytes", 1<<20, "consume: bytes one fetch asks for per partition")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "longest the run may take, setup included")
	flag.StringVar(&cfg.group, "group", "", "consume: read as members of this group (takeover: the group of the members)")
	flag.IntVar(&cfg.members, "members", 0, "consume -group: members, each its own client (default 1); takeover: member processes (default 3)")
	flag.IntVar(&cfg.committers, "committers", 16, "commit: committers at once, each its own group and partition")
	flag.Int64Var(&cfg.commits, "commits", 20000, "commit: commits in all, shared among the committers")
	flag.StringVar(&cfg.groupPrefix, "group-prefix", "kafkabench-commit", "commit: committer i commits as group PREFIX-i")
	flag.BoolVar(&cfg.clientPerCommitter, "client-per-committer", false, "commit: each committer its own kgo.Client (default: one client shared, as gostream-ctl bench commit's committers share one)")
	flag.StringVar(&cfg.member, "member", "franz-go", "takeover: the member processes: kcat (kcat -G), franz-go (kafkabench member) or native (gostream-ctl consume --group)")
	flag.StringVar(&cfg.kcat, "kcat", "kcat", "takeover -member kcat: the kcat binary")
	flag.StringVar(&cfg.ctl, "ctl", "gostream-ctl", "takeover -member native: the gostream-ctl binary")
	flag.StringVar(&cfg.nativeBootstrap, "native-bootstrap", "", "takeover -member native: the nodes' native addresses (gostream-ctl --bootstrap)")
	flag.DurationVar(&cfg.session, "session", 6*time.Second, "takeover, member: the members' session timeout")
	flag.DurationVar(&cfg.heartbeat, "heartbeat", 500*time.Millisecond, "takeover, member: the Kafka members' heartbeat interval (a native member's is the coordinator's)")
	flag.IntVar(&cfg.rate, "rate", 500, "takeover: records produced a second while the members read")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kafkabench -brokers HOST:PORT,... [-topic T] [-json] [flags] produce|consume|commit|takeover")
		flag.PrintDefaults()
	}
	flag.Parse()
	mode := flag.Arg(0)
	if mode == "produce" && cfg.records == 0 {
		cfg.records = 100000
	}
	if cfg.members == 0 {
		cfg.members = 1
		if mode == "takeover" {
			cfg.members = 3
		}
	}
	if *brokers == "" || flag.NArg() != 1 || !slices.Contains([]string{"produce", "consume", "commit", "takeover", "member"}, mode) || cfg.topic == "" ||
		cfg.records < 0 || cfg.size < 0 || cfg.producers < 1 || cfg.linger < 0 || cfg.batchBytes < 512 ||
		cfg.bufferBytes < cfg.size || cfg.fetchPartBytes < 1 || cfg.timeout <= 0 ||
		(cfg.partitioner != "round-robin" && cfg.partitioner != "uniform-bytes") ||
		cfg.members < 1 || cfg.committers < 1 || cfg.commits < 1 || cfg.groupPrefix == "" ||
		((mode == "takeover" || mode == "member") && cfg.group == "") || (mode == "takeover" && cfg.members < 2) ||
		(mode == "takeover" && cfg.member == "native" && cfg.nativeBootstrap == "") ||
		!slices.Contains([]string{"kcat", "franz-go", "native"}, cfg.member) ||
		cfg.session <= 0 || cfg.heartbeat <= 0 || cfg.rate < 1 || cfg.rate > 100000 {
		flag.Usage()
		os.Exit(1)
	}
	cfg.brokers = strings.Split(*brokers, ",")

	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	var (
		r   result
		err error
	)
	switch {
	case mode == "produce":
		r, err = runProduce(ctx, cfg)
	case mode == "consume" && cfg.group != "":
		r, err = runGroupConsume(ctx, cfg)
	case mode == "consume":
		r, err = runConsume(ctx, cfg)
	case mode == "commit":
		r, err = runCommit(ctx, cfg)
	case mode == "takeover":
		tr, err := runTakeover(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkabench: %s: %v\n", mode, err)
			os.Exit(2)
		}
		human := fmt.Sprintf("kafkabench takeover: %s, topic %s, group %s: steady after %.3f s; kill -9 of a member owning partitions %v: the first record of one of them read by another %.3f s after the kill, of each of them %.3f s; %s",
			tr.Member, tr.Topic, tr.Group, tr.SteadyS, tr.Victim, tr.TakeoverS, tr.AllS, tr.Settings)
		emit(*asJSON, human, tr)
		return
	case mode == "member":
		if err := runMember(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "kafkabench: %s: %v\n", mode, err)
			os.Exit(2)
		}
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafkabench: %s: %v\n", mode, err)
		os.Exit(2)
	}
	unit := "records"
	if mode == "commit" {
		unit = "commits"
	}
	human := fmt.Sprintf("kafkabench %s: %s, topic %s (%d partitions): %d %s (%.2f MB) in %.3f s, %.1f %s/s, %.2f MB/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms; %s",
		mode, r.Client, r.Topic, r.Partitions, r.Records, unit, float64(r.Bytes)/mebibyte, r.Seconds,
		r.RecordsPerSec, unit, r.MBPerSec, r.P50Ms, r.P99Ms, r.P999Ms, r.Settings)
	if r.FirstRecordsS != nil {
		human += fmt.Sprintf("; first records after %.3f s; records counted per member: %v; %d read again (not counted)",
			*r.FirstRecordsS, r.MemberRecords, *r.ReadAgain)
	}
	emit(*asJSON, human, r)
}

// emit prints human on stdout, or, with asJSON, human on stderr and v as
// one JSON object on stdout.
func emit(asJSON bool, human string, v any) {
	if !asJSON {
		fmt.Println(human)
		return
	}
	fmt.Fprintln(os.Stderr, human)
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabench:", err)
		os.Exit(2)
	}
}

// clientName is franz-go and the version this binary was built with.
func clientName() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/twmb/franz-go" {
				return "franz-go " + m.Version
			}
		}
	}
	return "franz-go"
}

// partitions returns the partition ids of topic, from a Metadata request
// through cl, which also loads cl's view of the cluster.
func partitions(ctx context.Context, cl *kgo.Client, topic string) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	ids := make([]int32, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		ids = append(ids, p.Partition)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("metadata of %s: no partitions", topic)
	}
	slices.Sort(ids)
	return ids, nil
}

// producer is one of produce's clients. lat is appended to by its
// promises, which franz-go calls one at a time; it is read after pending
// is done.
type producer struct {
	cl      *kgo.Client
	lat     []time.Duration
	pending sync.WaitGroup
}

func runProduce(ctx context.Context, cfg config) (result, error) {
	part := kgo.RoundRobinPartitioner()
	if cfg.partitioner == "uniform-bytes" {
		part = kgo.UniformBytesPartitioner(64<<10, true, true, nil)
	}
	settings := fmt.Sprintf("acks=all, idempotent, no compression, linger %s, batches up to %d bytes, buffer %d bytes a producer, %s partitioner",
		cfg.linger, cfg.batchBytes, cfg.bufferBytes, cfg.partitioner)
	r := result{Mode: "produce", Client: clientName(), Topic: cfg.topic, Producers: cfg.producers, Settings: settings}

	prods := make([]*producer, cfg.producers)
	for i := range prods {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cfg.brokers...),
			kgo.DefaultProduceTopic(cfg.topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerLinger(cfg.linger),
			kgo.ProducerBatchMaxBytes(int32(cfg.batchBytes)),
			kgo.MaxBufferedBytes(cfg.bufferBytes),
			kgo.MaxBufferedRecords(cfg.bufferBytes/max(cfg.size, 1)+1),
			kgo.RecordPartitioner(part),
		)
		if err != nil {
			return r, fmt.Errorf("new client: %w", err)
		}
		defer cl.Close()
		ids, err := partitions(ctx, cl, cfg.topic)
		if err != nil {
			return r, err
		}
		r.Partitions = len(ids)
		prods[i] = &producer{cl: cl, lat: make([]time.Duration, 0, shareOf(cfg.records, cfg.producers, i))}
	}

	value := make([]byte, cfg.size)
	rand.NewChaCha8([32]byte{}).Read(value)
	var (
		failed  atomic.Pointer[error]
		counted atomic.Int64
		wg      sync.WaitGroup
	)
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	start := time.Now()
	for i, p := range prods {
		quota := shareOf(cfg.records, cfg.producers, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range quota {
				if failed.Load() != nil || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				p.pending.Add(1)
				p.cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					defer p.pending.Done()
					if err != nil {
						fail(err)
						return
					}
					p.lat = append(p.lat, time.Since(t0))
					counted.Add(1)
				})
			}
			p.pending.Wait()
		}()
	}
	if err := waitFor(ctx, &wg); err != nil {
		return r, err
	}
	elapsed := time.Since(start)
	if p := failed.Load(); p != nil {
		return r, *p
	}
	all := make([][]time.Duration, len(prods))
	for i, p := range prods {
		all[i] = p.lat
	}
	n := counted.Load()
	r.summarize(n, n*int64(cfg.size), elapsed, slices.Concat(all...))
	return r, nil
}

// shareOf is worker i's share of total among workers, the remainder going
// to the first ones (gostream-ctl bench's split).
func shareOf(total int64, workers, i int) int64 {
	share := total / int64(workers)
	if int64(i) < total%int64(workers) {
		share++
	}
	return share
}

// waitFor waits for wg, or returns ctx's error first.
func waitFor(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("not done within -timeout: %w", ctx.Err())
	}
}

// offsets returns, per partition, the offset ListOffsets answers for
// timestamp (-2 the log start, -1 the high watermark).
func offsets(ctx context.Context, cl *kgo.Client, topic string, ids []int32, timestamp int64) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, id := range ids {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = id
		rp.Timestamp = timestamp
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	out := make(map[int32]int64, len(ids))
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, fmt.Errorf("list offsets of %s: %w", topic, shard.Err)
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, p.Partition, err)
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("list offsets of %s: no answer for partition %d", topic, id)
		}
	}
	return out, nil
}

func runConsume(ctx context.Context, cfg config) (result, error) {
	settings := fmt.Sprintf("no group, every partition from its log start, %d bytes a partition per fetch", cfg.fetchPartBytes)
	r := result{Mode: "consume", Client: clientName(), Topic: cfg.topic, Settings: settings}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.brokers...),
		kgo.FetchMaxPartitionBytes(int32(cfg.fetchPartBytes)),
	)
	if err != nil {
		return r, fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	ids, err := partitions(ctx, cl, cfg.topic)
	if err != nil {
		return r, err
	}
	r.Partitions = len(ids)
	starts, err := offsets(ctx, cl, cfg.topic, ids, -2)
	if err != nil {
		return r, err
	}
	stops, err := offsets(ctx, cl, cfg.topic, ids, -1)
	if err != nil {
		return r, err
	}
	var available int64
	from := make(map[int32]kgo.Offset, len(ids))
	next := make(map[int32]int64, len(ids)) // the next offset to count, per partition
	for _, id := range ids {
		available += stops[id] - starts[id]
		from[id] = kgo.NewOffset().At(starts[id])
		next[id] = starts[id]
	}
	target := available
	if cfg.records > 0 {
		target = min(cfg.records, available)
	}
	done := func(counted int64) bool {
		if counted >= target {
			return true
		}
		for _, id := range ids {
			if next[id] < stops[id] {
				return false
			}
		}
		return true
	}

	var (
		counted, size int64
		lat           []time.Duration
	)
	start := time.Now()
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.topic: from})
	for !done(counted) {
		t0 := time.Now()
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("%d of %d records within -timeout: %w", counted, target, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return r, ferr
		}
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			if rec.Offset < next[rec.Partition] || rec.Offset >= stops[rec.Partition] || counted >= target {
				return
			}
			next[rec.Partition] = rec.Offset + 1
			counted++
			size += int64(len(rec.Key) + len(rec.Value))
		})
		if n > 0 {
			lat = append(lat, time.Since(t0))
		}
	}
	r.summarize(counted, size, time.Since(start), lat)
	return r, nil
}

// summarize fills r's figures in from records, bytes, the time they took
// and the latencies measured.
func (r *result) summarize(records, bytes int64, elapsed time.Duration, lat []time.Duration) {
	r.Records, r.Bytes, r.Seconds = records, bytes, elapsed.Seconds()
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(records) / r.Seconds
		r.MBPerSec = float64(bytes) / mebibyte / r.Seconds
	}
	slices.Sort(lat)
	r.P50Ms, r.P99Ms, r.P999Ms = ms(quantile(lat, 500)), ms(quantile(lat, 990)), ms(quantile(lat, 999))
}

// quantile is the perMille-th quantile of sorted lat, 0 if it is empty.
func quantile(lat []time.Duration, perMille int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[(len(lat)*perMille-1)/1000]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
