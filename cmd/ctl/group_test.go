package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

// describedGroup is group describe -o json, as the contract gives it.
type describedGroup struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Generation int32  `json:"generation"`
	Assignor   string `json:"assignor"`
	Members    []struct {
		MemberID   string  `json:"member_id"`
		InstanceID *string `json:"instance_id"`
		Host       string  `json:"host"`
		Assigned   []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assigned"`
	} `json:"members"`
	Offsets []struct {
		Topic        string `json:"topic"`
		Partition    int32  `json:"partition"`
		Committed    *int64 `json:"committed"`
		LogEndOffset *int64 `json:"log_end_offset"`
		Lag          *int64 `json:"lag"`
	} `json:"offsets"`
}

func describeGroupJSON(t *testing.T, c *testcluster.Cluster, group string) describedGroup {
	t.Helper()
	var d describedGroup
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "-o", "json", "group", "describe", group)), &d))
	return d
}

// committedOf is the committed offset of partition p in d, or -1 for
// null (never committed).
func committedOf(t *testing.T, d describedGroup, p int32) int64 {
	t.Helper()
	for _, o := range d.Offsets {
		if o.Partition == p {
			if o.Committed == nil {
				return -1
			}
			return *o.Committed
		}
	}
	t.Fatalf("partition %d not described: %+v", p, d.Offsets)
	return 0
}

