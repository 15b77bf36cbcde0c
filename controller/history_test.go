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

// The events of one command go in with one append, in order.
func TestHistoryAppendsACommandsEventsTogether(t *testing.T) {
	h := &history{path: filepath.Join(t.TempDir(), "history.jsonl")}
	now := time.Now().UTC()
	var evs []transport.HistoryEvent
	for p := int32(0); p < 3; p++ {
		evs = append(evs, transport.HistoryEvent{Time: now, ChangeResult: transport.ChangeResult{Topic: "orders", Partition: p, Action: transport.ActionFailover}})
	}
	require.NoError(t, h.append(evs...))
	got, err := h.read()
	require.NoError(t, err)
	require.Len(t, got, 3)
	for p, ev := range got {
		assert.Equal(t, int32(p), ev.Partition)
	}
}
