package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"

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
