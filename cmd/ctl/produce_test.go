package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/testcluster"
)

// produced is one line of produce -o json.
type produced struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Line        int    `json:"line"`
}

// consumed is one line of consume -o json.
type consumed struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp string  `json:"timestamp"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
	Encoding string `json:"encoding"`
}

type partitionOffset struct {
	partition int32
	offset    int64
}

// byPosition decodes the output of consume -o json, keyed by where each
// record is.
func byPosition(t *testing.T, out string) map[partitionOffset]consumed {
	t.Helper()
	all := make(map[partitionOffset]consumed)
	for _, r := range decodeLines[consumed](t, out) {
		all[partitionOffset{r.Partition, r.Offset}] = r
	}
	return all
}

var ackLine = regexp.MustCompile(`^([a-z-]+)/(\d+)@(\d+) \(value (\d+)\)$`)

func TestProduceFromArguments(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "3")

	// Without a key, round robin: three records, three partitions.
	out := ctlOK(t, c, "", "produce", "t", "a", "b", "c")
	require.Len(t, lines(out), 3, out)
	seen := map[string]bool{}
	for i, l := range lines(out) {
		m := ackLine.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		assert.Equal(t, "t", m[1])
		assert.Equal(t, "0", m[3], "the first record of each partition")
		assert.Equal(t, strconv.Itoa(i+1), m[4], "the VALUE's number")
		seen[m[2]] = true
	}
	assert.Len(t, seen, 3, "round robin across the partitions: %s", out)

	// JSON: one object per record, in input order, with docs/cli.md's fields.
	out = ctlOK(t, c, "", "produce", "t", "--partition", "1", "x", "y", "-o", "json")
	require.Len(t, lines(out), 2)
	for i, l := range lines(out) {
		m := requireKeys(t, json.RawMessage(l), "topic", "partition", "offset", "leader", "leader_epoch", "line")
		assert.JSONEq(t, `"t"`, string(m["topic"]))
		assert.JSONEq(t, `1`, string(m["partition"]))
		assert.JSONEq(t, strconv.Itoa(1+i), string(m["offset"]))
		assert.JSONEq(t, `1`, string(m["leader"]))
		assert.JSONEq(t, `0`, string(m["leader_epoch"]))
		assert.JSONEq(t, strconv.Itoa(1+i), string(m["line"]), "the VALUE's number")
	}

	// Headers, with a comma and an empty value; a key given empty is a key.
	ctlOK(t, c, "", "produce", "t", "--partition", "2", "--key", "", "--header", "a=b,c", "--header", "e=", "hv")
	ctlOK(t, c, "", "produce", "t", "--partition", "2", "nokey")
	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "t", "--partition", "2", "-o", "json"))
	require.Len(t, recs, 3)
	assert.Equal(t, "hv", recs[1].Value)
	require.NotNil(t, recs[1].Key)
	assert.Equal(t, "", *recs[1].Key, "an empty key is not null")
	require.Len(t, recs[1].Headers, 2)
	assert.Equal(t, "a", recs[1].Headers[0].Key)
	assert.Equal(t, "b,c", recs[1].Headers[0].Value)
	assert.Equal(t, "e", recs[1].Headers[1].Key)
	assert.Equal(t, "", recs[1].Headers[1].Value)
	assert.Equal(t, "nokey", recs[2].Value)
	assert.Nil(t, recs[2].Key, "no --key is a null key")
	assert.NotNil(t, recs[2].Headers)
	assert.Empty(t, recs[2].Headers)
	table := lines(ctlOK(t, c, "", "consume", "t", "--partition", "2", "--offset", "1"))
	assert.Equal(t, withHeader("2\t1\t\"\"\thv", "2\t2\t(null)\tnokey"), table)

	ctlFails(t, c, 2, "UnknownPartition: ", "", "produce", "t", "--partition", "3", "v")
}

func TestProduceFromStdin(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "3")

	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	out := ctlOK(t, c, in.String(), "produce", "t")
	assert.Equal(t, "produced 1000 records to t (partitions 0,1,2)\n", out)

	// JSON: one object per line of input, in its order, though the
	// partitions answer in any order; CRLF and a last line without newline
	// are handled, empty lines are empty records.
	wantValues := []string{"first", ""}
	in.Reset()
	in.WriteString("first\r\n\n")
	for i := range 300 {
		fmt.Fprintf(&in, "json %d\n", i)
		wantValues = append(wantValues, fmt.Sprintf("json %d", i))
	}
	in.WriteString("last")
	wantValues = append(wantValues, "last")
	out = ctlOK(t, c, in.String(), "produce", "t", "-o", "json")
	acks := decodeLines[produced](t, out)
	require.Len(t, acks, len(wantValues))

	all := byPosition(t, ctlOK(t, c, "", "consume", "t", "-o", "json"))
	require.Len(t, all, 1000+len(wantValues))
	values := map[string]int{}
	for _, r := range all {
		values[r.Value]++
	}
	for i := range 1000 {
		assert.Equal(t, 1, values[fmt.Sprintf("line %d", i)], "line %d", i)
	}
	for i, want := range wantValues {
		r, ok := all[partitionOffset{acks[i].Partition, acks[i].Offset}]
		require.True(t, ok, "ack %+v", acks[i])
		assert.Equal(t, want, r.Value, "record %d of the JSON produce", i)
		assert.Equal(t, i+1, acks[i].Line, "the stdin line of record %d", i)
	}

	// A line of 1 MiB.
	big := strings.Repeat("x", 1<<20)
	out = ctlOK(t, c, big+"\n", "produce", "t", "--partition", "0", "-o", "json")
	ack := decodeLines[produced](t, out)
	require.Len(t, ack, 1)
	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "t", "--partition", "0",
		"--offset", strconv.FormatInt(ack[0].Offset, 10), "-o", "json"))
	require.Len(t, recs, 1)
	assert.Equal(t, len(big), len(recs[0].Value))
	assert.Equal(t, big, recs[0].Value)

	// Empty input: nothing produced.
	assert.Equal(t, "produced 0 records to t\n", ctlOK(t, c, "", "produce", "t"))
}

func TestKeyedProduceKeepsAKeyInOnePartitionInOrder(t *testing.T) {
	c := startCluster(t)
	const partitions = 4
	ctlOK(t, c, "", "topic", "create", "k", "--partitions", strconv.Itoa(partitions))
	keys := []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6"}
	// Interleaved: each round sends the next event of every key.
	for round := range 3 {
		for _, k := range keys {
			var in strings.Builder
			for j := range 3 {
				fmt.Fprintf(&in, "%s#%d\n", k, round*3+j)
			}
			ctlOK(t, c, in.String(), "produce", "k", "--key", k)
		}
	}
	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "k", "-o", "json"))
	require.Len(t, recs, len(keys)*9)
	partOf := map[string]int32{}
	next := map[string]int{}
	lastOffset := map[int32]int64{}
	for _, r := range recs {
		require.NotNil(t, r.Key)
		k := *r.Key
		if p, ok := partOf[k]; ok {
			assert.Equal(t, p, r.Partition, "key %s in two partitions", k)
		}
		partOf[k] = r.Partition
		assert.Equal(t, int32(client.Partition([]byte(k), partitions)), r.Partition, "key %s: the client's Partition", k)
		assert.Equal(t, fmt.Sprintf("%s#%d", k, next[k]), r.Value, "key %s out of order", k)
		next[k]++
		if last, ok := lastOffset[r.Partition]; ok {
			assert.Greater(t, r.Offset, last, "offsets increase within a partition")
		}
		lastOffset[r.Partition] = r.Offset
	}
	for _, k := range keys {
		assert.Equal(t, 9, next[k], "key %s", k)
	}
}

func TestSealedTopicRefusesProduce(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "s", "--partitions", "2")
	ctlOK(t, c, "", "produce", "s", "before")
	ctlOK(t, c, "", "topic", "seal", "s")

	res := ctlFails(t, c, 2, "TopicSealed: ", "", "produce", "s", "after")
	assert.Empty(t, res.Stdout)
	res = ctlFails(t, c, 2, "TopicSealed: ", "a\nb\nc\n", "produce", "s", "-o", "json")
	assert.Empty(t, res.Stdout)
	ctlFails(t, c, 2, "TopicSealed: ", "", "produce", "s", "--key", "k", "after")

	// Reads go on, and nothing was added.
	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "s", "-o", "json"))
	require.Len(t, recs, 1)
	assert.Equal(t, "before", recs[0].Value)
}

func TestUnknownTopicExitsTwo(t *testing.T) {
	c := startCluster(t)
	for _, args := range [][]string{
		{"produce", "nope", "v"},
		{"produce", "nope"},
		{"consume", "nope"},
		{"consume", "nope", "--follow"},
		{"topic", "describe", "nope"},
		{"topic", "delete", "nope"},
		{"topic", "seal", "nope"},
		{"bench", "consume", "--topic", "nope"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			res := ctlFails(t, c, 2, "UnknownTopic: ", "", args...)
			assert.Empty(t, res.Stdout)
		})
	}
}

// produceFailure is the stderr line of a produce that failed: its name,
// the first line not acknowledged, the counts, the lines named as not
// acknowledged (with how many more it left out) and the last line sent.
type produceFailure struct {
	name          string
	first         int
	acked, sent   int
	unacked       []int
	more, lastOne int
}

var produceFailureLine = regexp.MustCompile(`^(\w+): line (\d+): .* \((\d+) of (\d+) records? acknowledged; not acknowledged: lines? ([0-9, -]+?)(?: and (\d+) more)?; no line after line (\d+) was sent\)\n$`)

func parseProduceFailure(t *testing.T, stderr string) produceFailure {
	t.Helper()
	m := produceFailureLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, "stderr %q", stderr)
	atoi := func(s string) int {
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	f := produceFailure{name: m[1], first: atoi(m[2]), acked: atoi(m[3]), sent: atoi(m[4]), more: atoi(m[6]), lastOne: atoi(m[7])}
	for _, r := range strings.Split(m[5], ", ") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		for n := atoi(lo); n <= atoi(hi); n++ {
			f.unacked = append(f.unacked, n)
		}
	}
	return f
}

// checkProducedLines checks a failed produce -o json of the lines
// "v1", "v2", ... against what the partitions read hold: every
// acknowledgment's line is the record stored at its partition and
// offset, every line sent is either acknowledged or named on stderr as
// not, and no line named is stored. It returns the acknowledgments and
// the failure.
func checkProducedLines(t *testing.T, c *testcluster.Cluster, topic string, readable []int32, res testcluster.CtlResult) ([]produced, produceFailure) {
	t.Helper()
	require.Equal(t, 2, res.Exit, "stderr: %s", res.Stderr)
	f := parseProduceFailure(t, res.Stderr)
	acks := decodeLines[produced](t, res.Stdout)
	assert.Equal(t, f.sent, f.lastOne, "the last line sent")
	assert.Equal(t, f.acked, len(acks), "acknowledgments printed")
	assert.Equal(t, f.sent, len(acks)+len(f.unacked)+f.more, "every line sent is acknowledged or not")

	stored := map[partitionOffset]string{}
	storedLines := map[string]bool{}
	for _, p := range readable {
		for _, r := range decodeLines[consumed](t, ctlOK(t, c, "", "consume", topic, "--partition", strconv.Itoa(int(p)), "-o", "json")) {
			stored[partitionOffset{r.Partition, r.Offset}] = r.Value
			storedLines[r.Value] = true
		}
	}
	acked := map[int]bool{}
	last := 0
	for _, a := range acks {
		assert.Greater(t, a.Line, last, "acknowledgments in input order")
		last = a.Line
		acked[a.Line] = true
		assert.LessOrEqual(t, a.Line, f.sent)
		if slices.Contains(readable, a.Partition) {
			assert.Equal(t, fmt.Sprintf("v%d", a.Line), stored[partitionOffset{a.Partition, a.Offset}],
				"line %d acknowledged at %s/%d@%d", a.Line, topic, a.Partition, a.Offset)
		}
	}
	assert.Equal(t, f.first, f.unacked[0], "the failure's line is the first not acknowledged")
	for _, n := range f.unacked {
		assert.False(t, acked[n], "line %d both acknowledged and not", n)
		assert.False(t, storedLines[fmt.Sprintf("v%d", n)], "line %d, not acknowledged and not appended, is stored", n)
	}
	for v := range storedLines {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "v"))
		require.NoError(t, err, "stored %q", v)
		assert.True(t, acked[n], "line %d is stored but was not acknowledged", n)
	}
	return acks, f
}

// A produce from stdin that fails mid-stream says which lines were
// stored: each acknowledgment carries its stdin line, and the error names
// the lines sent and not acknowledged, so that the two together account
// for every line sent. Records are pipelined, so acknowledgments of lines
// after the failed one (to other partitions) are printed too.
func TestProduceNamesTheLinesStoredAfterAFailure(t *testing.T) {
	c := startClusterOf(t, 3)
	// One replica each: partition p is led by broker p+1 alone.
	ctlOK(t, c, "", "topic", "create", "big", "--partitions", "3")
	ctlOK(t, c, "", "topic", "create", "dead", "--partitions", "3")
	lines := func(n int, line func(i int) string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(line(i) + "\n")
		}
		return b.String()
	}

	t.Run("a record too large", func(t *testing.T) {
		in := lines(2000, func(i int) string {
			if i == 1000 {
				return strings.Repeat("x", 4<<20) // over the 4 MiB batch limit
			}
			return fmt.Sprintf("v%d", i)
		})
		res := ctl(t, c, in, "produce", "big", "-o", "json")
		acks, f := checkProducedLines(t, c, "big", []int32{0, 1, 2}, res)
		assert.Equal(t, "MessageTooLarge", f.name)
		assert.Equal(t, 1000, f.first)
		assert.Equal(t, []int{1000}, f.unacked)
		assert.Equal(t, 1000, f.sent, "nothing is read after the failure")
		assert.Len(t, acks, 999)
	})

	t.Run("a leader that does not answer", func(t *testing.T) {
		require.NoError(t, c.Node(3).Kill())
		in := lines(3000, func(i int) string { return fmt.Sprintf("v%d", i) })
		res := ctl(t, c, in, "--timeout", "5s", "produce", "dead", "-o", "json")
		acks, f := checkProducedLines(t, c, "dead", []int32{0, 1}, res)
		assert.Equal(t, 3000, f.sent, "every line was sent before the first failure came back")
		assert.Len(t, acks, 2000, "partitions 0 and 1 took theirs")
		assert.NotZero(t, f.more, "a thousand lines are not all named")
		for _, a := range acks {
			assert.NotEqual(t, int32(2), a.Partition)
		}
		assert.Greater(t, acks[len(acks)-1].Line, f.first, "lines after the failed one were acknowledged")
	})
}
