package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

// runMainEnv makes the test binary run kafkabench's main instead of the
// tests: takeover starts its franz-go members as its own executable, which
// under go test is this binary.
const runMainEnv = "KAFKABENCH_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startGroupCluster(t *testing.T) (*testcluster.Cluster, []string) {
	t.Helper()
	c, err := testcluster.New(testcluster.Config{Nodes: 3, Kafka: true, Dir: t.TempDir(), Logf: t.Logf,
		NodeArgs: []string{"--group-initial-rebalance-delay", "500ms"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d log tail:\n%s", n.ID, n.LogTail(40))
			}
		}
	})
	require.NoError(t, c.Start())
	var brokers []string
	for _, n := range c.Nodes {
		brokers = append(brokers, n.Kafka)
	}
	return c, brokers
}

// What bench-compare's B6 and B7 rest on: consume -group counts every
// record of the topic once, as gostream-ctl bench consume --group does of
// the same topic, with the members' shares adding up and the join timed
// apart; commit makes -commits commits, each committer as its own group,
// of its own partition's high watermark, which gostream-ctl group
// describe then shows.
func TestKafkabenchGroupConsumeAndCommit(t *testing.T) {
	c, brokers := startGroupCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl(t, c, "topic", "create", "six", "--partitions", "6", "--replication-factor", "3")
	cfg := testConfig(brokers, "six")
	cfg.records = 6000
	_, err := runProduce(ctx, cfg)
	require.NoError(t, err)

	cfg = testConfig(brokers, "six")
	cfg.group, cfg.members = "kgroup", 3
	r, err := runGroupConsume(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(6000), r.Records)
	assert.Equal(t, int64(6000*100), r.Bytes)
	assert.Equal(t, 6, r.Partitions)
	require.Len(t, r.MemberRecords, 3)
	assert.Equal(t, int64(6000), r.MemberRecords[0]+r.MemberRecords[1]+r.MemberRecords[2])
	require.NotNil(t, r.FirstRecordsS)
	assert.Positive(t, *r.FirstRecordsS)
	assert.Less(t, *r.FirstRecordsS, r.Seconds)
	var native struct{ Records, Bytes int64 }
	require.NoError(t, json.Unmarshal([]byte(ctl(t, c, "bench", "consume", "--topic", "six", "--group", "ngroup", "--members", "3", "-o", "json")), &native))
	assert.Equal(t, native.Records, r.Records, "gostream-ctl bench consume --group's count")
	assert.Equal(t, native.Bytes, r.Bytes, "gostream-ctl bench consume --group's bytes")
	// The members left and committed nothing.
	assert.Contains(t, ctl(t, c, "group", "describe", "kgroup"), "empty")
	assert.Empty(t, committed(t, c, "kgroup"))

	// Six committers over four partitions, one of them empty.
	ctl(t, c, "topic", "create", "four", "--partitions", "4", "--replication-factor", "3")
	ctlIn(t, c, "a\nb\nc\n", "produce", "four", "--partition", "1")
	cfg = testConfig(brokers, "four")
	cfg.committers, cfg.commits, cfg.groupPrefix = 6, 60, "kc"
	r, err = runCommit(ctx, cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(60), r.Records)
	assert.Positive(t, r.RecordsPerSec)
	assert.Positive(t, r.P50Ms)
	for i, want := range map[int]map[int32]int64{0: {0: 1}, 1: {1: 3}, 2: {2: 1}, 3: {3: 1}, 4: {0: 1}, 5: {1: 3}} {
		assert.Equal(t, want, committed(t, c, fmt.Sprintf("kc-%d", i)), "group kc-%d", i)
	}
}

// What B8 rests on: takeover kills one of three members, of each kind,
// once every partition has one reader, and measures the time until
// another member reads one of its partitions: never before the killed
// member's session can have run out (its last heartbeat at most one
// interval before the kill), and within the session, a heartbeat and
// a few seconds of slack on a loaded machine.
func TestKafkabenchTakeover(t *testing.T) {
	c, brokers := startGroupCluster(t)
	t.Setenv(runMainEnv, "1") // for the franz-go members
	kinds := []string{"franz-go", "native"}
	kcat, err := exec.LookPath("kcat")
	if err == nil {
		kinds = append(kinds, "kcat")
	} else {
		t.Log("kcat is not installed: no kcat members")
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			topic := "take-" + kind
			ctl(t, c, "topic", "create", topic, "--partitions", "6", "--replication-factor", "3")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := testConfig(brokers, topic)
			cfg.group, cfg.members, cfg.member, cfg.kcat, cfg.ctl = topic, 3, kind, kcat, c.Bins.Ctl
			cfg.nativeBootstrap = c.Bootstrap()
			cfg.session, cfg.heartbeat, cfg.rate = 2*time.Second, 200*time.Millisecond, 200
			r, err := runTakeover(ctx, cfg)
			require.NoError(t, err)
			t.Logf("%+v", r)
			assert.Equal(t, kind, r.Member)
			assert.Len(t, r.Victim, 2, "the killed member read two of the six partitions")
			assert.GreaterOrEqual(t, r.TakeoverS, (2*time.Second - 200*time.Millisecond).Seconds())
			assert.Less(t, r.TakeoverS, 7.0)
			assert.GreaterOrEqual(t, r.AllS, r.TakeoverS)
			assert.Positive(t, r.SteadyS)
		})
	}
}

// committed is the group's committed offset per partition, as gostream-ctl
// group describe shows them.
func committed(t *testing.T, c *testcluster.Cluster, group string) map[int32]int64 {
	t.Helper()
	var d struct {
		Offsets []struct {
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
		} `json:"offsets"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctl(t, c, "group", "describe", group, "-o", "json")), &d))
	out := map[int32]int64{}
	for _, o := range d.Offsets {
		if o.Committed != nil {
			out[o.Partition] = *o.Committed
		}
	}
	return out
}

func ctlIn(t *testing.T, c *testcluster.Cluster, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, stdin, args...)
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "gostream-ctl %v: %s", args, res.Stderr)
	return res.Stdout
}
