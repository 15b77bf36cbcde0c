package quorum

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"gostream/metadata"
	"gostream/transport"
)

// NoMetadata is the base of the change that creates the first metadata.
const NoMetadata int64 = -1

// MaxHistory bounds the audit events the state keeps: the oldest go
// first.
const MaxHistory = 50_000

// entryVersion begins every entry; another first byte is refused.
const entryVersion byte = 1

// entry is one Raft log entry's payload, after its version byte.
type entry struct {
	Kind   string                   `json:"kind"` // "change" or "record"
	Base   int64                    `json:"base,omitempty"`
	Meta   json.RawMessage          `json:"meta,omitempty"`
	Events []transport.HistoryEvent `json:"events,omitempty"`
}

func encodeEntry(e *entry) ([]byte, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return append([]byte{entryVersion}, raw...), nil
}

func decodeEntry(data []byte) (*entry, error) {
	if len(data) == 0 || data[0] != entryVersion {
		return nil, fmt.Errorf("%w: entry of version %v", ErrMalformedEntry, first(data))
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(data[1:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	switch e.Kind {
	case "change":
		if len(e.Meta) == 0 {
			return nil, fmt.Errorf("%w: a change without metadata", ErrMalformedEntry)
		}
	case "record":
	default:
		return nil, fmt.Errorf("%w: entry kind %q", ErrMalformedEntry, e.Kind)
	}
	return &e, nil
}

func first(b []byte) any {
	if len(b) == 0 {
		return "none (empty)"
	}
	return b[0]
}

// applied is the state machine's answer to one entry.
type applied struct {
	err error // ErrConflict, ErrMalformedEntry
}

// fsm is the replicated state: the metadata and the audit trail.
type fsm struct {
	// onChange, if set, is called after each applied change with the new
	// metadata, outside the lock, in log order.
	onChange func(*metadata.Cluster)

	mu      sync.Mutex
	meta    *metadata.Cluster // nil before the first change
	history []transport.HistoryEvent
	// own holds the entries this candidate proposes and has not applied
	// yet, by the first byte of the very data handed to raft: the
	// leader applies its own entry from what it proposed instead of
	// decoding it again (most of a change's cost, with whole documents).
	// Only the same bytes, not equal ones, match.
	own map[*byte]ownEntry
}

// ownEntry is a proposed entry and its metadata, as Parse would give it.
type ownEntry struct {
	e    *entry
	meta *metadata.Cluster
}

// propose records data, the encoding of e, as proposed here.
func (f *fsm) propose(data []byte, e *entry, meta *metadata.Cluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.own == nil {
		f.own = map[*byte]ownEntry{}
	}
	f.own[&data[0]] = ownEntry{e, meta}
}

// forget drops data's record once its fate is known.
func (f *fsm) forget(data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.own, &data[0])
}

var _ raft.FSM = (*fsm)(nil)

// Apply implements raft.FSM. It never fails the log: an entry that cannot
// be applied (a lost compare-and-set, a malformed entry, which no
// candidate of ours writes) changes nothing on any candidate, and the
// proposer is told why.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	var own ownEntry
	if len(l.Data) > 0 {
		own = f.own[&l.Data[0]]
	}
	f.mu.Unlock()
	e := own.e
	if e == nil {
		var err error
		if e, err = decodeEntry(l.Data); err != nil {
			return applied{err: err}
		}
	}
	var changed *metadata.Cluster
	f.mu.Lock()
	switch e.Kind {
	case "change":
		held := NoMetadata
		if f.meta != nil {
			held = f.meta.Epoch
		}
		if e.Base != held {
			f.mu.Unlock()
			return applied{err: fmt.Errorf("%w: the change was computed from metadata epoch %d, and epoch %d is committed", ErrConflict, e.Base, held)}
		}
		next := own.meta
		if next == nil {
			var err error
			if next, err = metadata.Parse(e.Meta, "Raft entry"); err != nil {
				f.mu.Unlock()
				return applied{err: fmt.Errorf("%w: %v", ErrMalformedEntry, err)}
			}
		}
		if next.Epoch <= held {
			f.mu.Unlock()
			return applied{err: fmt.Errorf("%w: a change to epoch %d from epoch %d", ErrMalformedEntry, next.Epoch, held)}
		}
		f.meta = next
		changed = next
	}
	f.appendHistory(e.Events)
	f.mu.Unlock()
	if changed != nil && f.onChange != nil {
		f.onChange(changed)
	}
	return applied{}
}

// appendHistory adds events, dropping the oldest past MaxHistory. Called
// with f.mu held.
func (f *fsm) appendHistory(evs []transport.HistoryEvent) {
	f.history = append(f.history, evs...)
	if over := len(f.history) - MaxHistory; over > 0 {
		f.history = append([]transport.HistoryEvent(nil), f.history[over:]...)
	}
}

func (f *fsm) state() (*metadata.Cluster, []transport.HistoryEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.meta, f.history
}

// snapshotVersion begins every snapshot's payload.
const snapshotVersion byte = 1

// snapshotBody is a snapshot's payload after its version byte and before
// its CRC.
type snapshotBody struct {
	Meta    json.RawMessage          `json:"meta,omitempty"`
	History []transport.HistoryEvent `json:"history"`
}

// Snapshot implements raft.FSM.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	meta, history := f.meta, append([]transport.HistoryEvent(nil), f.history...)
	f.mu.Unlock()
	body := snapshotBody{History: history}
	if meta != nil {
		raw, err := metadata.Marshal(meta)
		if err != nil {
			return nil, err
		}
		body.Meta = raw
	}
	data, err := encodeSnapshot(&body)
	if err != nil {
		return nil, err
	}
	return snapshotBytes(data), nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	body, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	var meta *metadata.Cluster
	if len(body.Meta) > 0 {
		if meta, err = metadata.Parse(body.Meta, "Raft snapshot"); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	f.mu.Lock()
	f.meta, f.history = meta, body.History
	f.mu.Unlock()
	if meta != nil && f.onChange != nil {
		f.onChange(meta)
	}
	return nil
}

// encodeSnapshot is version byte, JSON body, CRC-32C of both.
func encodeSnapshot(b *snapshotBody) ([]byte, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	data := append([]byte{snapshotVersion}, raw...)
	return binary.BigEndian.AppendUint32(data, crc32.Checksum(data, castagnoli)), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func decodeSnapshot(data []byte) (*snapshotBody, error) {
	if len(data) < 5 {
		return nil, fmt.Errorf("%w: a snapshot of %d bytes", ErrCorrupt, len(data))
	}
	payload, sum := data[:len(data)-4], data[len(data)-4:]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(sum) {
		return nil, fmt.Errorf("%w: the snapshot's CRC does not match its contents", ErrCorrupt)
	}
	if payload[0] != snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot of version %d", ErrCorrupt, payload[0])
	}
	var b snapshotBody
	if err := json.Unmarshal(payload[1:], &b); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	if b.History == nil {
		b.History = []transport.HistoryEvent{}
	}
	return &b, nil
}

// snapshotBytes is a snapshot taken: its encoded payload.
type snapshotBytes []byte

func (s snapshotBytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshotBytes) Release() {}

// Errors of the package.
var (
	// ErrConflict: a change computed from metadata that is no longer the
	// committed one; nothing was applied.
	ErrConflict = errors.New("the metadata changed meanwhile")
	// ErrMalformedEntry: an entry the state machine cannot read.
	ErrMalformedEntry = errors.New("malformed Raft entry")
	// ErrCorrupt: the Raft store or a snapshot is damaged.
	ErrCorrupt = errors.New("damaged controller Raft state")
	// ErrNotLeader: this candidate is not the active controller.
	ErrNotLeader = errors.New("not the active controller")
)
