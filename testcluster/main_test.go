package testcluster

import (
	"os"
	"testing"
)

// TestMain runs the package's tests inside a network namespace of their
// own when it can make one (see ReexecInNetns), so that the chaos smoke
// can cut links; elsewhere they run as they are and the network-fault
// tests skip, saying why.
func TestMain(m *testing.M) {
	if code, done := ReexecInNetns(); done {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
