package testcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Events of a Kafka member's log, as kafkamember prints them.
func assigned(member string, gen int32, owned ...int32) KafkaMemberEvent {
	return KafkaMemberEvent{Event: "assigned", Member: member, Generation: gen, Owned: owned}
}

func revoked(gen int32, parts ...int32) KafkaMemberEvent {
	return KafkaMemberEvent{Event: "revoked", Generation: gen, Partitions: parts}
}

func lost(gen int32, parts ...int32) KafkaMemberEvent {
	return KafkaMemberEvent{Event: "lost", Generation: gen, Partitions: parts}
}

// records are the records of partition p at offsets from to to, inclusive.
func records(p int32, from, to int64) []KafkaMemberEvent {
	var out []KafkaMemberEvent
	for o := from; o <= to; o++ {
		out = append(out, KafkaMemberEvent{Event: "record", Partition: p, Offset: o, Value: "v"})
	}
	return out
}

func committed(gen int32, p int32, offset int64) KafkaMemberEvent {
	return KafkaMemberEvent{Event: "committed", Generation: gen, Offsets: map[int32]int64{p: offset}}
}

func events(parts ...any) []KafkaMemberEvent {
	var out []KafkaMemberEvent
	for _, p := range parts {
		switch e := p.(type) {
		case KafkaMemberEvent:
			out = append(out, e)
		case []KafkaMemberEvent:
			out = append(out, e...)
		}
	}
	return out
}

// TestCheckKafkaMemberLogs: the checks of the Kafka group's member logs
// pass a group whose members read again, after a rebalance, what was not
// committed, and report each way of breaking them.
func TestCheckKafkaMemberLogs(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name string
		logs []KafkaMemberLog
		want string // a substring of the one violation; empty: none
	}{
		{"a partition moves after a rebalance, read again from its last commit", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0, 1), records(0, 0, 9), committed(1, 0, 8),
				records(0, 10, 12), revoked(2, 0), assigned("a", 2, 1))},
			{Slot: 5, Incarnation: 1, Started: at(0), Events: events(assigned("b", 2), assigned("b", 3, 0), records(0, 8, 20))},
		}, ""},
		{"a member killed: its partition read again from its last commit by another", []KafkaMemberLog{
			{Slot: 5, Incarnation: 1, Started: at(0), Ended: at(5), Events: events(assigned("a", 1, 0), records(0, 0, 9), committed(1, 0, 5))},
			{Slot: 6, Incarnation: 1, Started: at(0), Events: events(assigned("b", 1, 1), assigned("b", 2, 0, 1), records(0, 5, 9))},
		}, ""},
		{"the static member restarted within its session: the same generation, the same owner", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Instance: "s", Started: at(0), Ended: at(5), Events: events(assigned("s-1", 3, 0), records(0, 0, 9), committed(3, 0, 7))},
			{Slot: 4, Incarnation: 2, Instance: "s", Started: at(6), Events: events(assigned("s-2", 3, 0), records(0, 7, 12))},
		}, ""},
		{"a zombie reads on in its old generation while another owns the partition in the next", []KafkaMemberLog{
			{Slot: 5, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0), records(0, 0, 9), committed(1, 0, 10),
				records(0, 10, 14), lost(1, 0), assigned("a2", 3))},
			{Slot: 6, Incarnation: 1, Started: at(0), Events: events(assigned("b", 1), assigned("b", 2, 0), records(0, 10, 20))},
		}, ""},
		{"two members own a partition in one generation", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 2, 0, 1))},
			{Slot: 5, Incarnation: 1, Started: at(0), Events: events(assigned("b", 2, 1, 2))},
		}, "partition 1 owned by Kafka member 4 (incarnation 1) (member id a) and by Kafka member 5 (incarnation 1) (member id b) in generation 2"},
		{"an offset read again with no rebalance", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0), records(0, 0, 9), records(0, 5, 5))},
		}, "printed partition 0 offset 5 again, after offset 9, with no rebalance between"},
		{"a member given a partition reads from below a commit of an earlier generation", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0), records(0, 0, 9), committed(1, 0, 10), revoked(2, 0))},
			{Slot: 5, Incarnation: 1, Started: at(0), Events: events(assigned("b", 3, 0), records(0, 4, 12))},
		}, "given partition 0 in generation 3, read from offset 4: below offset 10, committed and acknowledged before (generation 1, by Kafka member 4 (incarnation 1))"},
		{"the static member restarted reads from below what its dead process committed", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Instance: "s", Started: at(0), Ended: at(5), Events: events(assigned("s-1", 3, 0), records(0, 0, 9), committed(3, 0, 10))},
			{Slot: 4, Incarnation: 2, Instance: "s", Started: at(6), Events: events(assigned("s-2", 3, 0), records(0, 2, 12))},
		}, "read from offset 2: below offset 10"},
		{"a record of a partition the member does not own", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0), records(1, 3, 3))},
		}, "printed partition 1 offset 3 (\"v\"), a partition it did not own"},
		{"a record of a partition revoked", []KafkaMemberLog{
			{Slot: 4, Incarnation: 1, Started: at(0), Events: events(assigned("a", 1, 0), records(0, 0, 3), revoked(2, 0), records(0, 4, 4))},
		}, "printed partition 0 offset 4 (\"v\"), a partition it did not own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, st := CheckKafkaMemberLogs(tc.logs)
			if tc.want == "" {
				assert.Empty(t, v)
				return
			}
			require.Len(t, v, 1, "%v", v)
			assert.Contains(t, v[0], tc.want)
			assert.Positive(t, st.Records+st.Assignments)
		})
	}
}

// The statistics count what was read again.
func TestCheckKafkaMemberLogsStats(t *testing.T) {
	v, st := CheckKafkaMemberLogs([]KafkaMemberLog{
		{Slot: 5, Incarnation: 1, Ended: time.Now(), Events: events(assigned("a", 1, 0), records(0, 0, 9), committed(1, 0, 5))},
		{Slot: 6, Incarnation: 1, Events: events(assigned("b", 1, 1), assigned("b", 2, 0, 1), records(0, 5, 11))},
	})
	assert.Empty(t, v)
	assert.Equal(t, KafkaGroupStats{Processes: 2, Generations: 2, Assignments: 3, Records: 17, Commits: 1, Redelivered: 5, Spans: 3}, st)
}

// A group's committed offset above the high watermark taken once the
// producers stopped is reported; at or below it, or not seen, is not.
func TestCommittedPastHighWatermarks(t *testing.T) {
	hws := map[int32]int64{0: 100, 1: 50, 2: 70}
	assert.Empty(t, committedPastHighWatermarks("group g", "chaos", map[int32]int64{0: 100, 1: 12}, hws))
	assert.Equal(t, []string{"group g: committed offset 51 of chaos/1 is past its high watermark 50"},
		committedPastHighWatermarks("group g", "chaos", map[int32]int64{0: 100, 1: 51, 2: 70}, hws))
}
