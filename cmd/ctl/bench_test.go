package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

	// bench consume reads everything, or --records of it.
	out := ctlOK(t, c, "", "bench", "consume", "--topic", "b", "-o", "json")
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
