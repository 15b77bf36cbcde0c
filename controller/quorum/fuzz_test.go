package quorum

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// Entries come off the Raft log, which other candidates fill over the
// network: any bytes are refused or applied, never a panic, and an entry
// that applies leaves metadata that encodes again.
func FuzzApplyEntry(f *testing.F) {
	raw, err := metadata.Marshal(testMeta(1))
	require.NoError(f, err)
	for _, e := range []*entry{
		{Kind: "change", Base: NoMetadata, Meta: raw, Events: []transport.HistoryEvent{event("x")}},
		{Kind: "record", Events: []transport.HistoryEvent{event("y")}},
		{Kind: "change", Base: 4, Meta: raw},
	} {
		data, err := encodeEntry(e)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte{entryVersion})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fsm{}
		res := s.Apply(&raft.Log{Type: raft.LogCommand, Data: data})
		if a := res.(applied); a.err != nil {
			require.Nil(t, s.meta, "a refused entry changed the metadata")
			require.Empty(t, s.history)
			return
		}
		if s.meta != nil {
			_, err := metadata.Marshal(s.meta)
			require.NoError(t, err)
		}
	})
}

// Snapshots come off disk: any bytes decode or are ErrCorrupt, and what
// decodes encodes to the same snapshot.
func FuzzDecodeSnapshot(f *testing.F) {
	raw, err := metadata.Marshal(testMeta(3))
	require.NoError(f, err)
	for _, b := range []*snapshotBody{{Meta: raw, History: []transport.HistoryEvent{event("z")}}, {History: []transport.HistoryEvent{}}} {
		data, err := encodeSnapshot(b)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte{snapshotVersion, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeSnapshot(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		_, err = encodeSnapshot(b)
		require.NoError(t, err)
	})
}
