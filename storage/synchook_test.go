package storage

// PreallocBytes is the largest stretch by which the active segment is
// preallocated ahead of its data.
const PreallocBytes = preallocBytes

// SetSyncHook makes f run at the start of every group-commit fsync until
// the returned function is called. Tests that use it must not run in
// parallel with other tests of the package.
func SetSyncHook(f func()) (restore func()) {
	syncHook = f
	return func() { syncHook = nil }
}

// SetPreallocHook makes f hear each choice of how to preallocate (true:
// written zeros) until the returned function is called. Tests that use it
// must not run in parallel with other tests of the package.
func SetPreallocHook(f func(zeros bool)) (restore func()) {
	preallocHook = f
	return func() { preallocHook = nil }
}

// CrashFSFromEnv is the default FS of a binary built with the crashfs tag.
func CrashFSFromEnv() FS { return crashFSFromEnv() }

// SkipGroupCommitFsync makes every group commit publish its appends as
// durable without fsyncing them, until the returned function is called:
// the bug the crash tests must catch. Tests that use it must not run in
// parallel with other tests of the package.
func SkipGroupCommitFsync() (restore func()) {
	groupCommitSync = func(File) error { return nil }
	return func() { groupCommitSync = File.Sync }
}

// SetGroupCommitSync makes f do every group-commit fsync (it is given the
// active segment's file) until the returned function is called. Tests that
// use it must not run in parallel with other tests of the package.
func SetGroupCommitSync(f func(File) error) (restore func()) {
	groupCommitSync = f
	return func() { groupCommitSync = File.Sync }
}
