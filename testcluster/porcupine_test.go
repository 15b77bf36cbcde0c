package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hist builds a small history on topic t, in milliseconds from t0.
type hist struct{ ops []Op }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// produce records a send by producer w to partition p.
func (h *hist) produce(w int, p int32, value string, start, end int, result string, offset int64) *hist {
	if result != ResultOK {
		offset = -1
	}
	h.ops = append(h.ops, Op{Kind: OpProduce, Worker: w, Topic: "t", Partition: p, Value: value, Start: ms(start), End: ms(end), Result: result, Offset: offset})
	return h
}

// read records a poll by consumer w of partition p told hw that returned
// recs, "value@offset" each.
func (h *hist) read(w int, p int32, start, end int, hw int64, recs ...string) *hist {
	if len(recs) == 0 {
		h.ops = append(h.ops, Op{Kind: OpRead, Worker: w, Topic: "t", Partition: p, Start: ms(start), End: ms(end), Result: ResultOK, Offset: -1, HW: hw})
	}
	for _, r := range recs {
		var v string
		var off int64
		if _, err := fmt.Sscanf(strings.Replace(r, "@", " ", 1), "%s %d", &v, &off); err != nil {
			panic(r)
		}
		h.ops = append(h.ops, Op{Kind: OpRead, Worker: w, Topic: "t", Partition: p, Value: v, Start: ms(start), End: ms(end), Result: ResultOK, Offset: off, HW: hw})
	}
	return h
}

func TestPorcupineHandMade(t *testing.T) {
	cases := []struct {
		name string
		h    *hist
		ok   bool
		// history says whether CheckHistory finds a violation too.
		history bool
	}{
		{
			name: "sequential",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 0).produce(1, 0, "b", 11, 20, ResultOK, 1).
				read(1, 0, 21, 22, 2, "a@0", "b@1").read(2, 0, 21, 23, 2, "a@0").read(2, 0, 24, 25, 2, "b@1"),
			ok: true,
		},
		{
			name: "concurrent produces acknowledged in either order",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 1).produce(2, 0, "b", 1, 5, ResultOK, 0).
				read(1, 0, 11, 12, 2, "b@0", "a@1").read(2, 0, 11, 12, 2, "b@0", "a@1"),
			ok: true,
		},
		{
			name: "a read racing a produce sees the record before the ack",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 0).
				read(1, 0, 2, 4, 1, "a@0").read(2, 0, 2, 4, 1, "a@0"),
			ok: true,
		},
		{
			name: "a stale high watermark and empty reads",
			h: (&hist{}).produce(1, 0, "a", 0, 2, ResultOK, 0).produce(1, 0, "b", 3, 4, ResultOK, 1).
				read(1, 0, 5, 6, 1, "a@0").read(1, 0, 7, 8, 1).read(1, 0, 9, 10, 2, "b@1").read(1, 0, 11, 12, 2).
				read(2, 0, 5, 6, 0).read(2, 0, 7, 8, 2, "a@0", "b@1"),
			ok: true,
		},
		{
			name: "an unknown produce that landed",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultUnknown, -1).produce(2, 0, "b", 20, 21, ResultOK, 1).
				read(1, 0, 22, 23, 2, "a@0", "b@1").read(2, 0, 22, 23, 2, "a@0", "b@1"),
			ok: true,
		},
		{
			name: "an unknown produce that landed after it timed out and after a later acknowledged one began",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultUnknown, -1).produce(2, 0, "b", 5, 30, ResultOK, 1).
				read(1, 0, 31, 32, 2, "a@0", "b@1").read(2, 0, 31, 32, 2, "a@0", "b@1"),
			ok: true,
		},
		{
			name: "an unknown produce that did not land",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultUnknown, -1).produce(2, 0, "b", 20, 21, ResultOK, 0).
				read(1, 0, 22, 23, 1, "b@0").read(2, 0, 22, 23, 1, "b@0"),
			ok: true,
		},
		{
			name: "an unknown produce that landed last, told in a high watermark, never read",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 10, ResultUnknown, -1).
				read(1, 0, 11, 12, 1, "a@0").read(1, 0, 13, 14, 2).read(2, 0, 11, 12, 1, "a@0"),
			ok: true,
		},
		{
			name: "a failed produce never read",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultFail, -1).produce(1, 0, "b", 2, 3, ResultOK, 0).
				read(1, 0, 4, 5, 1, "b@0").read(2, 0, 4, 5, 1, "b@0"),
			ok: true,
		},
		{
			name: "partitions are separate logs",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 1, "b", 2, 3, ResultOK, 0).
				read(1, 0, 4, 5, 1, "a@0").read(1, 1, 4, 5, 1, "b@0").read(2, 1, 4, 5, 1, "b@0").read(2, 0, 6, 7, 1, "a@0"),
			ok: true,
		},

		{
			name: "an acknowledged write never read back",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 3, ResultOK, 1).
				read(1, 0, 4, 5, 1, "a@0").read(2, 0, 4, 5, 1, "a@0"),
			history: true,
		},
		{
			name: "an acknowledged write read back by one consumer only",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 3, ResultOK, 1).
				read(1, 0, 4, 5, 2, "a@0", "b@1").read(2, 0, 4, 5, 2, "a@0"),
		},
		{
			name: "two values at one offset",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultUnknown, -1).produce(2, 0, "b", 0, 1, ResultUnknown, -1).
				read(1, 0, 4, 5, 1, "a@0").read(2, 0, 4, 5, 1, "b@0"),
			history: true,
		},
		{
			name: "a value at two offsets",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 3, ResultUnknown, -1).
				read(1, 0, 4, 5, 3, "a@0", "b@1", "a@2").read(2, 0, 4, 5, 3, "a@0", "b@1", "a@2"),
			history: true,
		},
		{
			name: "a read of a value never produced",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).
				read(1, 0, 4, 5, 2, "a@0", "ghost@1").read(2, 0, 4, 5, 2, "a@0", "ghost@1"),
			history: true,
		},
		{
			name: "a read of a value produced to another partition",
			h: (&hist{}).produce(1, 1, "a", 0, 1, ResultUnknown, -1).
				read(1, 0, 4, 5, 1, "a@0").read(2, 0, 4, 5, 1, "a@0"),
			history: true,
		},
		{
			name: "a read of a failed produce's value",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultFail, -1).
				read(1, 0, 4, 5, 1, "a@0").read(2, 0, 4, 5, 1, "a@0"),
		},
		{
			name: "a read at the high watermark it was given",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 3, ResultOK, 1).
				read(1, 0, 4, 5, 1, "a@0", "b@1").read(2, 0, 4, 5, 2, "a@0", "b@1"),
			history: true,
		},
		{
			name: "a high watermark above every produce begun",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 10, 11, ResultOK, 1).
				read(1, 0, 4, 5, 2, "a@0").read(1, 0, 12, 13, 2, "b@1").read(2, 0, 12, 13, 2, "a@0", "b@1"),
		},
		{
			name: "a read of a record before its produce began",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(2, 0, "b", 10, 11, ResultOK, 1).
				read(1, 0, 4, 5, 2, "a@0", "b@1").read(2, 0, 12, 13, 2, "a@0", "b@1"),
		},
		{
			name: "a produce acknowledged before another began has the higher offset (one producer)",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 1).produce(1, 0, "b", 2, 3, ResultOK, 0).
				read(1, 0, 4, 5, 2, "b@0", "a@1").read(2, 0, 4, 5, 2, "b@0", "a@1"),
			history: true,
		},
		{
			name: "a produce acknowledged before another began has the higher offset (two producers)",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 1).produce(2, 0, "b", 2, 3, ResultOK, 0).
				read(1, 0, 4, 5, 2, "b@0", "a@1").read(2, 0, 4, 5, 2, "b@0", "a@1"),
		},
		{
			name: "an unknown produce read at an offset below one acknowledged before it began",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 1).produce(2, 0, "b", 2, 3, ResultUnknown, -1).
				read(1, 0, 4, 5, 2, "b@0", "a@1").read(2, 0, 4, 5, 2, "b@0", "a@1"),
		},
		{
			name: "a consumer skipped a record another read",
			h: (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 0).produce(1, 0, "b", 2, 3, ResultOK, 1).
				read(1, 0, 4, 5, 2, "b@1").read(2, 0, 4, 5, 2, "a@0", "b@1"),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := CheckPorcupine(c.h.ops, 10*time.Second)
			v, _ := CheckHistory(c.h.ops)
			t.Logf("porcupine %s: %v; CheckHistory: %v", res.Verdict, res.Violations, v)
			if c.ok {
				assert.Equal(t, PorcupineOK, res.Verdict, "%v", res.Violations)
				assert.Empty(t, v, "CheckHistory finds a violation in a history meant valid")
				return
			}
			require.Equal(t, PorcupineViolation, res.Verdict)
			require.NotEmpty(t, res.Violations)
			assert.Contains(t, res.Violations[0], "t/0")
			var html bytes.Buffer
			require.NoError(t, res.Visualize(&html))
			assert.True(t, strings.Contains(html.String(), "<html"), "no visualization")
			assert.Equal(t, c.history, len(v) > 0, "CheckHistory: %v", v)
		})
	}
}

