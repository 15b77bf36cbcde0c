package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func commitRec(group string, c Commit) Record {
	return Record{Group: group, Kind: KindCommit, Commit: &c}
}

// PyStream's rules for a progress identity with no members: never
// committed is not committed 0; a commit below the stored offset is
// refused unless it is an explicit reset; negative, past the log end, or
// for a partition that does not exist, refused.
func TestCommitRulesOfAProgressIdentity(t *testing.T) {
	s := NewState()
	_, ok := s.Committed("g", "t", 0)
	assert.False(t, ok, "never committed")
	c0 := Commit{Topic: "t", Partition: 0, Offset: 0, MemberEpoch: -1}
	require.NoError(t, s.CheckCommit("g", c0, 10, false))
	s.Apply(commitRec("g", c0))
	got, ok := s.Committed("g", "t", 0)
	assert.True(t, ok, "committed 0 is a commit")
	assert.Equal(t, int64(0), got.Offset)

	c7 := c0
	c7.Offset = 7
	require.NoError(t, s.CheckCommit("g", c7, 10, false))
	s.Apply(commitRec("g", c7))
	c5 := c0
	c5.Offset = 5
	assert.ErrorIs(t, s.CheckCommit("g", c5, 10, false), ErrOffsetRegression)
	assert.NoError(t, s.CheckCommit("g", c5, 10, true), "an explicit reset may move it back")
	assert.NoError(t, s.CheckCommit("g", c7, 10, false), "the same offset again is no regression")
	c11 := c0
	c11.Offset = 11
	assert.ErrorIs(t, s.CheckCommit("g", c11, 10, false), ErrInvalidOffset, "past the log end")
	neg := c0
	neg.Offset = -1
	assert.ErrorIs(t, s.CheckCommit("g", neg, 10, false), ErrInvalidOffset)
	assert.ErrorIs(t, s.CheckCommit("g", c0, -1, false), ErrInvalidOffset, "no such partition")
}

// A member's commit: refused from an unknown member, from a past epoch,
// and for a partition it does not own; a group with members refuses
// commits from outside it and resets.
func TestCommitsAreFencedByMembership(t *testing.T) {
	s := NewState()
	s.Apply(Record{Group: "g", Kind: KindMember, Member: &Member{MemberID: "m1", Topics: []string{"t"}, SessionTimeoutMs: 10000, MemberEpoch: 2}})
	s.Apply(Record{Group: "g", Kind: KindAssignment, Assignment: &Assignment{GroupEpoch: 2, Members: []MemberAssignment{{MemberID: "m1", Partitions: []TopicPartition{tp("t", 0)}}}}})
	s.Own("g", "m1", tp("t", 0))

	ok := Commit{Topic: "t", Partition: 0, Offset: 3, MemberID: "m1", MemberEpoch: 2}
	assert.NoError(t, s.CheckCommit("g", ok, 10, false))
	stale := ok
	stale.MemberEpoch = 1
	assert.ErrorIs(t, s.CheckCommit("g", stale, 10, false), ErrFencedMember)
	unknown := ok
	unknown.MemberID = "m9"
	assert.ErrorIs(t, s.CheckCommit("g", unknown, 10, false), ErrUnknownMember)
	other := ok
	other.Partition = 1
	assert.ErrorIs(t, s.CheckCommit("g", other, 10, false), ErrNotOwner)
	outside := ok
	outside.MemberID, outside.MemberEpoch = "", -1
	assert.ErrorIs(t, s.CheckCommit("g", outside, 10, false), ErrUnknownMember)
	assert.ErrorIs(t, s.CheckCommit("g", outside, 10, true), ErrGroupNotEmpty)

	// Released, then the member gone: its commits are refused, and a reset
	// is allowed again.
	s.Release("g", "m1", tp("t", 0))
	assert.ErrorIs(t, s.CheckCommit("g", ok, 10, false), ErrNotOwner)
	s.Apply(Record{Group: "g", Kind: KindMemberGone, Gone: &MemberGone{MemberID: "m1", Reason: "left"}})
	assert.ErrorIs(t, s.CheckCommit("g", ok, 10, false), ErrUnknownMember)
	assert.NoError(t, s.CheckCommit("g", outside, 10, true))
}

// A rebuild from the log gives the state the writes gave: the same
// offsets, members, epoch and target; a deleted group is gone.
func TestRebuildFromTheLogGivesTheSameState(t *testing.T) {
	live := NewState()
	var log []Record
	write := func(r Record) {
		k, v, err := r.Encode()
		require.NoError(t, err)
		got, err := Decode(k, v)
		require.NoError(t, err)
		log = append(log, got)
		live.Apply(r)
	}
	for _, r := range sampleRecords()[:6] {
		write(r)
	}
	write(commitRec("other", Commit{Topic: "t", Partition: 1, Offset: 9, MemberEpoch: -1}))
	write(Record{Group: "gone", Kind: KindMember, Member: &Member{MemberID: "x", SessionTimeoutMs: 1, MemberEpoch: 1}})
	write(Record{Group: "gone", Kind: KindGroupDeleted})

	rebuilt := NewState()
	for _, r := range log {
		rebuilt.Apply(r)
	}
	assert.Equal(t, live.Groups(), rebuilt.Groups())
	assert.Equal(t, []string{"billing", "other"}, rebuilt.Groups())
	for _, g := range live.Groups() {
		assert.Equal(t, live.Group(g), rebuilt.Group(g), g)
	}
}
