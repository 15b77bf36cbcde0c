package testcluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// final records the final read of partition p: its log start, its high
// watermark and its records, "value@offset" each.
func (h *hist) final(p int32, start, hw int64, recs ...string) *hist {
	at := ms(1000)
	h.ops = append(h.ops, Op{Kind: OpFinal, Topic: "t", Partition: p, Start: at, End: at, Result: ResultOK, Offset: -1, LogStart: start, HW: hw})
	for _, r := range recs {
		var v string
		var off int64
		if _, err := fmt.Sscanf(strings.Replace(r, "@", " ", 1), "%s %d", &v, &off); err != nil {
			panic(r)
		}
		h.ops = append(h.ops, Op{Kind: OpFinal, Topic: "t", Partition: p, Value: v, Start: at, End: at, Result: ResultOK, Offset: off})
	}
	return h
}

// TestCheckHistoryReadRecordsStay: a record a consumer read must be at
// its offset in the final read, whatever its produce's result; one read
// and then gone (a leader that served a tail no follower held, failed
// over), or replaced, is a violation for both checkers, with a message
// that names the partition, the offset, what was read and what is there
// now. A record never read may go, and a history without a final read is
// judged as before.
func TestCheckHistoryReadRecordsStay(t *testing.T) {
	// a acknowledged at 0; b's send timed out (the leader kept it); both
	// read by both consumers, told high watermark 2.
	base := func() *hist {
		return (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 0).produce(2, 0, "b", 0, 10, ResultUnknown, -1).
			read(1, 0, 11, 12, 2, "a@0", "b@1").read(2, 0, 11, 12, 2, "a@0", "b@1")
	}
	cases := []struct {
		name string
		h    *hist
		// want are substrings of the one read-lost violation; none if empty.
		want []string
	}{
		{
			name: "an unknown produce read survives",
			h:    base().final(0, 0, 2, "a@0", "b@1"),
		},
		{
			name: "an unknown produce read, then gone",
			h:    base().final(0, 0, 1, "a@0"),
			want: []string{"read-lost: partition 0 offset 1: consumer 1 read \"b\"", "(high watermark 2)", "its produce unknown",
				"the log now ends below it (final read: log start 0, high watermark 1)"},
		},
		{
			name: "an unknown produce read, then replaced by another",
			h:    base().produce(3, 0, "c", 20, 30, ResultUnknown, -1).final(0, 0, 2, "a@0", "c@1"),
			want: []string{"read-lost: partition 0 offset 1: consumer 1 read \"b\"", "the log now holds \"c\" there"},
		},
		{
			name: "an unknown produce never read, then gone",
			h: (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 0).produce(2, 0, "b", 0, 10, ResultUnknown, -1).
				read(1, 0, 11, 12, 1, "a@0").read(2, 0, 11, 12, 1, "a@0").final(0, 0, 1, "a@0"),
		},
		{
			name: "a record read below the final log start (retention deleted it)",
			h:    base().final(0, 1, 2, "b@1"),
		},
		{
			name: "no final read",
			h:    base(),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, _ := CheckHistory(c.h.ops)
			res := CheckPorcupine(c.h.ops, 10*time.Second)
			t.Logf("CheckHistory: %v; porcupine %s: %v", v, res.Verdict, res.Violations)
			if len(c.want) == 0 {
				assert.Empty(t, v)
				assert.Equal(t, PorcupineOK, res.Verdict, "%v", res.Violations)
				return
			}
			require.Len(t, v, 1, "one record lost, reported once though both consumers read it")
			for _, s := range c.want {
				assert.Contains(t, v[0], s)
			}
			assert.Equal(t, PorcupineViolation, res.Verdict)
			require.NotEmpty(t, res.Violations)
			assert.Contains(t, res.Violations[0], "final read")
		})
	}
}

// TestCheckGroupReadsStay: a record a group member printed must be at its
// offset in the final read of the workload's history too.
func TestCheckGroupReadsStay(t *testing.T) {
	ops := (&hist{}).produce(1, 0, "a", 0, 10, ResultOK, 0).produce(2, 0, "b", 0, 10, ResultUnknown, -1).
		read(1, 0, 11, 12, 1, "a@0").final(0, 0, 1, "a@0").ops
	printed := func(recs ...string) []Op {
		var out []Op
		for _, r := range recs {
			v, off, _ := strings.Cut(r, "@")
			var o int64
			fmt.Sscan(off, &o)
			out = append(out, Op{Kind: OpGroupRead, Worker: 2, Topic: "t", Partition: 0, Value: v, Offset: o, Start: ms(15), End: ms(15), Result: ResultOK})
		}
		return out
	}
	assert.Empty(t, CheckGroupReads(printed("a@0"), ops))
	v := CheckGroupReads(printed("a@0", "b@1"), ops)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "read-lost: partition 0 offset 1: group member 2 printed \"b\"")
	assert.Contains(t, v[0], "the log now ends below it")
}
