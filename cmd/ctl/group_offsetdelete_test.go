package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// group delete-offsets: a partition's committed offset goes (describe
// shows it never committed), the others stay; a topic a member of the
// group subscribes to is refused and keeps its offsets, the others'
// go; once the member has left they go too, and the group, left with
// nothing, with them. Bad input is refused before anything is asked.
func TestGroupDeleteOffsets(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "2")
	ctlOK(t, c, "", "topic", "create", "u", "--partitions", "1")
	for _, p := range []string{"0", "1"} {
		ctlOK(t, c, "", "produce", "t", "--partition", p, "a", "b", "c")
		ctlOK(t, c, "", "consume", "t", "--partition", p, "--group", "g", "--max", "2")
	}
	ctlOK(t, c, "", "produce", "u", "x")
	ctlOK(t, c, "", "consume", "u", "--partition", "0", "--group", "g")

	out := ctlOK(t, c, "", "group", "delete-offsets", "g", "--topic", "t", "--partition", "0")
	assert.Regexp(t, `t\s+0\s+2`, out)
	assert.Contains(t, out, "deleted 1 committed offset of group g")
	d := describeGroupJSON(t, c, "g")
	assert.Equal(t, int64(-1), committedOf(t, d, 0), "t/0 never committed now")
	assert.Equal(t, int64(2), committedOf(t, d, 1))
	var res struct {
		Group   string `json:"group"`
		Deleted []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		} `json:"deleted"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "", "-o", "json", "group", "delete-offsets", "g", "--topic", "t", "--partition", "0")), &res))
	assert.Equal(t, "g", res.Group)
	assert.NotNil(t, res.Deleted)
	assert.Empty(t, res.Deleted, "nothing left to delete is no error")

	// A member of g subscribes to u.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.New(ctx, client.Config{Bootstrap: strings.Split(c.Bootstrap(), ",")})
	require.NoError(t, err)
	defer cl.Close()
	m, err := client.NewGroupConsumer(cl, client.GroupConfig{Group: "g", Topics: []string{"u"}, SessionTimeout: 5 * time.Second})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(describeGroupJSON(t, c, "g").Members) == 1 }, 30*time.Second, 100*time.Millisecond)
	ctlFails(t, c, 2, "GroupSubscribedToTopic: ", "", "group", "delete-offsets", "g", "--topic", "u")
	d = describeGroupJSON(t, c, "g")
	require.Len(t, d.Offsets, 3)
	assert.Equal(t, "u", d.Offsets[2].Topic)
	assert.Equal(t, int64(1), *d.Offsets[2].Committed, "kept")
	out = ctlOK(t, c, "", "group", "delete-offsets", "g", "--topic", "t")
	assert.Contains(t, out, "deleted 1 committed offset of group g", "t/1, while the member reads u")

	require.NoError(t, m.Close(ctx))
	out = ctlOK(t, c, "", "group", "delete-offsets", "g", "--topic", "u")
	assert.Regexp(t, `u\s+0\s+1`, out)
	ctlFails(t, c, 2, "UnknownGroup: ", "", "group", "describe", "g")
	ctlFails(t, c, 2, "UnknownGroup: ", "", "group", "delete-offsets", "g", "--topic", "u")

	ctlFails(t, c, 1, "MissingFlag: ", "", "group", "delete-offsets", "g")
	ctlFails(t, c, 1, "InvalidFlag: ", "", "group", "delete-offsets", "g", "--topic", "t", "--partition", "-1")
	ctlFails(t, c, 1, "MissingArgument: ", "", "group", "delete-offsets", "--topic", "t")
	ctlOK(t, c, "", "consume", "t", "--partition", "0", "--group", "h", "--max", "1")
	ctlFails(t, c, 2, "UnknownPartition: ", "", "group", "delete-offsets", "h", "--topic", "t", "--partition", "2")
}
