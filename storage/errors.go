package storage

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors of package storage. Methods document which they return;
// test for them with errors.Is.
var (
	// ErrCorrupt marks data on disk that is damaged in a way a crash cannot
	// explain: a batch that lies whole in the file with no sector of zeros
	// and fails its checksum, a damaged batch followed by valid data,
	// offsets that are not contiguous, a log that ends below the floor its
	// caller knows was durable, a damaged stamp. It is reported, never
	// repaired.
	ErrCorrupt = errors.New("storage: corrupt")
	// ErrOffsetOutOfRange means an offset below the log start or above the
	// log end.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrNotBatchBoundary means a truncation point inside a batch.
	ErrNotBatchBoundary = errors.New("storage: offset is not a batch boundary")
	// ErrOffsetMismatch means a replica append whose base offset is not the
	// log end offset.
	ErrOffsetMismatch = errors.New("storage: batch base offset is not the log end offset")
	// ErrEpochRegression means an append stamped with a leader epoch lower
	// than the last epoch in the log.
	ErrEpochRegression = errors.New("storage: leader epoch lower than the log's last epoch")
	// ErrBatchTooLarge means a batch larger than the log's MaxBatchBytes.
	ErrBatchTooLarge = errors.New("storage: batch too large")
	// ErrInvalidBatch means bytes that are not a valid batch.
	ErrInvalidBatch = errors.New("storage: invalid batch")
	// ErrTruncated means the bytes of an append were cut off by TruncateTo
	// before they became durable; the append did not happen.
	ErrTruncated = errors.New("storage: append truncated before it was durable")
	// ErrClosed means the log or root was closed.
	ErrClosed = errors.New("storage: closed")
	// ErrFailed means an earlier write or fsync of the log failed. The log
	// refuses all further appends until Resume or a reopen, because after a
	// failed fsync the state of the page cache is unknown.
	ErrFailed = errors.New("storage: log failed")
	// ErrNoSpace means the file system (or a quota) had no space for what
	// was asked. Every storage error caused by ENOSPC or EDQUOT matches it,
	// and the system error too. An append that fails with it and not with
	// ErrFailed did not happen and left the log as it was: it may be tried
	// again, and succeeds once there is space.
	ErrNoSpace = errors.New("storage: no space left on device")
	// ErrStampMismatch means a storage root that belongs to another broker
	// or cluster.
	ErrStampMismatch = errors.New("storage: root belongs to another broker or cluster")
	// ErrRootInUse means a storage root that another process holds.
	ErrRootInUse = errors.New("storage: root in use")
	// ErrInvalidName means a topic name that is not one directory name
	// (empty, . or .., or with a path separator or a NUL), so it may not
	// become a path under the root. Which names a cluster allows is
	// metadata's rule (metadata.ValidateTopicName), not storage's.
	ErrInvalidName = errors.New("storage: invalid directory name")
	// ErrInvalidPartition means a negative partition number.
	ErrInvalidPartition = errors.New("storage: invalid partition")
)

// corruptError wraps an error so that it matches ErrCorrupt while keeping
// its own chain.
type corruptError struct{ err error }

func (e corruptError) Error() string { return "storage: corrupt: " + e.err.Error() }
func (e corruptError) Unwrap() []error {
	return []error{ErrCorrupt, e.err}
}

func markCorrupt(err error) error { return corruptError{err} }

func corruptf(format string, args ...any) error { return markCorrupt(fmt.Errorf(format, args...)) }

// noSpaceError wraps an error caused by a full disk so that it matches
// ErrNoSpace while keeping its own text and chain.
type noSpaceError struct{ err error }

func (e noSpaceError) Error() string { return e.err.Error() }
func (e noSpaceError) Unwrap() []error {
	return []error{ErrNoSpace, e.err}
}

// markNoSpace makes err match ErrNoSpace if ENOSPC or EDQUOT caused it.
func markNoSpace(err error) error {
	if err == nil || errors.Is(err, ErrNoSpace) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return noSpaceError{err}
	}
	return err
}

func isNoSpace(err error) bool { return errors.Is(markNoSpace(err), ErrNoSpace) }
