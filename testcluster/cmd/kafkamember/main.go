// Command kafkamember is one member of a Kafka consumer group, for the
// chaos harness of package testcluster: a franz-go group consumer of one
// topic with the cooperative-sticky balancer that prints, on stdout, one
// JSON line for every event the harness checks, so that a kill -9 or a
// SIGSTOP of the process is a real member's crash or pause.
//
// Lines, each with "t", the time in Unix nanoseconds:
//
//	{"event":"assigned","member":M,"generation":G,"added":[...],"owned":[...]}
//	{"event":"revoked","member":M,"generation":G,"partitions":[...],"owned":[...]}
//	{"event":"lost","member":M,"generation":G,"partitions":[...],"owned":[...]}
//	{"event":"record","partition":P,"offset":O,"value":V}
//	{"event":"committed","member":M,"generation":G,"offsets":{"P":O,...}}
//
// franz-go calls OnPartitionsAssigned after every SyncGroup of the
// cooperative protocol, whether or not anything was added, once the
// partitions the new assignment takes away are revoked: so "owned" of an
// assigned line is everything this member owns in generation G. A record
// line is printed before its offset is committed, and a committed line
// only for the partitions the coordinator acknowledged, with the
// generation the commit carried. Commits are explicit (no autocommit),
// of what was printed: every --commit-interval while it reads, as
// gostream-ctl consume --group does, and in OnPartitionsRevoked;
// BlockRebalanceOnPoll keeps the rebalance callbacks from running while a
// poll's records are being printed, so nothing is committed that was not
// printed. SIGTERM commits, leaves the group and exits 0.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// event is one line of output.
type event struct {
	Event      string          `json:"event"`
	T          int64           `json:"t"`
	Member     string          `json:"member,omitempty"`
	Generation int32           `json:"generation,omitempty"`
	Added      []int32         `json:"added,omitempty"`
	Partitions []int32         `json:"partitions,omitempty"`
	Owned      []int32         `json:"owned,omitempty"`
	Partition  int32           `json:"partition"`
	Offset     int64           `json:"offset"`
	Value      string          `json:"value,omitempty"`
	Offsets    map[int32]int64 `json:"offsets,omitempty"`
}

// member is the consumer and what it owns, as its callbacks were told.
type member struct {
	topic string
	cl    *kgo.Client

	mu    sync.Mutex // guards out and owned
	out   *bufio.Writer
	owned map[int32]bool
}

func main() {
	brokers := flag.String("brokers", "", "comma-separated Kafka listeners")
	group := flag.String("group", "", "consumer group")
	topic := flag.String("topic", "", "topic to consume")
	instance := flag.String("instance-id", "", "group.instance.id: a static member")
	session := flag.Duration("session-timeout", 3*time.Second, "session timeout")
	heartbeat := flag.Duration("heartbeat-interval", 500*time.Millisecond, "heartbeat interval")
	rebalance := flag.Duration("rebalance-timeout", 10*time.Second, "rebalance timeout")
	every := flag.Duration("commit-interval", 200*time.Millisecond, "how often to commit what was printed while reading")
	ca := flag.String("tls-ca", "", "CA file: speak TLS")
	user := flag.String("sasl-user", "", "SASL/PLAIN user")
	passFile := flag.String("sasl-password-file", "", "file holding the SASL/PLAIN password")
	flag.Parse()
	if *brokers == "" || *group == "" || *topic == "" {
		fmt.Fprintln(os.Stderr, "kafkamember: --brokers, --group and --topic are required")
		os.Exit(1)
	}
	m := &member{topic: *topic, out: bufio.NewWriter(os.Stdout), owned: map[int32]bool{}}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.SessionTimeout(*session), kgo.HeartbeatInterval(*heartbeat),
		kgo.RebalanceTimeout(*rebalance), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.ClientID("chaos-kafkamember"),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(m.assigned), kgo.OnPartitionsRevoked(m.revoked), kgo.OnPartitionsLost(m.lost),
	}
	if *instance != "" {
		opts = append(opts, kgo.InstanceID(*instance))
	}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkamember: %v\n", err)
			os.Exit(1)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if *user != "" {
		pass, err := os.ReadFile(*passFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkamember: %v\n", err)
			os.Exit(1)
		}
		opts = append(opts, kgo.SASL(plain.Auth{User: *user, Pass: strings.TrimSpace(string(pass))}.AsMechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafkamember: %v\n", err)
		os.Exit(1)
	}
	m.cl = cl
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	m.consume(ctx, *every)
	// Close runs OnPartitionsRevoked (which commits) and leaves the group.
	cl.Close()
	m.mu.Lock()
	m.out.Flush()
	m.mu.Unlock()
}

// consume prints every record polled, and commits what it printed every
// interval, until ctx ends.
func (m *member) consume(ctx context.Context, every time.Duration) {
	var last time.Time
	for {
		// Polls end at least every interval, so that what was printed
		// is committed when no more records come.
		pctx, cancel := context.WithTimeout(ctx, every)
		fs := m.cl.PollRecords(pctx, 1000)
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			m.cl.AllowRebalance()
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(os.Stderr, "kafkamember: fetch %s/%d: %v\n", topic, p, err)
			}
		})
		m.mu.Lock()
		now := time.Now().UnixNano()
		fs.EachRecord(func(r *kgo.Record) {
			m.writeLocked(event{Event: "record", T: now, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		m.out.Flush()
		m.mu.Unlock()
		if time.Since(last) >= every {
			m.commit()
			last = time.Now()
		}
		m.cl.AllowRebalance()
	}
}

// commit commits every offset polled and not yet committed, and prints
// the partitions the coordinator acknowledged.
func (m *member) commit() {
	offs := m.cl.UncommittedOffsets()
	if len(offs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "kafkamember: commit: %v\n", err)
			return
		}
		asked := map[int32]int64{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				asked[p.Partition] = p.Offset
			}
		}
		acked := map[int32]int64{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if o, ok := asked[p.Partition]; ok && p.ErrorCode == 0 && t.Topic == m.topic {
					acked[p.Partition] = o
				}
			}
		}
		if len(acked) == 0 {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.writeLocked(event{Event: "committed", T: time.Now().UnixNano(), Member: req.MemberID, Generation: req.Generation, Offsets: acked})
		m.out.Flush()
	})
}

func (m *member) assigned(_ context.Context, cl *kgo.Client, added map[string][]int32) {
	m.note("assigned", cl, added[m.topic], true)
}

// revoked commits what was printed of the partitions taken away, before
// they go to another member.
func (m *member) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	m.commit()
	if len(revoked[m.topic]) > 0 {
		m.note("revoked", cl, revoked[m.topic], false)
	}
}

func (m *member) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	if len(lost[m.topic]) > 0 {
		m.note("lost", cl, lost[m.topic], false)
	}
}

// note updates what the member owns and prints the event.
func (m *member) note(kind string, cl *kgo.Client, parts []int32, add bool) {
	id, gen := cl.GroupMetadata()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range parts {
		if add {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
	owned := []int32{}
	for p := range m.owned {
		owned = append(owned, p)
	}
	slices.Sort(owned)
	parts = slices.Clone(parts)
	slices.Sort(parts)
	e := event{Event: kind, T: time.Now().UnixNano(), Member: id, Generation: gen, Owned: owned}
	if add {
		e.Added = parts
	} else {
		e.Partitions = parts
	}
	m.writeLocked(e)
	m.out.Flush()
}

func (m *member) writeLocked(e event) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // an event always encodes
	}
	m.out.Write(append(b, '\n'))
}
