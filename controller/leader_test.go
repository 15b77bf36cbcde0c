package controller

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"gostream/transport"
)

func cand(broker, epoch int32, end int64, reachable bool) candidate {
	return candidate{Candidate: transport.Candidate{Broker: broker, LastEpoch: epoch, LogEndOffset: end, Reachable: reachable}}
}

func TestChooseLeader(t *testing.T) {
	cases := []struct {
		name  string
		cands []candidate
		to    int32
		want  int32 // broker, or -1 for none
	}{
		{"none answered", []candidate{cand(2, -1, -1, false), cand(3, -1, -1, false)}, 0, -1},
		{"no candidates", nil, 0, -1},
		{"the only one that answers", []candidate{cand(2, 4, 10, false), cand(3, 1, 5, true)}, 0, 3},
		{"a later epoch wins over a longer log", []candidate{cand(2, 3, 100, true), cand(3, 4, 10, true)}, 0, 3},
		{"same epoch: the longer log", []candidate{cand(2, 4, 10, true), cand(3, 4, 11, true)}, 0, 3},
		{"a tie goes to the lowest id", []candidate{cand(3, 4, 10, true), cand(2, 4, 10, true)}, 0, 2},
		{"unreachable never chosen, however long", []candidate{cand(2, 9, 999, false), cand(3, 1, 1, true)}, 0, 3},
		{"a move takes the named broker, even when shorter", []candidate{cand(1, 4, 20, true), cand(2, 4, 10, true)}, 2, 2},
		{"a move to a broker that did not answer: none", []candidate{cand(1, 4, 20, true), cand(2, 4, 10, false)}, 2, -1},
		{"a move to a broker not among the candidates: none", []candidate{cand(1, 4, 20, true)}, 3, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := chooseLeader(tc.cands, tc.to)
			if tc.want < 0 {
				assert.Equal(t, -1, i)
				return
			}
			if assert.GreaterOrEqual(t, i, 0) {
				assert.Equal(t, tc.want, tc.cands[i].Broker)
			}
		})
	}
}

// Each phase of an operator command runs every step, at most opParallel at
// once, and skips the steps that failed before.
func TestEachRunsEveryLiveStepBounded(t *testing.T) {
	steps := make([]*step, 500)
	for i := range steps {
		steps[i] = &step{partition: int32(i)}
		if i%7 == 0 {
			steps[i].err = assert.AnError
		}
	}
	var mu sync.Mutex
	running, peak := 0, 0
	var ran [500]bool
	each(steps, func(s *step) {
		mu.Lock()
		running++
		peak = max(peak, running)
		ran[s.partition] = true
		mu.Unlock()
		time.Sleep(time.Millisecond) // hold the slot, so that steps overlap
		mu.Lock()
		running--
		mu.Unlock()
	})
	for i, s := range steps {
		assert.Equal(t, s.err == nil, ran[i], "step %d", i)
	}
	assert.LessOrEqual(t, peak, opParallel)
	assert.Greater(t, peak, 1, "the steps ran one at a time")
}

// A leadership move never makes a replica leader that lacks acknowledged
// records: the acknowledged end is the highest high watermark any fenced
// candidate reports (the old leader's), and a replica put back by recover
// may still be short of it.
func TestAcknowledgedEnd(t *testing.T) {
	withHW := func(c candidate, hw int64) candidate { c.hw = hw; return c }
	cands := []candidate{
		withHW(cand(1, 1, 5109, true), 5100), // the old leader, fenced
		withHW(cand(2, 1, 5109, true), 5060),
		withHW(cand(3, 1, 5041, true), 5041),  // recovered, catching up
		withHW(cand(4, 1, 9999, false), 9999), // did not answer: proves nothing
	}
	assert.Equal(t, int64(5100), acknowledgedEnd(cands))
	assert.Less(t, cands[chooseLeader(cands, 3)].LogEndOffset, acknowledgedEnd(cands), "broker 3 is short: the move must not take it")
	assert.Equal(t, int32(1), cands[chooseLeader(cands, 0)].Broker, "the replica a failover would choose holds every acknowledged record")
	assert.Equal(t, int64(-1), acknowledgedEnd(nil))
}
