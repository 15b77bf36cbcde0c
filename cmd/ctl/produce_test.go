package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// produced is one line of produce -o json.
type produced struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leader_epoch"`
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

var ackLine = regexp.MustCompile(`^([a-z-]+)/(\d+)@(\d+)$`)

func TestProduceFromArguments(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "3")

	// Without a key, round robin: three records, three partitions.
	out := ctlOK(t, c, "", "produce", "t", "a", "b", "c")
	require.Len(t, lines(out), 3, out)
	seen := map[string]bool{}
	for _, l := range lines(out) {
		m := ackLine.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		assert.Equal(t, "t", m[1])
		assert.Equal(t, "0", m[3], "the first record of each partition")
		seen[m[2]] = true
	}
	assert.Len(t, seen, 3, "round robin across the partitions: %s", out)

	// JSON: one object per record, in input order, with docs/cli.md's fields.
	out = ctlOK(t, c, "", "produce", "t", "--partition", "1", "x", "y", "-o", "json")
	require.Len(t, lines(out), 2)
	for i, l := range lines(out) {
		m := requireKeys(t, json.RawMessage(l), "topic", "partition", "offset", "leader", "leader_epoch")
		assert.JSONEq(t, `"t"`, string(m["topic"]))
		assert.JSONEq(t, `1`, string(m["partition"]))
		assert.JSONEq(t, strconv.Itoa(1+i), string(m["offset"]))
		assert.JSONEq(t, `1`, string(m["leader"]))
		assert.JSONEq(t, `0`, string(m["leader_epoch"]))
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
