package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuditTrailHoldsWhatADyingControllerChanged: the controller dies
// right after it committed a `failover --broker N` (crash point
// failover-after-commit), before it answered or told any broker. The
// change was made: every partition of broker N has it out of its active
// set. The audit trail must hold an event for each of those partitions,
// whoever reads it next: the same single controller restarted, or the
// next active candidate of a replicated controller.
func TestAuditTrailHoldsWhatADyingControllerChanged(t *testing.T) {
	cases := []struct {
		name       string
		nodes      int
		candidates int
		lost       int32 // the broker failed over
		dies       int32 // the controller that dies after the commit
	}{
		{name: "single controller", nodes: 3, lost: 3, dies: 1},
		{name: "three candidates", nodes: 4, candidates: 3, lost: 4, dies: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startClusterWith(t, Config{Nodes: tc.nodes, Candidates: tc.candidates})
			cl := newClient(t, c)
			createTopic(t, cl, "audited", 8, 3)
			require.NoError(t, c.Node(tc.lost).Kill())

			// The controller that will die: restarted with the crash
			// point, and made the active one.
			k := restartWithCrashpoint(t, c, tc.dies, "failover-after-commit")
			if tc.candidates > 0 {
				makeActive(t, c, tc.dies)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := c.Ctl(ctx, "", "failover", "--broker", fmt.Sprint(tc.lost))
			require.NoError(t, err)
			require.NotEqual(t, 0, res.Exit, "the controller died mid-failover: %s", res.Stdout)
			require.Eventually(t, func() bool { return !k.Running() }, 10*time.Second, 50*time.Millisecond, "the controller died at its crash point")

			// Whoever reads the trail next: the single controller back, or
			// the next active candidate.
			if tc.candidates == 0 {
				require.NoError(t, c.StartNode(tc.dies))
			} else {
				_, err := c.ActiveController(30*time.Second, tc.dies)
				require.NoError(t, err)
			}

			// The change was made: broker lost is in no active set.
			var changed []int32
			require.Eventually(t, func() bool {
				dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
				defer dcancel()
				if err := cl.RefreshMetadata(dctx); err != nil {
					return false
				}
				tm, err := cl.DescribeTopic(dctx, "audited")
				if err != nil {
					return false
				}
				changed = changed[:0]
				for p, part := range tm.Partitions {
					if slices.Contains(part.Active, tc.lost) {
						return false
					}
					if slices.Contains(part.Replicas, tc.lost) {
						changed = append(changed, int32(p))
					}
				}
				return true
			}, time.Minute, 250*time.Millisecond, "broker %d is out of every active set", tc.lost)
			require.NotEmpty(t, changed)

			var hist struct {
				Events []changeResult `json:"events"`
			}
			out := ctlOK(t, c, "cluster", "history", "--output", "json").Stdout
			require.NoError(t, json.Unmarshal([]byte(out), &hist), out)
			recorded := map[int32]string{}
			for _, ev := range hist.Events {
				if ev.Topic == "audited" && (ev.Action == "failover" || ev.Action == "drop-follower") && !slices.Contains(ev.NewActive, tc.lost) {
					recorded[ev.Partition] = ev.Action
				}
			}
			for _, p := range changed {
				assert.Contains(t, recorded, p, "audited/%d lost broker %d from its active set: the trail must say so\n%s", p, tc.lost, out)
			}
		})
	}
}
