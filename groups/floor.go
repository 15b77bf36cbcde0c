package groups

// SnapshotFloor follows a __consumer_offsets log record by record, on any
// replica, and knows where its newest complete snapshot starts: the
// offset below which the log is not needed to rebuild its groups (a
// rebuild from there holds what a rebuild of the whole log holds). It
// applies the rule Coordinator.Load applies: a snapshot is complete when
// its end follows its start with only its own group records between. A
// record that does not decode is not a snapshot's, and ends one in
// progress.
type SnapshotFloor struct {
	floor   int64 // -1 for none
	pending int64 // the start of the snapshot being read, -1 for none
	next    int64 // the offset after the last record seen
}

// NewSnapshotFloor returns a floor that has seen nothing, for a log that
// starts at start.
func NewSnapshotFloor(start int64) *SnapshotFloor {
	return &SnapshotFloor{floor: -1, pending: -1, next: start}
}

// Next is the offset of the next record the floor expects.
func (f *SnapshotFloor) Next() int64 { return f.next }

// Floor returns the start of the newest complete snapshot seen, and false
// when none was.
func (f *SnapshotFloor) Floor() (int64, bool) { return f.floor, f.floor >= 0 }

// Observe takes the record at offset. Records before Next are ignored (a
// batch read again from its start).
func (f *SnapshotFloor) Observe(offset int64, key, value []byte) {
	if offset < f.next {
		return
	}
	f.next = offset + 1
	kind := Kind(0)
	if len(value) >= 2 && value[0] == recordVersion {
		kind = Kind(value[1])
	}
	switch kind {
	case KindSnapshotGroup:
		return // inside a snapshot or not, it changes nothing here
	case KindSnapshotStart, KindSnapshotEnd:
		r, err := Decode(key, value)
		if err != nil {
			break
		}
		if r.Kind == KindSnapshotStart {
			f.pending = offset
			return
		}
		if f.pending >= 0 && r.End.Start == f.pending {
			f.floor = f.pending
		}
	}
	f.pending = -1
}
