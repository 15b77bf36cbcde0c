package replication

// SetFetchWakeHook sets fetchWakeHook for the tests of package
// replication_test; nil removes it.
func SetFetchWakeHook(f func(*Partition)) { fetchWakeHook = f }
