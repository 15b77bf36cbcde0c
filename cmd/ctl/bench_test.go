package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

// benchResult is the summary of bench produce and bench consume -o json.
type benchResult struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
}

func checkBenchResult(t *testing.T, out string, records, bytes int64) {
	t.Helper()
	requireKeys(t, json.RawMessage(out), "records", "bytes", "seconds", "records_per_sec", "mb_per_sec",
		"p50_ms", "p99_ms", "p999_ms")
	var r benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, records, r.Records)
	assert.Equal(t, bytes, r.Bytes)
	assert.Greater(t, r.Seconds, 0.0)
	assert.InEpsilon(t, float64(records)/r.Seconds, r.RecordsPerSec, 1e-6)
	assert.InEpsilon(t, float64(bytes)/(1<<20)/r.Seconds, r.MBPerSec, 1e-6)
	assert.Greater(t, r.P50Ms, 0.0)
	assert.LessOrEqual(t, r.P50Ms, r.P99Ms)
	assert.LessOrEqual(t, r.P99Ms, r.P999Ms)
	assert.Less(t, r.P999Ms, r.Seconds*1000+1)
}

func TestBench(t *testing.T) {
	c := startCluster(t)

	// The topic does not exist: bench produce creates it.
	res := ctl(t, c, "", "bench", "produce", "--records", "2000", "--topic", "b", "--partitions", "3", "-o", "json")
	require.Equal(t, 0, res.Exit, res.Stderr)
	require.Len(t, lines(res.Stdout), 1, "one JSON object")
	checkBenchResult(t, res.Stdout, 2000, 2000*1024)
	assert.Contains(t, res.Stderr, "bench: created topic b: 3 partitions, replication factor 1")
	assert.Contains(t, ctlOK(t, c, "", "topic", "list"), "b ")

	// --sync, two producers, small records, table output.
	res = ctl(t, c, "", "bench", "produce", "--records", "101", "--topic", "b", "--sync", "--producers", "2", "--record-size", "10")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stdout, "bench produce: 101 records (0.00 MB) in "), res.Stdout)
	for _, want := range []string{"records/s", "MB/s", "p50 ", "p99 ", "p99.9 ", "send to acknowledgment"} {
		assert.Contains(t, res.Stdout, want)
	}
	assert.Contains(t, res.Stderr, "2 producers, sync, linger none")

	// --rate paces the records: 50 at 100 a second take half a second
	// in all, two producers of 25 each (the last due at 0.48 s), however
	// fast the cluster is.
	out := ctlOK(t, c, "", "bench", "produce", "--records", "50", "--topic", "paced", "--rate", "100", "--producers", "2", "-o", "json")
	checkBenchResult(t, out, 50, 50*1024)
	var paced benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &paced))
	assert.GreaterOrEqual(t, paced.Seconds, 0.48)
	assert.LessOrEqual(t, paced.RecordsPerSec, 105.0)

	// bench consume reads everything, or --records of it.
	out = ctlOK(t, c, "", "bench", "consume", "--topic", "b", "-o", "json")
	checkBenchResult(t, out, 2101, 2000*1024+101*10)
	out = ctlOK(t, c, "", "bench", "consume", "--topic", "b", "--records", "500", "-o", "json")
	var r benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, int64(500), r.Records)
	out = ctlOK(t, c, "", "bench", "consume", "--topic", "b")
	assert.True(t, strings.HasPrefix(out, "bench consume: 2101 records"), out)

	// A sealed topic fails the bench with its name, after the summary.
	ctlOK(t, c, "", "topic", "seal", "b")
	// Progress goes to stderr too, so the error is its last line.
	res = ctl(t, c, "", "bench", "produce", "--records", "10", "--topic", "b", "-o", "json")
	assert.Equal(t, 2, res.Exit)
	stderr := lines(res.Stderr)
	require.NotEmpty(t, stderr)
	assert.True(t, strings.HasPrefix(stderr[len(stderr)-1], "TopicSealed: "), res.Stderr)
	checkBenchResultRecords(t, res.Stdout, 0)
}

