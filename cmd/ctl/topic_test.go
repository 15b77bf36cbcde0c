package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

func TestTopicLifecycle(t *testing.T) {
	c := startCluster(t)

	// create, in both formats; a second create is refused.
	out := ctlOK(t, c, "", "topic", "create", "orders", "--partitions", "3", "--replication-factor", "1")
	assert.Equal(t, "created topic orders: 3 partitions, replication factor 1\n", out)
	ctlFails(t, c, 2, "TopicExists: ", "", "topic", "create", "orders", "--partitions", "3")
	out = ctlOK(t, c, "", "topic", "create", "events", "--partitions", "2", "-o", "json")
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	assert.Regexp(t, `^[0-9a-f]{32}$`, created.ID, "a new topic has an id")
	assert.JSONEq(t, `{"name":"events","id":"`+created.ID+`","replication_factor":1,"sealed":false,"partitions":[
		{"partition":0,"leader":1,"leader_epoch":0,"replicas":[1],"active":[1]},
		{"partition":1,"leader":1,"leader_epoch":0,"replicas":[1],"active":[1]}],
		"config":`+defaultConfigJSON+`}`, out)
	// A bad name is bad usage (exit 1), found before anything is sent.
	ctlFails(t, c, 1, "InvalidTopicName: ", "", "topic", "create", "../x", "--partitions", "1")

	// list
	out = ctlOK(t, c, "", "topic", "list")
	require.Len(t, lines(out), 3, out)
	assert.Equal(t, []string{"NAME", "PARTITIONS", "REPLICATION-FACTOR", "SEALED", "STREAM", "CONTENT-TYPE"}, strings.Fields(lines(out)[0]))
	assert.Equal(t, []string{"events", "2", "1", "no", "-", "-"}, strings.Fields(lines(out)[1]))
	assert.Equal(t, []string{"orders", "3", "1", "no", "-", "-"}, strings.Fields(lines(out)[2]))
	out = ctlOK(t, c, "", "topic", "list", "-o", "json")
	var listed struct{ Topics []struct{ ID string } }
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed.Topics, 2, out)
	assert.Equal(t, created.ID, listed.Topics[0].ID)
	assert.JSONEq(t, `{"topics":[
		{"name":"events","id":"`+created.ID+`","replication_factor":1,"sealed":false,"partitions":2},
		{"name":"orders","id":"`+listed.Topics[1].ID+`","replication_factor":1,"sealed":false,"partitions":3}]}`, out)

	// describe, after two records in partition 1 and one in 2.
	ctlOK(t, c, "", "produce", "orders", "--partition", "1", "a", "b")
	ctlOK(t, c, "", "produce", "orders", "--partition", "2", "c")
	wantHW := []int64{0, 2, 1}
	// Global flags before or after the command give the same answer.
	out = ctlOK(t, c, "", "topic", "describe", "orders", "-o", "json")
	assert.JSONEq(t, out, ctlOK(t, c, "", "-o", "json", "topic", "describe", "orders"))
	checkDescribe(t, out, "orders", false, wantHW)

	out = ctlOK(t, c, "", "topic", "describe", "orders")
	assert.Contains(t, out, "Topic: orders   Partitions: 3   Replication factor: 1   Sealed: no")
	rows := tableRows(out, "PARTITION", "LEADER")
	require.Len(t, rows, 3, out)
	for p, hw := range wantHW {
		assert.Equal(t, []string{strconv.Itoa(p), "1", "0", "1", "1", "0", strconv.Itoa(int(hw))}, rows[p])
	}
	rows = tableRows(out, "PARTITION", "BROKER")
	require.Len(t, rows, 3, out)
	for p, hw := range wantHW {
		assert.Equal(t, []string{strconv.Itoa(p), "1", strconv.Itoa(int(hw)), "0", "leader"}, rows[p])
	}

	// seal: describe and list show it; reads go on.
	out = ctlOK(t, c, "", "topic", "seal", "orders")
	assert.Equal(t, "sealed topic orders: it takes no more records; reads go on\n", out)
	checkDescribe(t, ctlOK(t, c, "", "topic", "describe", "orders", "-o", "json"), "orders", true, wantHW)
	assert.Contains(t, ctlOK(t, c, "", "topic", "list"), "yes")
	assert.Len(t, lines(ctlOK(t, c, "", "consume", "orders")), 1+3, "the header and three records")
	ctlOK(t, c, "", "topic", "seal", "orders") // a sealed topic stays sealed; sealing again is fine

	// delete
	out = ctlOK(t, c, "", "topic", "delete", "orders", "-o", "json")
	assert.JSONEq(t, `{"topic":"orders","deleted":true}`, out)
	ctlFails(t, c, 2, "UnknownTopic: ", "", "topic", "describe", "orders")
	ctlFails(t, c, 2, "UnknownTopic: ", "", "topic", "delete", "orders")
	ctlFails(t, c, 2, "UnknownTopic: ", "", "topic", "seal", "orders")
	out = ctlOK(t, c, "", "topic", "delete", "events")
	assert.Equal(t, "deleted topic events\n", out)
	assert.JSONEq(t, `{"topics":[]}`, ctlOK(t, c, "", "topic", "list", "-o", "json"))
}

