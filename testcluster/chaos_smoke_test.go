package testcluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestChaosSmoke runs a short pass of the chaos harness on every `make
// test`: a leader cut off from its followers, a crash that loses unsynced
// writes, slow lossy links and a power loss of the whole cluster (each
// node loses what it had not fsync'd), a few faults each, checked against
// every invariant the checker knows. The seed changes from run to run, so
// that every CI run explores a little more; a failure prints it and saves
// the run under testcluster/runs/ with the command that replays it. `make
// chaos` runs every scenario for longer.
func TestChaosSmoke(t *testing.T) {
	if testing.Short() {
		skipSmoke(t, "-short mode")
	}
	if err := Netns(); err != nil {
		if os.Getenv("GOSTREAM_REQUIRE_NETNS") == "1" {
			t.Fatalf("GOSTREAM_REQUIRE_NETNS=1 but there are no network faults here: %v", err)
		}
		skipSmoke(t, fmt.Sprintf("no network faults here: %v", err))
	}
	seed := time.Now().UnixNano() % 1_000_000_000
	for i, sc := range []struct {
		name   string
		secure bool
	}{
		{"leader-isolated", false}, {"lost-unsynced", false}, {"slow-network", false}, {"power-loss", false},
		// The same with TLS, mutual TLS, gossip encryption and tokens on
		// every link (docs/security.md).
		{"leader-isolated", true}, {"power-loss", true},
	} {
		s, name := seed+int64(i), sc.name
		label := name
		if sc.secure {
			label += "-secure"
		}
		t.Run(label, func(t *testing.T) {
			replay := fmt.Sprintf("go run ./testcluster/cmd/chaos --scenarios %s --seed %d --duration 12s", name, s)
			if sc.secure {
				replay += " --secure"
			}
			res := RunScenario(ScenarioConfig{Name: name, Seed: s, Duration: 12 * time.Second, Out: logWriter{t}, Replay: replay, Secure: sc.secure})
			t.Logf("%s seed %d: %d faults (%d on leaders), %d operations, %d acknowledged, %d records read, %d violations",
				name, s, res.Faults, res.LeaderFaults, res.Stats.Ops, res.Stats.Acked, res.Stats.Reads, len(res.Violations))
			if res.Err != nil {
				t.Fatalf("harness: %v (replay: %s)", res.Err, replay)
			}
			if res.Faults == 0 || res.Stats.Acked == 0 {
				t.Fatalf("the smoke injected %d faults and saw %d acknowledged writes: it tested nothing", res.Faults, res.Stats.Acked)
			}
			if len(res.Violations) > 0 {
				t.Fatalf("%d violations (saved to %s; replay: %s):\n%s", len(res.Violations), res.SavedTo, replay, strings.Join(res.Violations, "\n"))
			}
		})
	}
}

// smokeSkipReportEnv names a file where TestChaosSmoke writes why it
// skipped. go test prints a skip only with -v, so `make test` sets it and
// prints the file: a run without the smoke says so.
const smokeSkipReportEnv = "GOSTREAM_CHAOS_SMOKE_SKIP_REPORT"

// skipSmoke skips the chaos smoke for the reason why, written first to the
// file smokeSkipReportEnv names, if any.
func skipSmoke(t *testing.T, why string) {
	t.Helper()
	if path := os.Getenv(smokeSkipReportEnv); path != "" {
		if err := os.WriteFile(path, []byte(why+"\n"), 0o644); err != nil {
			t.Errorf("write the skip report: %v", err)
		}
	}
	t.Skipf("chaos smoke skipped: %s", why)
}
