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

// requireNetworkFaults skips a test that cuts the network when this
// process cannot (no network namespace of its own), or fails it when
// GOSTREAM_REQUIRE_NETNS=1 says it must.
func requireNetworkFaults(t *testing.T) {
	t.Helper()
	if err := Netns(); err != nil {
		if os.Getenv("GOSTREAM_REQUIRE_NETNS") == "1" {
			t.Fatalf("GOSTREAM_REQUIRE_NETNS=1 but there are no network faults here: %v", err)
		}
		t.Skipf("no network faults here: %v", err)
	}
}