// defaultConfigJSON is the configuration of a topic that sets none, on a
// node with the default flags: seven days of any size, 128 MiB segments.
const defaultConfigJSON = `[
	{"key":"retention.bytes","value":-1,"source":"default"},
	{"key":"retention.ms","value":604800000,"source":"default"},
	{"key":"segment.bytes","value":134217728,"source":"default"},
	{"key":"segment.ms","value":604800000,"source":"default"}]`

// checkDescribe checks topic describe -o json field by field against
// docs/cli.md, for a one-node cluster where broker 1 leads every partition.
func checkDescribe(t *testing.T, out, name string, sealed bool, hw []int64) {
	t.Helper()
	top := requireKeys(t, json.RawMessage(out), "name", "id", "replication_factor", "sealed", "partitions", "config")
	assert.JSONEq(t, defaultConfigJSON, string(top["config"]))
	assert.JSONEq(t, `"`+name+`"`, string(top["name"]))
	assert.JSONEq(t, `1`, string(top["replication_factor"]))
	assert.JSONEq(t, map[bool]string{true: "true", false: "false"}[sealed], string(top["sealed"]))
	var parts []json.RawMessage
	require.NoError(t, json.Unmarshal(top["partitions"], &parts))
	require.Len(t, parts, len(hw))
	for i, raw := range parts {
		p := requireKeys(t, raw, "partition", "leader", "leader_epoch", "replicas", "active",
			"high_watermark", "log_start_offset", "replica_status")
		assert.JSONEq(t, strconv.Itoa(i), string(p["partition"]))
		assert.JSONEq(t, `1`, string(p["leader"]))
		assert.JSONEq(t, `0`, string(p["leader_epoch"]))
		assert.JSONEq(t, `[1]`, string(p["replicas"]))
		assert.JSONEq(t, `[1]`, string(p["active"]))
		assert.JSONEq(t, strconv.Itoa(int(hw[i])), string(p["high_watermark"]))
		assert.JSONEq(t, `0`, string(p["log_start_offset"]))
		var status []json.RawMessage
		require.NoError(t, json.Unmarshal(p["replica_status"], &status))
		require.Len(t, status, 1)
		rs := requireKeys(t, status[0], "broker", "log_end_offset", "lag", "state")
		assert.JSONEq(t, `1`, string(rs["broker"]))
		assert.JSONEq(t, strconv.Itoa(int(hw[i])), string(rs["log_end_offset"]))
		assert.JSONEq(t, `0`, string(rs["lag"]))
		assert.JSONEq(t, `"leader"`, string(rs["state"]))
	}
}

// tableRows returns the rows, split on spaces, of the table in out whose
// header starts with the columns first and second.
func tableRows(out, first, second string) [][]string {
	var rows [][]string
	in := false
	for _, l := range lines(out) {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == first && f[1] == second:
			in = true
		case len(f) == 0:
			in = false
		case in:
			rows = append(rows, f)
		}
	}
	return rows
}

// A Durable Streams stream is a topic of its own: topic list and describe
// show its path and content type, and mark a topic that is not a stream.
func TestTopicListShowsStreams(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "orders", "--partitions", "1")
	req, err := http.NewRequest(http.MethodPut, "http://"+c.Nodes[0].HTTP+"/v1/stream/shop/eu%20orders", nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	name, err := metadata.StreamTopic("shop/eu orders")
	require.NoError(t, err)

	out := ctlOK(t, c, "", "topic", "list")
	rows := tableRows(out, "NAME", "PARTITIONS")
	require.Len(t, rows, 2, out)
	streamRow, topicRow := rows[0], rows[1]
	if streamRow[0] == "orders" {
		streamRow, topicRow = topicRow, streamRow
	}
	assert.Equal(t, []string{"orders", "1", "1", "no", "-", "-"}, topicRow)
	// The path holds a space: the table's fields split it in two.
	assert.Equal(t, []string{name, "1", "1", "no", "/v1/stream/shop/eu", "orders", "application/json"}, streamRow)

	out = ctlOK(t, c, "", "topic", "list", "-o", "json")
	var listed struct {
		Topics []struct {
			Name   string
			Stream *struct {
				Path        string `json:"path"`
				ContentType string `json:"content_type"`
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	for _, tp := range listed.Topics {
		if tp.Name == "orders" {
			assert.Nil(t, tp.Stream, out)
			continue
		}
		require.NotNil(t, tp.Stream, out)
		assert.Equal(t, "shop/eu orders", tp.Stream.Path)
		assert.Equal(t, "application/json", tp.Stream.ContentType)
	}

	out = ctlOK(t, c, "", "topic", "describe", name)
	assert.Contains(t, out, "Durable Stream: /v1/stream/shop/eu orders   Content-Type: application/json\n")
	assert.NotContains(t, ctlOK(t, c, "", "topic", "describe", "orders"), "Durable Stream")
}
