package controller

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
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

// The events of a change are pending while the change is persisted:
// after a crash, those of a change the metadata holds are appended once
// (also when the crash came after the append), those of a change it does
// not hold are dropped.
func TestPendingEventsAreResolvedByTheMetadataEpoch(t *testing.T) {
	ev := func(p int32) transport.HistoryEvent {
		return transport.HistoryEvent{Time: time.Now().UTC(), Requester: "op@host",
			ChangeResult: transport.ChangeResult{Topic: "orders", Partition: p, Action: transport.ActionFailover}}
	}
	cases := []struct {
		name     string
		persist  int64 // the metadata epoch on disk
		appended bool  // the crash came after the append
		want     int   // events in the trail after
	}{
		{name: "change persisted, not appended", persist: 7, want: 3},
		{name: "change persisted and appended", persist: 7, appended: true, want: 3},
		{name: "later change persisted", persist: 9, want: 3},
		{name: "change not persisted", persist: 6, want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{path: filepath.Join(t.TempDir(), "history.jsonl")}
			require.NoError(t, h.append(ev(0)))
			evs := []transport.HistoryEvent{ev(1), ev(2)}
			require.NoError(t, h.prepare(7, evs))
			if tc.appended {
				require.NoError(t, h.append(evs...))
			}
			h2 := &history{path: h.path} // a new process
			_, _, err := h2.resolvePending(tc.persist)
			require.NoError(t, err)
			got, err := h2.read()
			require.NoError(t, err)
			assert.Len(t, got, tc.want)
			_, err = os.Stat(h.pendingPath())
			assert.ErrorIs(t, err, fs.ErrNotExist, "the pending file is settled")
			again, _, err := h2.resolvePending(tc.persist)
			require.NoError(t, err)
			assert.Zero(t, again)
		})
	}
}

// A change the single controller cannot persist leaves no event; the
// events of one it persists are in the trail when commit returns.
func TestFileJournalCommitsEventsWithTheChange(t *testing.T) {
	dir := t.TempDir()
	h := &history{path: filepath.Join(dir, historyFile)}
	j := &fileJournal{store: metadata.NewStore(filepath.Join(dir, metadataFile)), hist: h, logger: hclog.NewNullLogger()}
	m := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c1", ControllerID: 1, Epoch: 1,
		Brokers: []metadata.Broker{{ID: 1, Addr: "127.0.0.1:9400"}}}
	evs := []transport.HistoryEvent{{Time: time.Now().UTC(), ChangeResult: transport.ChangeResult{Partition: -1, Action: transport.ActionACLAdd}}}
	require.NoError(t, j.commit(context.Background(), 0, m, evs))
	got, err := h.read()
	require.NoError(t, err)
	assert.Len(t, got, 1)

	bad := m.Clone()
	bad.Epoch = 2
	bad.ControllerID = 0 // fails validation: not persisted
	require.Error(t, j.commit(context.Background(), 1, bad, evs))
	got, err = h.read()
	require.NoError(t, err)
	assert.Len(t, got, 1, "no event of a change not persisted")
	_, err = os.Stat(h.pendingPath())
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