// consume --group G --partition P: a durable progress identity. What is
// printed is committed; the next run starts there; --offset below it is
// refused and writes nothing; reset-offsets is a dry run until --execute;
// delete forgets the group.
func TestConsumeGroupPartition(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "2")
	ctlOK(t, c, "", "produce", "t", "--partition", "0", "v0", "v1", "v2", "v3", "v4")
	rows := func(out string) []string { return strings.Split(strings.TrimSpace(out), "\n") }

	assert.Equal(t, withHeader("0\t0\t(null)\tv0", "0\t1\t(null)\tv1"),
		rows(ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g", "--max", "2")))
	// Committed what it printed: two records, no more.
	d := describeGroupJSON(t, c, "g")
	assert.Equal(t, "empty", d.State)
	assert.Empty(t, d.Members)
	assert.Equal(t, int64(2), committedOf(t, d, 0))
	assert.Equal(t, int64(-1), committedOf(t, d, 1), "never committed is null, not 0")
	require.Len(t, d.Offsets, 2)
	assert.Equal(t, int64(5), *d.Offsets[0].LogEndOffset)
	assert.Equal(t, int64(3), *d.Offsets[0].Lag)

	// The next run starts at the committed offset.
	assert.Equal(t, withHeader("0\t2\t(null)\tv2", "0\t3\t(null)\tv3", "0\t4\t(null)\tv4"),
		rows(ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g")))
	assert.Equal(t, "", ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g"), "all committed: nothing again")
	assert.Equal(t, int64(5), committedOf(t, describeGroupJSON(t, c, "g"), 0))

	// Below the committed offset: refused, nothing written.
	res := ctlFails(t, c, 2, "OffsetRegression: ", "", "consume", "t", "--partition", "0", "--group", "g", "--offset", "1")
	assert.Contains(t, res.Stderr, "reset-offsets")
	assert.Equal(t, "", res.Stdout)
	assert.Equal(t, int64(5), committedOf(t, describeGroupJSON(t, c, "g"), 0))
	// At or above it, --offset is a place to start.
	assert.Equal(t, "", ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g", "--offset", "5"))

	// reset-offsets: a dry run changes nothing.
	out := ctlOK(t, c, "", "group", "reset-offsets", "g", "--topic", "t", "--partition", "0", "--to-earliest")
	assert.Contains(t, out, "dry run")
	assert.Regexp(t, `t\s+0\s+5\s+0`, out)
	assert.Equal(t, int64(5), committedOf(t, describeGroupJSON(t, c, "g"), 0))
	var plan struct {
		Executed bool `json:"executed"`
		Offsets  []struct {
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
			New       *int64 `json:"new"`
		} `json:"offsets"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "-o", "json", "group", "reset-offsets", "g", "--topic", "t", "--shift-by", "-2")), &plan))
	assert.False(t, plan.Executed)
	require.Len(t, plan.Offsets, 2)
	assert.Equal(t, int64(3), *plan.Offsets[0].New)
	assert.Nil(t, plan.Offsets[1].Committed)
	assert.Nil(t, plan.Offsets[1].New, "never committed: nothing to shift")
	// --execute moves the group back.
	ctlOK(t, c, "", "group", "reset-offsets", "g", "--topic", "t", "--partition", "0", "--shift-by", "-2", "--execute")
	assert.Equal(t, int64(3), committedOf(t, describeGroupJSON(t, c, "g"), 0))
	assert.Equal(t, withHeader("0\t3\t(null)\tv3", "0\t4\t(null)\tv4"),
		rows(ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g")))
	ctlOK(t, c, "", "group", "reset-offsets", "g", "--topic", "t", "--partition", "0", "--to-offset", "99", "--execute")
	assert.Equal(t, int64(5), committedOf(t, describeGroupJSON(t, c, "g"), 0), "kept at the high watermark")

	// list and delete.
	var list struct {
		Groups []struct {
			Group string `json:"group"`
			State string `json:"state"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "-o", "json", "group", "list")), &list))
	require.Len(t, list.Groups, 1)
	assert.Equal(t, "g", list.Groups[0].Group)
	assert.Contains(t, ctlOK(t, c, "", "group", "list"), "g")
	ctlOK(t, c, "", "group", "delete", "g")
	ctlFails(t, c, 2, "UnknownGroup: ", "", "group", "describe", "g")
	ctlFails(t, c, 2, "UnknownGroup: ", "", "group", "delete", "g")

	// Bad input: a clear error, exit 1 or 2, nothing written.
	ctlFails(t, c, 1, "MissingFlag: ", "", "group", "reset-offsets", "g", "--topic", "t")
	ctlFails(t, c, 1, "InvalidFlag: ", "", "group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest")
	ctlFails(t, c, 1, "InvalidFlag: ", "", "group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday")
	ctlFails(t, c, 2, "InvalidGroupName: ", "", "consume", "t", "--partition", "0", "--group", "../g")
	ctlFails(t, c, 1, "InvalidFlag: ", "", "consume", "t", "--partition", "0", "--group", "g", "--instance-id", "a")
	ctlFails(t, c, 2, "UnknownTopic: ", "", "consume", "nope", "--group", "g")
}

// A shift far past the high watermark stops at it, and one far below the
// log start stops there: the offset saturates, it never wraps around (a
// shift by the largest int64 moved a committed 4 to 0).
func TestResetOffsetsShiftSaturates(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "1")
	ctlOK(t, c, "", "produce", "t", "v0", "v1", "v2", "v3", "v4", "v5")
	ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "g", "--max", "4")
	require.Equal(t, int64(4), committedOf(t, describeGroupJSON(t, c, "g"), 0))

	type plan struct {
		Executed bool `json:"executed"`
		Offsets  []struct {
			Committed *int64 `json:"committed"`
			New       *int64 `json:"new"`
			Note      string `json:"note"`
		} `json:"offsets"`
	}
	reset := func(shift string, execute bool) plan {
		t.Helper()
		args := []string{"-o", "json", "group", "reset-offsets", "g", "--topic", "t", "--shift-by", shift}
		if execute {
			args = append(args, "--execute")
		}
		var p plan
		require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", args...)), &p))
		require.Len(t, p.Offsets, 1)
		require.NotNil(t, p.Offsets[0].New)
		return p
	}
	for _, tt := range []struct {
		shift string
		want  int64
		note  string
	}{
		{"9223372036854775807", 6, "kept at the high watermark"},
		{"-9223372036854775808", 0, "kept at the log start"},
	} {
		dry := reset(tt.shift, false)
		assert.False(t, dry.Executed)
		assert.Equal(t, int64(4), *dry.Offsets[0].Committed)
		assert.Equal(t, tt.want, *dry.Offsets[0].New, "--shift-by %s, dry run", tt.shift)
		assert.Equal(t, tt.note, dry.Offsets[0].Note)
		assert.Equal(t, int64(4), committedOf(t, describeGroupJSON(t, c, "g"), 0), "a dry run writes nothing")

		done := reset(tt.shift, true)
		assert.True(t, done.Executed)
		assert.Equal(t, tt.want, *done.Offsets[0].New, "--shift-by %s --execute", tt.shift)
		assert.Equal(t, tt.want, committedOf(t, describeGroupJSON(t, c, "g"), 0), "--shift-by %s --execute", tt.shift)
		// Back to 4 for the next case.
		ctlOK(t, c, "", "group", "reset-offsets", "g", "--topic", "t", "--to-offset", "4", "--execute")
	}
	assert.Regexp(t, `t\s+0\s+4\s+6\s+kept at the high watermark`,
		ctlOK(t, c, "", "group", "reset-offsets", "g", "--topic", "t", "--shift-by", "9223372036854775807"))
}
