package storage

// SetSyncHook makes f run at the start of every group-commit fsync until
// the returned function is called. Tests that use it must not run in
// parallel with other tests of the package.
func SetSyncHook(f func()) (restore func()) {
	syncHook = f
	return func() { syncHook = nil }
}
