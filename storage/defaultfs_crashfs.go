//go:build crashfs

package storage

// In a binary built with the crashfs tag, storage's files are on a
// CrashFS: a process killed with kill -9 loses exactly what it had not
// fsync'd, and the file named by $GOSTREAM_TEST_DISK_FULL, while it exists,
// makes the disk full. For the chaos harness only; never for production.
func init() { defaultFS = crashFSFromEnv() }
