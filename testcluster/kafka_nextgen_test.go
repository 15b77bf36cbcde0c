package testcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Two franz-go members of Kafka's new group protocol (ConsumerGroupHeartbeat,
// KIP-848: ServerSideBalancer) and a gostream-ctl consume --group member
// share one group: the coordinator assigns, a partition goes to a member
// only once its owner released it (never two owners at once), every
// record is read, and the Kafka members' commits are gostream's own. One
// franz-go member leaves and the native one is killed with kill -9: the
// last member takes every partition from their commits and reads
// everything new. A classic JoinGroup into the group is refused with
// INCONSISTENT_GROUP_PROTOCOL.
func TestFranzGoNextGenConsumerGroup(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-consumer-session-timeout", "4s"}})
	ctlOK(t, c, "topic", "create", "ng", "--partitions", "6", "--replication-factor", "3")
	first := produceValues(t, c, "ng", "first", 600)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type member struct {
		cl  *kgo.Client
		log *lockedBuffer
		mu  sync.Mutex
		got map[string]bool
	}
	var mu sync.Mutex
	owners := map[int32]string{} // partition -> the franz-go member that owns it now
	var violations []string
	start := func(name string) *member {
		m := &member{got: map[string]bool{}, log: &lockedBuffer{}}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.ConsumerGroup("nggroup"), kgo.ConsumeTopics("ng"),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.WithLogger(kgo.BasicLogger(m.log, kgo.LogLevelInfo, nil)),
			kgo.AutoCommitInterval(200*time.Millisecond), kgo.AutoCommitMarks(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range a["ng"] {
					if o := owners[p]; o != "" && o != name {
						violations = append(violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, name, o))
					}
					owners[p] = name
				}
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
				assert.NoError(t, cl.CommitMarkedOffsets(ctx))
				mu.Lock()
				defer mu.Unlock()
				for _, p := range r["ng"] {
					if owners[p] == name {
						delete(owners, p)
					}
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range l["ng"] {
					if owners[p] == name {
						delete(owners, p)
					}
				}
			}),
		)
		require.NoError(t, err)
		m.cl = cl
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					m.mu.Lock()
					m.got[string(r.Value)] = true
					m.mu.Unlock()
					cl.MarkCommitRecords(r)
				})
			}
		}()
		return m
	}
	read := func(ms ...*member) map[string]bool {
		out := map[string]bool{}
		for _, m := range ms {
			m.mu.Lock()
			for v := range m.got {
				out[v] = true
			}
			m.mu.Unlock()
		}
		return out
	}
	hasAll := func(got, want map[string]bool) bool {
		for v := range want {
			if !got[v] {
				return false
			}
		}
		return true
	}
	a, b := start("a"), start("b")
	defer func() { a.cl.Close() }()
	balanced := func() bool {
		mu.Lock()
		defer mu.Unlock()
		byOwner := map[string]int{}
		for _, o := range owners {
			byOwner[o]++
		}
		return byOwner["a"] == 3 && byOwner["b"] == 3
	}
	require.Eventually(t, func() bool { return balanced() && hasAll(read(a, b), first) }, 90*time.Second, 100*time.Millisecond,
		"both members read every record, three partitions each")
	for _, m := range []*member{a, b} {
		require.Contains(t, m.log.String(), "beginning to manage the next-gen group lifecycle", "franz-go speaks the new protocol")
	}

	// A member of gostream's own protocol joins the same group: it gets
	// its share once the Kafka members released it.
	cl := newClient(t, c)
	nativeOut := &lineReader{}
	cmd := c.CtlCommand(ctx, "-o", "json", "consume", "ng", "--group", "nggroup", "--follow", "--session-timeout", "3s")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go nativeOut.read(stdout)
	t.Cleanup(func() { syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	require.Eventually(t, func() bool {
		d := describeGroup(t, cl, "nggroup")
		owned := 0
		for _, m := range d.Members {
			if len(m.Owned) != 2 {
				return false
			}
			owned += len(m.Owned)
		}
		return len(d.Members) == 3 && owned == 6
	}, 60*time.Second, 100*time.Millisecond, "three members, two partitions each")
	second := produceValues(t, c, "ng", "second", 300)
	nativeRead := func() map[string]bool {
		recs, _ := nativeOut.records(t)
		out := map[string]bool{}
		for _, r := range recs {
			out[r.Value] = true
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := read(a, b)
		for v := range nativeRead() {
			got[v] = true
		}
		return hasAll(got, second)
	}, 60*time.Second, 100*time.Millisecond, "the three members read every new record")
	assert.NotEmpty(t, nativeRead(), "the native member read its share")

	// A classic member cannot join a group of this protocol.
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka))
	require.NoError(t, err)
	defer admin.Close()
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.MemberID, jg.ProtocolType = 5, "nggroup", "", "consumer"
	jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jg.Protocols = append(jg.Protocols, jp)
	jresp, err := jg.RequestWith(ctx, admin)
	require.NoError(t, err)
	assert.Equal(t, kerr.InconsistentGroupProtocol.Code, jresp.ErrorCode)

	// b leaves (epoch -1), the native member is killed: a ends up with
	// every partition and reads every new record.
	b.cl.Close()
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGKILL))
	third := produceValues(t, c, "ng", "third", 300)
	require.Eventually(t, func() bool { return hasAll(read(a), third) }, 60*time.Second, 100*time.Millisecond, "a reads every new record")
	mu.Lock()
	assert.Empty(t, violations)
	mu.Unlock()

	// Its commits are gostream's: they reach the end of every partition.
	hws := map[int32]int64{}
	for p := int32(0); p < 6; p++ {
		o, err := cl.ListOffsets(ctx, "ng", p)
		require.NoError(t, err)
		hws[p] = o.HighWatermark
	}
	require.Eventually(t, func() bool {
		got := committedOffsets(t, c, "nggroup")
		for p, hw := range hws {
			if got[p] != hw {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "the group's commits reach the high watermarks %v", hws)
	res := ctlOK(t, c, "group", "describe", "nggroup")
	assert.True(t, strings.Contains(res.Stdout, "Stable") || strings.Contains(res.Stdout, "stable"), res.Stdout)
}