func checkBenchResultRecords(t *testing.T, out string, records int64) {
	t.Helper()
	var r benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Equal(t, records, r.Records)
}

// checkCountResult checks a summary of bench commit: records counts the
// commits, and there are no bytes.
func checkCountResult(t *testing.T, out string, records int64) {
	t.Helper()
	requireKeys(t, json.RawMessage(out), "records", "bytes", "seconds", "records_per_sec", "mb_per_sec",
		"p50_ms", "p99_ms", "p999_ms")
	var r benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, records, r.Records)
	assert.Zero(t, r.Bytes)
	assert.Zero(t, r.MBPerSec)
	assert.Greater(t, r.Seconds, 0.0)
	assert.InEpsilon(t, float64(records)/r.Seconds, r.RecordsPerSec, 1e-6)
	assert.Greater(t, r.P50Ms, 0.0)
	assert.LessOrEqual(t, r.P50Ms, r.P99Ms)
	assert.LessOrEqual(t, r.P99Ms, r.P999Ms)
	assert.Less(t, r.P999Ms, r.Seconds*1000+1)
}

// committedOffsets returns group's committed offset of each partition of
// topic that has one, from group describe.
func committedOffsets(t *testing.T, c *testcluster.Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for _, o := range describeGroupJSON(t, c, group).Offsets {
		if o.Topic == topic && o.Committed != nil {
			out[o.Partition] = *o.Committed
		}
	}
	return out
}

func TestBenchCommit(t *testing.T) {
	c := startCluster(t)

	// bench commit creates its topic, one partition a committer, gives
	// each partition a record and commits offset 1 again and again.
	res := ctl(t, c, "", "bench", "commit", "--committers", "2", "--commits", "50", "-o", "json")
	require.Equal(t, 0, res.Exit, res.Stderr)
	require.Len(t, lines(res.Stdout), 1, "one JSON object")
	checkCountResult(t, res.Stdout, 50)
	assert.Contains(t, res.Stderr, "bench: created topic bench-commit: 2 partitions, replication factor 1")
	assert.Contains(t, res.Stderr, "2 committers (groups bench-commit-0 to bench-commit-1)")
	assert.Equal(t, map[int32]int64{0: 1}, committedOffsets(t, c, "bench-commit-0", "bench-commit"))
	assert.Equal(t, map[int32]int64{1: 1}, committedOffsets(t, c, "bench-commit-1", "bench-commit"))

	// Again, with more committers than partitions (committer 2 takes
	// partition 0), a share that does not divide, and table output.
	res = ctl(t, c, "", "bench", "commit", "--committers", "3", "--commits", "7", "--group-prefix", "other")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stdout, "bench commit: 7 commits in "), res.Stdout)
	for _, want := range []string{"commits/s", "p50 ", "p99 ", "p99.9 ", "request to acknowledgment"} {
		assert.Contains(t, res.Stdout, want)
	}
	assert.NotContains(t, res.Stdout, "MB")
	assert.Contains(t, res.Stderr, "bench: topic bench-commit exists")
	assert.Equal(t, map[int32]int64{0: 1}, committedOffsets(t, c, "other-2", "bench-commit"))
}

