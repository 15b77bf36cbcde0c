package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// topic alter --partitions prints what docs/cli.md says, table and JSON,
// with the note that keys move; a dry run says so and changes nothing;
// bad usage is refused before anything is sent.
func TestTopicAlterPartitions(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "p", "--partitions", "1")

	dry := ctlOK(t, c, "", "topic", "alter", "p", "--partitions", "3", "--dry-run", "-o", "json")
	top := requireKeys(t, json.RawMessage(dry), "topic", "dry_run", "partitions_before", "partitions", "added", "note")
	assert.JSONEq(t, `"p"`, string(top["topic"]))
	assert.JSONEq(t, `true`, string(top["dry_run"]))
	assert.JSONEq(t, `1`, string(top["partitions_before"]))
	assert.JSONEq(t, `3`, string(top["partitions"]))
	assert.JSONEq(t, `[{"partition":1,"leader":1,"replicas":[1]},{"partition":2,"leader":1,"replicas":[1]}]`, string(top["added"]))
	assert.Contains(t, string(top["note"]), "Records of a key may go to another partition from now on")
	var described struct {
		Partitions []json.RawMessage `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "topic", "describe", "p", "-o", "json")), &described))
	assert.Len(t, described.Partitions, 1, "a dry run changes nothing")

	out := ctlOK(t, c, "", "topic", "alter", "p", "--partitions", "3")
	assert.True(t, strings.HasPrefix(out, "topic p grew from 1 to 3 partitions:\n"), out)
	assert.Equal(t, [][]string{{"1", "1", "1"}, {"2", "1", "1"}}, tableRows(out, "PARTITION", "LEADER"), out)
	assert.Contains(t, out, "Records of a key may go to another partition from now on")
	assert.Contains(t, out, "consumers that rely on a key's partition")
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "topic", "describe", "p", "-o", "json")), &described))
	assert.Len(t, described.Partitions, 3)
	ctlOK(t, c, "", "produce", "p", "--partition", "2", "x")

	ctlFails(t, c, 2, `InvalidPartitions: `, "", "topic", "alter", "p", "--partitions", "3")
	ctlFails(t, c, 2, `InvalidPartitions: `, "", "topic", "alter", "p", "--partitions", "2")
	ctlFails(t, c, 1, `InvalidFlag: --partitions -1`, "", "topic", "alter", "p", "--partitions", "-1")
	ctlFails(t, c, 1, `InvalidFlag: --partitions is a change of its own`, "", "topic", "alter", "p", "--partitions", "4", "--delete-config", "retention.ms")
	ctlFails(t, c, 1, `InvalidFlag: --dry-run goes with --partitions`, "", "topic", "alter", "p", "--config", "retention.ms=1000", "--dry-run")
	ctlFails(t, c, 1, `MissingFlag: `, "", "topic", "alter", "p")
}
