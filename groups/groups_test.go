package groups

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tp(t string, p int32) TopicPartition { return TopicPartition{Topic: t, Partition: p} }

func sampleRecords() []Record {
	commit := Commit{Topic: "orders", TopicID: "0123456789abcdef0123456789abcdef", Partition: 2, Offset: 41, Metadata: "batch 7", MemberID: "m-1", MemberEpoch: 3, TimeMs: 1764000000000}
	return []Record{
		{Group: "billing", Kind: KindCommit, Commit: &commit},
		{Group: "billing", Kind: KindCommit, Commit: &Commit{Topic: "orders", Partition: 0, Offset: 0, MemberEpoch: -1}},
		{Group: "billing", Kind: KindMember, Member: &Member{MemberID: "m-1", InstanceID: "pod-a", Host: "10.0.0.7", Topics: []string{"orders", "payments"}, SessionTimeoutMs: 10000, MemberEpoch: 3}},
		{Group: "billing", Kind: KindMemberGone, Gone: &MemberGone{MemberID: "m-1", Reason: "session expired"}},
		{Group: "billing", Kind: KindAssignment, Assignment: &Assignment{GroupEpoch: 4, Members: []MemberAssignment{
			{MemberID: "m-1", Partitions: []TopicPartition{tp("orders", 0), tp("orders", 1)}}, {MemberID: "m-2"}}}},
		{Group: "billing", Kind: KindReset, Reset: &Reset{Requester: "127.0.0.1:5000", Offsets: []Commit{commit}}},
		{Group: "billing", Kind: KindGroupDeleted},
		{Kind: KindSnapshotStart},
		{Group: "billing", Kind: KindSnapshotGroup, Snapshot: &SnapshotGroup{First: true, GroupEpoch: 4,
			Target:  []MemberAssignment{{MemberID: "m-1", Partitions: []TopicPartition{tp("orders", 0)}}},
			Members: []Member{{MemberID: "m-1", Host: "h", Topics: []string{"orders"}, SessionTimeoutMs: 10000, MemberEpoch: 3}},
			Offsets: []Commit{commit}}},
		{Group: "billing", Kind: KindSnapshotGroup, Snapshot: &SnapshotGroup{Offsets: []Commit{commit, commit}}},
		{Kind: KindSnapshotEnd, End: &SnapshotEnd{Start: 120, Groups: 1, Records: 2}},
		{Group: "billing", Kind: KindClassic, Classic: &ClassicGeneration{Generation: 5, Stable: true, ProtocolType: "consumer", Protocol: "range",
			Leader: "c-1", Members: []ClassicMember{
				{MemberID: "c-1", ClientID: "rdkafka", ClientHost: "/10.0.0.7", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 300000,
					Protocols: []Protocol{{Name: "range", Metadata: []byte{0, 1, 0, 0, 0, 0}}, {Name: "roundrobin"}}, Assignment: []byte{0, 1, 2}},
				{MemberID: "pod-b-1", InstanceID: "pod-b", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, Protocols: []Protocol{{Name: "range"}}, Assignment: []byte{}}}}},
		{Group: "billing", Kind: KindClassic, Classic: &ClassicGeneration{Generation: 6, ProtocolType: "connect", Protocol: "sessioned", Leader: "w-1",
			Members: []ClassicMember{{MemberID: "w-1", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000, Protocols: []Protocol{{Name: "sessioned", Metadata: []byte("x")}}}}}},
		{Group: "billing", Kind: KindClassic, Classic: &ClassicGeneration{Generation: 7, Stable: true, ProtocolType: "consumer"}},
		{Group: "billing", Kind: KindOffsetsDeleted, Deleted: &OffsetsDeleted{Requester: "ops@host", Partitions: []TopicPartition{tp("orders", 2), tp("payments", 0)}}},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		t.Run(r.Kind.String(), func(t *testing.T) {
			k, v, err := r.Encode()
			require.NoError(t, err)
			got, err := Decode(k, v)
			require.NoError(t, err)
			assert.Equal(t, r, got)
		})
	}
}

