package storage

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"gostream/record"
)

// MemLog is a log held in memory with the semantics of Log: the same
// batches, offsets, epoch rules, truncation (with the cut bytes kept, see
// Quarantined) and waiting. Nothing survives the process; it exists for
// tests of the layers above storage and as a second implementation that the
// shared log test suite holds Log to.
type MemLog struct {
	maxBatch int
	now      func() int64

	mu struct {
		sync.Mutex
		start       int64
		batches     []record.Batch // contiguous, starting at start
		next        int64
		lastEpoch   int32
		quarantined [][]byte
		changed     chan struct{}
		closed      bool
	}
}

// NewMemLog returns an empty MemLog. now gives append times in Unix
// milliseconds; nil means a clock that counts up from 1.
func NewMemLog(maxBatchBytes int, now func() int64) *MemLog {
	if maxBatchBytes <= 0 {
		maxBatchBytes = DefaultMaxBatchBytes
	}
	if now == nil {
		var mu sync.Mutex
		var t int64
		now = func() int64 { mu.Lock(); defer mu.Unlock(); t++; return t }
	}
	m := &MemLog{maxBatch: maxBatchBytes, now: now}
	m.mu.lastEpoch = -1
	m.mu.changed = make(chan struct{})
	return m
}

func (m *MemLog) check(batch record.Batch) error {
	if len(batch) > m.maxBatch {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(batch), m.maxBatch)
	}
	if err := batch.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return nil
}

func (m *MemLog) appendLocked(batch record.Batch) AppendResult {
	b := append(record.Batch(nil), batch...)
	m.mu.batches = append(m.mu.batches, b)
	m.mu.next = b.NextOffset()
	m.mu.lastEpoch = b.LeaderEpoch()
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	return AppendResult{BaseOffset: b.BaseOffset(), NextOffset: b.NextOffset(), LeaderEpoch: b.LeaderEpoch(), AppendTime: b.AppendTime()}
}

// Append is Log.Append.
func (m *MemLog) Append(ctx context.Context, batch record.Batch, epoch int32) (AppendResult, error) {
	if err := m.check(batch); err != nil {
		return AppendResult{}, err
	}
	if epoch < 0 {
		return AppendResult{}, fmt.Errorf("%w: negative epoch %d", ErrInvalidBatch, epoch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return AppendResult{}, ErrClosed
	}
	if epoch < m.mu.lastEpoch {
		return AppendResult{}, fmt.Errorf("%w: %d < %d", ErrEpochRegression, epoch, m.mu.lastEpoch)
	}
	batch.Stamp(m.mu.next, epoch, m.now())
	return m.appendLocked(batch), nil
}

// AppendExact is Log.AppendExact.
func (m *MemLog) AppendExact(ctx context.Context, batch record.Batch) (AppendResult, error) {
	if err := m.check(batch); err != nil {
		return AppendResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return AppendResult{}, ErrClosed
	}
	if batch.BaseOffset() != m.mu.next {
		return AppendResult{}, fmt.Errorf("%w: batch at %d, log ends at %d", ErrOffsetMismatch, batch.BaseOffset(), m.mu.next)
	}
	if batch.LeaderEpoch() < m.mu.lastEpoch {
		return AppendResult{}, fmt.Errorf("%w: %d < %d", ErrEpochRegression, batch.LeaderEpoch(), m.mu.lastEpoch)
	}
	return m.appendLocked(batch), nil
}

// find returns the index of the batch holding offset.
func (m *MemLog) findLocked(offset int64) int {
	return sort.Search(len(m.mu.batches), func(i int) bool { return m.mu.batches[i].NextOffset() > offset })
}

// Read is Log.Read.
func (m *MemLog) Read(ctx context.Context, offset int64, maxBytes int, limit int64, buf []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	if offset < m.mu.start || offset > m.mu.next {
		return nil, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, m.mu.start, m.mu.next)
	}
	out := buf[:0]
	for i := m.findLocked(offset); i < len(m.mu.batches); i++ {
		b := m.mu.batches[i]
		if b.BaseOffset() >= limit || (len(out) > 0 && len(out)+len(b) > maxBytes) {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

// Wait is Log.Wait.
func (m *MemLog) Wait(ctx context.Context, offset int64) error {
	for {
		m.mu.Lock()
		closed, next, ch := m.mu.closed, m.mu.next, m.mu.changed
		m.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if next > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TruncateTo is Log.TruncateTo; the cut bytes are kept in Quarantined.
func (m *MemLog) TruncateTo(ctx context.Context, offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	if offset < m.mu.start || offset > m.mu.next {
		return fmt.Errorf("%w: truncate to %d, log holds [%d, %d]", ErrOffsetOutOfRange, offset, m.mu.start, m.mu.next)
	}
	if offset == m.mu.next {
		return nil
	}
	i := m.findLocked(offset)
	if m.mu.batches[i].BaseOffset() != offset {
		b := m.mu.batches[i]
		return fmt.Errorf("%w: offset %d is inside the batch [%d, %d)", ErrNotBatchBoundary, offset, b.BaseOffset(), b.NextOffset())
	}
	var cut []byte
	for _, b := range m.mu.batches[i:] {
		cut = append(cut, b...)
	}
	m.mu.quarantined = append(m.mu.quarantined, cut)
	m.mu.batches = m.mu.batches[:i]
	m.mu.next = offset
	m.mu.lastEpoch = -1
	if i > 0 {
		m.mu.lastEpoch = m.mu.batches[i-1].LeaderEpoch()
	}
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	return nil
}

// Quarantined returns the byte runs cut off by TruncateTo, oldest first.
func (m *MemLog) Quarantined() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]byte(nil), m.mu.quarantined...)
}

// LogStartOffset is Log.LogStartOffset.
func (m *MemLog) LogStartOffset() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.mu.start }

// LogEndOffset is Log.LogEndOffset.
func (m *MemLog) LogEndOffset() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.mu.next }

// DurableEndOffset is LogEndOffset: everything in memory is as durable as it gets.
func (m *MemLog) DurableEndOffset() int64 { return m.LogEndOffset() }

// LastEpoch is Log.LastEpoch.
func (m *MemLog) LastEpoch() int32 { m.mu.Lock(); defer m.mu.Unlock(); return m.mu.lastEpoch }

// Close is Log.Close.
func (m *MemLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mu.closed {
		m.mu.closed = true
		close(m.mu.changed)
	}
	return nil
}
