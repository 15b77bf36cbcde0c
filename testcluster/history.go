package testcluster

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Kinds of an Op.
const (
	OpProduce = "produce"
	OpRead    = "read"
	// OpFinal is the final read (Workload.ReadFinal): after the faults
	// healed, the operator's commands ran and the consumers drained, each
	// partition read once more from its log start to its high watermark.
	// One OpFinal per partition has Offset -1, LogStart and HW (the
	// partition was read whole); one per record has its Offset and Value.
	// Every record read before must be there at its offset.
	OpFinal = "final"
)

// Results of an Op. A produce that failed for a reason that does not
// prove it was not appended is unknown: the checker allows it to be read
// back or not, but never at two offsets.
const (
	ResultOK      = "ok"
	ResultFail    = "fail"
	ResultUnknown = "unknown"
)

// Op is one operation of the chaos workload as its worker saw it.
type Op struct {
	Kind      string    `json:"kind"`
	Worker    int       `json:"worker"` // the producer's or consumer's id
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Value     string    `json:"value,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Result    string    `json:"result"`
	// Offset is the acknowledged offset of a produce, or the offset of the
	// record a read returned; -1 when there is none (a failed operation, a
	// poll that returned nothing).
	Offset int64 `json:"offset"`
	// HW is the high watermark the consumer was told with this read; of
	// the final read, the high watermark it read up to.
	HW int64 `json:"hw,omitempty"`
	// LogStart is, of the final read, the partition's log start offset.
	LogStart int64  `json:"log_start,omitempty"`
	Err      string `json:"err,omitempty"`
}

// History is the operations of a run, in the order they were recorded.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Add appends op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Len returns the number of operations so far.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Ops returns a copy of the operations so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// From returns a copy of the operations recorded from the i-th on.
func (h *History) From(i int) []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i >= len(h.ops) {
		return nil
	}
	return append([]Op(nil), h.ops[i:]...)
}

// Save writes the history to path as JSON lines, one Op a line.
func (h *History) Save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, op := range h.Ops() {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// LoadHistory reads a history saved by Save.
func LoadHistory(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &History{}
	dec := json.NewDecoder(f)
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, err
		}
		h.ops = append(h.ops, op)
	}
	return h, nil
}