// TestPorcupineViolationSavedWithRun checks that a run that porcupine
// finds a violation in is saved with the visualization and the verdict.
func TestPorcupineViolationSavedWithRun(t *testing.T) {
	h := (&hist{}).produce(1, 0, "a", 0, 1, ResultOK, 1).produce(2, 0, "b", 2, 3, ResultOK, 0).
		read(1, 0, 4, 5, 2, "b@0", "a@1").read(2, 0, 4, 5, 2, "b@0", "a@1")
	hs := &History{}
	for _, op := range h.ops {
		hs.Add(op)
	}
	dir, runs := t.TempDir(), t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "harness.log"))
	require.NoError(t, err)
	defer logf.Close()
	r := &run{cfg: ScenarioConfig{Name: "hand-made", Seed: 1, RunsDir: runs, PorcupineTimeout: 10 * time.Second}, hist: hs, dir: dir, out: logWriter{t}, logf: logf}
	res := Result{Porcupine: r.checkPorcupine(hs.Ops())}
	require.Equal(t, PorcupineViolation, res.Porcupine.Verdict)
	res.Violations = res.Porcupine.Violations
	saved := r.save(res)
	require.Equal(t, filepath.Join(runs, "hand-made-1"), saved)
	html, err := os.ReadFile(filepath.Join(saved, "porcupine.html"))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(html), "ok at 1"), "the visualization does not name the operations")
	text, err := os.ReadFile(filepath.Join(saved, "violations.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(text), "porcupine: violation")
	assert.Contains(t, string(text), "not linearizable")
	_, err = os.Stat(filepath.Join(saved, "history.jsonl"))
	assert.NoError(t, err)
}
