// Package storage is the segmented, fsync'd, CRC-checked append-only log
// that every partition replica of a gostream node writes to, and the
// node's storage root that holds those logs.
//
// # Layout
//
// A storage root is a directory stamped with the broker id and cluster id
// that own it (StampFile). A root refuses to open for another broker or
// cluster. Each replica's log lives under topics/<topic>/partition-<n>/. A
// topic name becomes a path only if it is one directory name (not empty,
// . or .., no path separator or NUL; else ErrInvalidName), so nothing is
// created outside the root. That is storage's only check of a name: which
// names a cluster allows is metadata's rule (metadata.ValidateTopicName).
//
// A log is a directory of segments named by their base offset
// (00000000000000000000.log), each with a sparse index (.index) mapping a
// relative offset to a file position every IndexIntervalBytes. The log holds
// batches in the format of package record, exactly as the leader stamped
// them. A cut from the log (TruncateTo, or a torn tail found on open) is
// first copied to quarantine/ under the log directory.
//
// Every file operation goes through an FS (Options.FS, RootOptions.FS):
// the operating system's by default. CrashFS keeps unsynced writes in
// memory so that a crash loses exactly them; binaries built with the
// crashfs tag use it as their default.
//
// # Invariants
//
//   - Durability: Append and AppendExact return only after the batch is
//     fsync'd. Concurrent appenders share fsyncs (group commit): whoever finds
//     no fsync running runs one that covers everything written so far.
//   - Readers never see a byte that is not durable: Read and Wait work on the
//     durable end of the log, and readers get whole batches only. (The batch
//     identities that LastBatches, BatchesBefore, BatchAt and Digest give,
//     read from headers, reach the log end.)
//   - Every batch Read returns passed its checksum on that read, old
//     segments included (they are not rescanned on open): a damaged batch
//     is ErrCorrupt and never reaches a consumer or a follower.
//   - Offsets are contiguous from the log start; a batch's epoch is never
//     lower than the batch before it.
//   - Only the newest segment can hold a torn write: a segment is fsync'd
//     whole before the next one is created. The newest segment is
//     preallocated ahead of its data (so an append's fsync commits no size
//     change); on open, zeros after its last batch are free space.
//   - Preallocation follows the data: the newest segment's file ends at
//     the smallest power of two from 4 KiB that holds its data, and past
//     256 KiB at the next multiple of 256 KiB (never past SegmentBytes,
//     unless one batch is larger). A log that holds one small batch takes
//     one 4 KiB block; a busy one preallocates seven times on its way to
//     256 KiB, then once per 256 KiB.
//   - Torn or corrupt: a crash can only leave bytes of a batch missing,
//     past the end of the file or reading as zeros, a 512-byte sector
//     (aligned to file position) at a time. So where the scan of the
//     newest segment stops, the batch is a torn write only if its frame
//     cannot be read whole (the file ends inside its header, its length is
//     out of range, or the file ends inside it) or a sector of the file
//     reads as zeros wherever it overlaps the batch, and no valid batch
//     starts after it; then it is cut (after it is quarantined) and
//     logged. Preallocated space changes nothing here: its zeros are such
//     sectors. A batch that lies whole in the file with no sector of zeros
//     and fails its checksum or validation is corruption (ErrCorrupt), as
//     is anything else that does not check out, and a log that would end
//     below Options.DurableFloor: reported, never repaired, and the files
//     are left as they were.
//   - A full disk (ENOSPC, EDQUOT: errors matching ErrNoSpace) fails the
//     append that met it, not the log: preallocation, writes and rolls
//     leave the files as they were, so that the next append tries again.
//   - After a failed fsync, or a write that fails for another reason, the
//     log refuses appends (ErrFailed, Failed) until Resume cuts it back to
//     its durable end (quarantining what it cuts) or it is reopened and
//     recovered: nothing above the last successful fsync can be trusted.
//   - The log start offset moves only forward (ApplyRetention deletes whole
//     old segments, never the active one, and never one that holds an
//     offset at or above the limit its caller gives, the high watermark).
//     TruncateTo only cuts at batch boundaries and never below the log
//     start. SetPolicy changes segment rolling and retention on an open
//     log without waiting for appends.
//   - A storage root is used by one process at a time (its LockFile;
//     ErrRootInUse) and only by the broker and cluster its stamp names
//     (ErrStampMismatch, and nothing is changed); a stamp that does not
//     parse is ErrCorrupt and never rewritten.
//
// # Concurrency
//
// A Log is safe for concurrent use. Appends, truncation, retention and close
// are serialized by one mutex; readers take a read lock only to find a
// segment and then read with pread, so they never wait on disk writes.
//
// It imports record and nothing else of gostream (besides the standard
// library, hclog): the layers above import it, never the reverse.
package storage