func TestBenchGroupConsume(t *testing.T) {
	c := startCluster(t)

	// bench consume --group reads everything once, whatever the members'
	// share, and commits nothing without --commit.
	ctlOK(t, c, "", "bench", "produce", "--topic", "g", "--partitions", "3", "--records", "300", "--record-size", "10")
	res := ctl(t, c, "", "bench", "consume", "--topic", "g", "--group", "g1", "--members", "2", "-o", "json")
	require.Equal(t, 0, res.Exit, res.Stderr)
	require.Len(t, lines(res.Stdout), 1, "one JSON object")
	checkBenchResult(t, res.Stdout, 300, 3000)
	assert.Contains(t, res.Stderr, "bench consume: 300 records from g, 3 partitions, as 2 members of group g1, no commits")
	assert.Contains(t, res.Stderr, "records counted per member: ")
	// The members settled before the clock: both read their share (not
	// the first alone while the other joined).
	m := regexp.MustCompile(`records counted per member: (\d+), (\d+);`).FindStringSubmatch(res.Stderr)
	require.Len(t, m, 3, res.Stderr)
	assert.NotEqual(t, "0", m[1], res.Stderr)
	assert.NotEqual(t, "0", m[2], res.Stderr)
	assert.Contains(t, res.Stderr, "the members settled in ")
	assert.Empty(t, committedOffsets(t, c, "g1", "g"))
	// The members left: the group can be read again, from the start.
	out := ctlOK(t, c, "", "bench", "consume", "--topic", "g", "--group", "g1", "--records", "120")
	assert.True(t, strings.HasPrefix(out, "bench consume: 120 records (0.00 MB) in "), out)
	assert.Contains(t, out, "(one Poll)")

	// With --commit what is read is committed: a second run of the group
	// has nothing left to read.
	out = ctlOK(t, c, "", "bench", "consume", "--topic", "g", "--group", "g2", "--members", "2", "--commit", "-o", "json")
	checkBenchResult(t, out, 300, 3000)
	assert.Equal(t, map[int32]int64{0: 100, 1: 100, 2: 100}, committedOffsets(t, c, "g2", "g"))
	res = ctl(t, c, "", "bench", "consume", "--topic", "g", "--group", "g2", "-o", "json")
	require.Equal(t, 0, res.Exit, res.Stderr)
	checkBenchResultRecords(t, res.Stdout, 0)
	assert.Contains(t, res.Stderr, "group g2 has committed offsets of g: its members start there")

	ctlFails(t, c, 2, "UnknownTopic: ", "", "bench", "consume", "--topic", "nope", "--group", "g3")
}

func TestBenchUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "commit", "--committers", "0"}, "InvalidFlag: --committers 0: want a positive number"},
		{[]string{"bench", "commit", "--commits", "0"}, "InvalidFlag: --commits 0: want a positive number"},
		{[]string{"bench", "commit", "--commits", "-3"}, "InvalidFlag: --commits -3"},
		{[]string{"bench", "commit", "--replication-factor", "0"}, "InvalidFlag: --replication-factor 0"},
		{[]string{"bench", "commit", "--duration", "-1s"}, "InvalidFlag: --duration -1s"},
		{[]string{"bench", "commit", "--group-prefix", ""}, "InvalidFlag: --group-prefix"},
		{[]string{"bench", "commit", "--committers", "many"}, "InvalidFlag: "},
		{[]string{"bench", "commit", "x"}, `UnexpectedArgument: "x"`},
		{[]string{"bench", "consume", "--members", "2"}, "InvalidFlag: --members needs --group"},
		{[]string{"bench", "consume", "--commit"}, "InvalidFlag: --commit needs --group"},
		{[]string{"bench", "consume", "--group", "g", "--members", "0"}, "InvalidFlag: --members 0: want a positive number"},
		{[]string{"bench", "consume", "--group", ""}, "InvalidFlag: --group: want a group name"},
		{[]string{"bench", "consume", "--group", "g", "--records", "0"}, "InvalidFlag: --records 0"},
		{[]string{"bench", "produce", "--idempotent", "--max-in-flight", "6"}, "InvalidFlag: --max-in-flight 6: an idempotent producer has at most 5"},
		{[]string{"bench", "produce", "--rate", "-5"}, "InvalidFlag: --rate -5: want records a second"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCtl(t, nil, tt.args...)
			assert.Equal(t, 1, code)
			assert.True(t, strings.HasPrefix(stderr, tt.want), "stderr %q should start with %q", stderr, tt.want)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.Empty(t, stdout)
		})
	}
}
