package replication

import "testing"

// TestGathererWaitsOnlyWhileBusy: a sender waits for the producers a
// round answered only while rounds run back to back, and stops waiting
// after a wait they did not answer.
func TestGathererWaitsOnlyWhileBusy(t *testing.T) {
	type step struct {
		name     string
		do       func(g *gatherer)
		wantWant int
	}
	ended := func(n, q int, ok bool) func(*gatherer) { return func(g *gatherer) { g.ended(n, q, ok) } }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a lone synchronous producer", []step{
			{"round of 1", ended(1, 0, true), 0},
			{"round of 1 again", ended(1, 0, true), 0},
		}},
		{"producers that pause between writes", []step{
			{"4 at once, nothing behind", ended(4, 0, true), 0},
			{"again", ended(4, 0, true), 0},
		}},
		{"busy producers", []step{
			{"8 answered, 8 queued behind", ended(8, 8, true), 16},
			{"16 answered, none behind: still busy", ended(16, 0, true), 16},
			{"16 again", ended(16, 0, true), 16},
			{"a wait they did not answer", (*gatherer).missed, 0},
			{"15 answered, none behind: no longer busy", ended(15, 0, true), 0},
			{"busy again", ended(7, 8, true), 15},
		}},
		{"a failed round or a catch-up", []step{
			{"busy", ended(8, 8, true), 16},
			{"failed", ended(16, 3, false), 0},
			{"nothing behind after it", ended(16, 0, true), 0},
		}},
		{"an empty round", []step{
			{"busy", ended(8, 8, true), 16},
			{"nothing taken", ended(0, 0, true), 0},
		}},
	} {
		var g gatherer
		for _, s := range tc.steps {
			s.do(&g)
			if g.want != s.wantWant {
				t.Errorf("%s, %s: waits for %d batches, want %d", tc.name, s.name, g.want, s.wantWant)
			}
		}
	}
}
