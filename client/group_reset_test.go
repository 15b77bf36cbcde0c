package client

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShiftedSaturates(t *testing.T) {
	tests := []struct {
		offset, n, want int64
	}{
		{4, 3, 7},
		{4, -3, 1},
		{4, -9, -5},
		{4, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{-4, math.MinInt64, math.MinInt64},
		{math.MinInt64, -1, math.MinInt64},
		{4, math.MinInt64, 4 + math.MinInt64},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, shifted(tt.offset, tt.n), "%d shifted by %d", tt.offset, tt.n)
	}
}

func TestResetMovesLeavesOutWhatThePlanLeavesOut(t *testing.T) {
	plan := []OffsetReset{
		{Topic: "t", Partition: 0, Committed: 5, New: 3},
		{Topic: "t", Partition: 1, Committed: Never, New: Never, Note: "never committed: nothing to shift"},
		{Topic: "t", Partition: 2, Committed: Never, New: 0},
	}
	assert.Equal(t, []CommitOffset{{Topic: "t", Partition: 0, Offset: 3}, {Topic: "t", Partition: 2, Offset: 0}}, ResetMoves(plan))
}
