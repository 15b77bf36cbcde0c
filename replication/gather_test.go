package replication

import "testing"

// TestGathererWaitsOnlyWhileBusy: a sender waits for the producers a
// round answered only while rounds run back to back, stops after a wait
// they did not answer, and waits again only after 1, 2, 4, ... rounds
// (up to maxGatherBackoff) while its waits keep missing.
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
			{"they came", (*gatherer).got, 16},
			{"16 answered, none behind: still busy", ended(16, 0, true), 16},
			{"they came", (*gatherer).got, 16},
			{"16 again", ended(16, 0, true), 16},
			{"a wait they did not answer", (*gatherer).missed, 0},
			{"the round after it does not wait", ended(15, 1, true), 0},
			{"busy again", ended(7, 8, true), 15},
			{"they came", (*gatherer).got, 15},
			{"15 answered, none behind", ended(15, 0, true), 15},
		}},
		{"producers that keep missing", []step{
			{"busy", ended(4, 1, true), 5},
			{"miss 1", (*gatherer).missed, 0},
			{"skipped 1 of 1", ended(4, 1, true), 0},
			{"busy", ended(4, 1, true), 5},
			{"miss 2", (*gatherer).missed, 0},
			{"skipped 1 of 2", ended(4, 1, true), 0},
			{"skipped 2 of 2", ended(4, 1, true), 0},
			{"busy", ended(4, 1, true), 5},
			{"miss 3", (*gatherer).missed, 0},
			{"skipped 1 of 4", ended(4, 1, true), 0},
			{"skipped 2 of 4", ended(4, 1, true), 0},
			{"skipped 3 of 4", ended(4, 1, true), 0},
			{"skipped 4 of 4", ended(4, 1, true), 0},
			{"busy", ended(4, 1, true), 5},
			{"a wait that got them", (*gatherer).got, 5},
			{"busy", ended(4, 1, true), 5},
			{"a miss starts again from 1", (*gatherer).missed, 0},
			{"skipped 1 of 1", ended(4, 1, true), 0},
			{"busy", ended(4, 1, true), 5},
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

	var g gatherer
	for range 500 {
		g.ended(4, 1, true)
		if g.want > 0 {
			g.missed()
		}
	}
	if g.backoff != maxGatherBackoff {
		t.Errorf("after misses in a row the backoff is %d rounds, want %d", g.backoff, maxGatherBackoff)
	}
}
