package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"gostream/storage"
	"gostream/transport"
)

// history is the controller's audit trail: one JSON event per line,
// appended and fsync'd, beside the metadata file.
type history struct {
	path string
	mu   sync.Mutex
	last []byte // the line appended last, under mu
}

// append adds events to the trail, in order, with one write and one
// fsync for all of them: a command of thousands of partitions records
// thousands of events.
func (h *history) append(evs ...transport.HistoryEvent) error {
	var buf bytes.Buffer
	var last []byte
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		line, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		// An Audit request retried after its connection died (transport
		// counts Audit as idempotent) brings the same event again, time
		// included: it is recorded once.
		if bytes.Equal(line, h.last) || bytes.Equal(line, last) {
			continue
		}
		buf.Write(line)
		buf.WriteByte('\n')
		last = line
	}
	if buf.Len() == 0 {
		return nil
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	h.last = last
	return nil
}

// read returns every event, oldest first. A damaged line is reported, not
// skipped silently.
func (h *history) read() ([]transport.HistoryEvent, error) {
	h.mu.Lock()
	data, err := os.ReadFile(h.path)
	h.mu.Unlock()
	if os.IsNotExist(err) {
		return []transport.HistoryEvent{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []transport.HistoryEvent{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var ev transport.HistoryEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("audit trail %s line %d: %v", h.path, n, err)
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// pendingSuffix names the file, beside the trail, that holds the events
// of a single controller's change while the change is being persisted:
// written durably before the metadata file, appended to the trail and
// removed after it. A crash between the two leaves it, and the next open
// decides by the metadata's epoch whether the change was made
// (resolvePending), so the trail holds the events of every change made,
// and of no other.
const pendingSuffix = ".pending"

// pending is the pending file's content.
type pending struct {
	// Epoch is the metadata epoch the change makes.
	Epoch  int64                    `json:"epoch"`
	Events []transport.HistoryEvent `json:"events"`
}

func (h *history) pendingPath() string { return h.path + pendingSuffix }

// prepare makes evs, the events of the change to metadata epoch, durable
// in the pending file, before the change itself is persisted.
func (h *history) prepare(epoch int64, evs []transport.HistoryEvent) error {
	data, err := json.Marshal(pending{Epoch: epoch, Events: evs})
	if err != nil {
		return err
	}
	if err := storage.WriteFileAtomic(h.pendingPath(), data); err != nil {
		return fmt.Errorf("audit events of metadata epoch %d: %w", epoch, err)
	}
	return nil
}

// abandon removes the pending events of a change that was not persisted.
func (h *history) abandon() error {
	if err := os.Remove(h.pendingPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// resolvePending settles the pending events a change left, if any: those
// of a change at or below epoch, the metadata persisted, were made and
// are appended to the trail (unless they are its last lines already, as
// after a crash between the append and the file's removal); those of a
// later change were not, and are dropped. It reports what it did, for the
// log, and is a no-op without a pending file.
func (h *history) resolvePending(epoch int64) (appended, dropped int, err error) {
	data, err := os.ReadFile(h.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var p pending
	if err := json.Unmarshal(data, &p); err != nil {
		return 0, 0, fmt.Errorf("audit events pending in %s: %v", h.pendingPath(), err)
	}
	if p.Epoch > epoch {
		return 0, len(p.Events), h.abandon()
	}
	if len(p.Events) > 0 {
		done, err := h.endsWith(p.Events[len(p.Events)-1])
		if err != nil {
			return 0, 0, err
		}
		if !done {
			if err := h.append(p.Events...); err != nil {
				return 0, 0, err
			}
			appended = len(p.Events)
		}
	}
	return appended, 0, h.abandon()
}

// endsWith reports whether the trail's last line is ev.
func (h *history) endsWith(ev transport.HistoryEvent) (bool, error) {
	line, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := os.Open(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	// The last line, with its newline, is at most this long.
	n := min(st.Size(), int64(len(line))+1)
	tail := make([]byte, n)
	if _, err := f.ReadAt(tail, st.Size()-n); err != nil {
		return false, err
	}
	return bytes.Equal(tail, append(line, '\n')) && (n == st.Size() || lineStart(f, st.Size()-n)), nil
}

// lineStart reports whether offset off of f begins a line.
func lineStart(f *os.File, off int64) bool {
	b := make([]byte, 1)
	_, err := f.ReadAt(b, off-1)
	return err == nil && b[0] == '\n'
}
