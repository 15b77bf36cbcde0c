package testcluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkajsDir is the npm project of the kafkajs checks (kafkajs pinned by
// its lock file). .ci/run installs it (npm ci); without it the test is
// skipped, unless GOSTREAM_REQUIRE_KAFKA_TOOLS=1.
func kafkajsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("kafkajs")
	require.NoError(t, err)
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json"))
	if nodeErr != nil || modErr != nil {
		if os.Getenv("GOSTREAM_REQUIRE_KAFKA_TOOLS") == "1" {
			t.Fatalf("GOSTREAM_REQUIRE_KAFKA_TOOLS=1 but kafkajs cannot run (node: %v; node_modules: %v): npm ci --prefix testcluster/kafkajs", nodeErr, modErr)
		}
		t.Skip("kafkajs is not installed: npm ci --prefix testcluster/kafkajs")
	}
	return dir
}

// kafkajs 2.2.4 (non-flexible versions only) creates a topic through its
// admin client, produces keyed records with a header and their own
// timestamps, plain and gzip'd, with acks=-1 and acks=1, and lists the
// offsets; gostream-ctl consume reads every record as written.
func TestKafkajsProduces(t *testing.T) {
	dir := kafkajsDir(t)
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "produce.js"), c.Node(2).Kafka+","+c.Node(3).Kafka, "js", strconv.Itoa(n))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kafkajs: %s", stderr.String())
	var res struct {
		Offsets []struct {
			Partition int32  `json:"partition"`
			Offset    string `json:"offset"`
			Low       string `json:"low"`
		} `json:"offsets"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	require.Len(t, res.Offsets, 3)
	total := 0
	for _, o := range res.Offsets {
		high, err := strconv.Atoi(o.Offset)
		require.NoError(t, err)
		assert.Equal(t, "0", o.Low)
		total += high
	}
	assert.Equal(t, n, total, "the partitions' high watermarks add up to what kafkajs produced")

	lines := strings.Split(strings.TrimSpace(ctlOK(t, c, "consume", "js", "-o", "json").Stdout), "\n")
	require.Len(t, lines, n)
	seen := map[string]bool{}
	for _, line := range lines {
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		i, err := strconv.Atoi(strings.TrimPrefix(r.Value, "value-"))
		require.NoError(t, err, line)
		assert.Equal(t, "key-"+strconv.Itoa(i%11), r.Key)
		require.Len(t, r.Headers, 1)
		assert.Equal(t, strconv.Itoa(i), r.Headers[0].Value)
		ts, err := time.Parse(time.RFC3339Nano, r.Timestamp)
		require.NoError(t, err)
		assert.Equal(t, int64(1_700_000_000_000+i), ts.UnixMilli(), "the producer's timestamp")
		assert.False(t, seen[r.Value], "%s twice", r.Value)
		seen[r.Value] = true
	}
}

// A kafkajs 2.2.4 consumer group of two members (its round-robin
// assignor, JoinGroup v5 with MEMBER_ID_REQUIRED, non-flexible versions)
// reads every record of a four-partition topic, each partition by one
// member, and commits where it read: gostream-ctl group describe shows
// every partition committed at its end.
func TestKafkajsConsumerGroup(t *testing.T) {
	dir := kafkajsDir(t)
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "1s"}})
	ctlOK(t, c, "topic", "create", "jsg", "--partitions", "4", "--replication-factor", "3")
	want := produceValues(t, c, "jsg", "js", 400)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "group.js"), c.Node(1).Kafka, "jsg", "jsgroup", strconv.Itoa(len(want)))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kafkajs: %s", stderr.String())
	got := map[string]bool{}
	owner := map[int32]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Member    string `json:"member"`
			Partition int32  `json:"partition"`
			Value     string `json:"value"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		got[r.Value] = true
		if o, ok := owner[r.Partition]; ok && o != r.Member {
			// Only a rebalance moves a partition; the member that joined
			// second causes one, and records read before it are read again
			// at most from the last commit.
			t.Logf("partition %d read by %s, then %s", r.Partition, o, r.Member)
		}
		owner[r.Partition] = r.Member
	}
	assert.Equal(t, want, got, "every record read")
	require.Eventually(t, func() bool {
		offs := committedOffsets(t, c, "jsgroup")
		total := int64(0)
		for _, o := range offs {
			total += o
		}
		return len(offs) == 4 && total == int64(len(want))
	}, 30*time.Second, 200*time.Millisecond, "kafkajs's commits: %v", committedOffsets(t, c, "jsgroup"))
}