// What a damaged disk or a hostile writer could put in the log is never
// taken for a record, and Encode refuses to write what Decode would refuse.
func TestDecodeRefusesWhatEncodeWouldNotWrite(t *testing.T) {
	k, v, err := sampleRecords()[0].Encode()
	require.NoError(t, err)
	bad := map[string]struct{ key, value []byte }{
		"empty value":      {k, nil},
		"another version":  {k, append([]byte{9}, v[1:]...)},
		"an unknown kind":  {k, append([]byte{v[0], 99}, v[2:]...)},
		"a byte left over": {k, append(append([]byte{}, v...), 0)},
		"cut short":        {k, v[:len(v)-3]},
		"a bad group name": {[]byte("../x"), v},
		"an empty group":   {nil, v},
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(b.key, b.value)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
	refused := []Record{
		{Group: "g", Kind: KindSnapshotStart},
		{Kind: KindSnapshotGroup, Snapshot: &SnapshotGroup{First: true}},
		{Group: "g", Kind: KindSnapshotGroup, Snapshot: &SnapshotGroup{GroupEpoch: 3}},
		{Kind: KindSnapshotEnd, End: &SnapshotEnd{Start: -1}},
		{Group: "g", Kind: KindCommit, Commit: &Commit{Topic: "t", Offset: -1}},
		{Group: "g", Kind: KindCommit, Commit: &Commit{Topic: "t", Partition: -2}},
		{Group: "g", Kind: KindCommit, Commit: &Commit{Topic: "t", Metadata: strings.Repeat("x", MaxMetadataBytes+1)}},
		{Group: "g", Kind: KindCommit, Commit: &Commit{Topic: "../t"}},
		{Group: "g", Kind: KindCommit},
		{Group: "g", Kind: KindMember, Member: &Member{MemberID: "", SessionTimeoutMs: 1}},
		{Group: "g", Kind: KindMember, Member: &Member{MemberID: "m", SessionTimeoutMs: 0}},
		{Group: "g", Kind: KindMemberGone, Gone: &MemberGone{MemberID: strings.Repeat("m", 256)}},
		{Group: "g", Kind: Kind(42)},
		{Group: "bad/name", Kind: KindGroupDeleted},
	}
	for _, r := range refused {
		_, _, err := r.Encode()
		assert.ErrorIs(t, err, ErrMalformed, "%+v", r)
	}
}

func TestRangeAssign(t *testing.T) {
	// Six partitions over three members: two each, contiguous, by member id.
	got := RangeAssign(map[string][]string{"c": {"orders"}, "a": {"orders"}, "b": {"orders"}}, map[string]int32{"orders": 6})
	assert.Equal(t, map[string][]TopicPartition{
		"a": {tp("orders", 0), tp("orders", 1)},
		"b": {tp("orders", 2), tp("orders", 3)},
		"c": {tp("orders", 4), tp("orders", 5)},
	}, got)
	// Seven over three: the first takes one more. Per topic: a member
	// subscribed to a topic alone takes all of it; a topic of unknown
	// size, and a member with nothing to take, get nothing.
	got = RangeAssign(map[string][]string{"a": {"orders", "audit"}, "b": {"orders"}, "c": {"orders", "gone"}, "d": {"gone"}},
		map[string]int32{"orders": 7, "audit": 2})
	assert.Equal(t, map[string][]TopicPartition{
		"a": {tp("audit", 0), tp("audit", 1), tp("orders", 0), tp("orders", 1), tp("orders", 2)},
		"b": {tp("orders", 3), tp("orders", 4)},
		"c": {tp("orders", 5), tp("orders", 6)},
		"d": nil,
	}, got)
	// More members than partitions: the last ones get none.
	got = RangeAssign(map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 2})
	assert.Equal(t, []TopicPartition{tp("t", 0)}, got["a"])
	assert.Equal(t, []TopicPartition{tp("t", 1)}, got["b"])
	assert.Empty(t, got["c"])
}

// A member joins a group of two over six partitions: only the partitions
// that must move, move, each only after its old owner released it, and at
// no step does a partition have two owners.
func TestReconcileMovesOnlyWhatMustMoveAndNeverDoublesAnOwner(t *testing.T) {
	before := RangeAssign(map[string][]string{"a": {"t"}, "b": {"t"}}, map[string]int32{"t": 6})
	owners := map[TopicPartition]string{}
	for m, tps := range before {
		for _, p := range tps {
			owners[p] = m
		}
	}
	target := RangeAssign(map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 6})
	// a: 0 1 2 -> 0 1; b: 3 4 5 -> 2 3; c: -> 4 5.
	assigned, revoke := Reconcile(target, owners, "c")
	assert.Empty(t, assigned, "c gets nothing another member still owns")
	assert.Empty(t, revoke)
	assigned, revoke = Reconcile(target, owners, "b")
	assert.Equal(t, []TopicPartition{tp("t", 3)}, assigned, "b keeps 3; 2 is still a's")
	assert.Equal(t, []TopicPartition{tp("t", 4), tp("t", 5)}, revoke)
	// b releases 4 and 5; a releases 2.
	delete(owners, tp("t", 4))
	delete(owners, tp("t", 5))
	_, revoke = Reconcile(target, owners, "a")
	assert.Equal(t, []TopicPartition{tp("t", 2)}, revoke)
	delete(owners, tp("t", 2))
	for _, m := range []string{"a", "b", "c"} {
		assigned, revoke := Reconcile(target, owners, m)
		assert.Empty(t, revoke)
		for _, p := range assigned {
			if o, ok := owners[p]; ok {
				assert.Equal(t, m, o, "%v has two owners", p)
			}
			owners[p] = m
		}
	}
	assert.Equal(t, map[TopicPartition]string{tp("t", 0): "a", tp("t", 1): "a", tp("t", 2): "b", tp("t", 3): "b", tp("t", 4): "c", tp("t", 5): "c"}, owners)
}
