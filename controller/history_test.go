package controller

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// An Audit request retried after its connection died brings the same event
// again (Pool.Call retries it: transport counts Audit as idempotent); the
// trail records it once. A later event, even of the same change, is its
// own line.
func TestHistoryRecordsARetriedEventOnce(t *testing.T) {
	h := &history{path: filepath.Join(t.TempDir(), "history.jsonl")}
	ev := transport.HistoryEvent{Time: time.Now().UTC(), Requester: "127.0.0.1:5000",
		ChangeResult: transport.ChangeResult{Topic: "orders", Partition: 1, Action: transport.ActionCatchUp}}
	require.NoError(t, h.append(ev))
	require.NoError(t, h.append(ev))
	again := ev
	again.Time = ev.Time.Add(time.Millisecond)
	require.NoError(t, h.append(again))

	evs, err := h.read()
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.True(t, evs[0].Time.Equal(ev.Time))
	assert.True(t, evs[1].Time.Equal(again.Time))
}
