package metadata_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// A topic Place laid out grows as if it had been created with the new
// count: the rotation of leaders goes on where it stopped.
func TestPlaceNewPartitionsContinuesPlace(t *testing.T) {
	for _, brokers := range [][]int32{{1}, {1, 2, 3}, {3, 1, 2}, {2, 4, 6, 8, 10}} {
		for rf := 1; rf <= min(3, len(brokers)); rf++ {
			for from := 1; from <= 7; from++ {
				existing, err := metadata.Place(brokers, from, rf)
				require.NoError(t, err)
				for count := from + 1; count <= 13; count++ {
					name := fmt.Sprintf("brokers %v rf %d: %d to %d", brokers, rf, from, count)
					got, err := metadata.PlaceNewPartitions(brokers, existing, count, rf)
					require.NoError(t, err, name)
					whole, err := metadata.Place(brokers, count, rf)
					require.NoError(t, err, name)
					assert.Equal(t, whole[from:], got, name)
				}
			}
		}
	}
}

// The new partitions' leaders go first to the brokers that lead the
// fewest of the topic's partitions: one that was away when the topic was
// made, or joined since, gets its share, and the rotation goes on from
// the last partition's leader among the brokers with as few.
func TestPlaceNewPartitionsSpreadsLeaders(t *testing.T) {
	tests := []struct {
		name     string
		brokers  []int32
		existing [][]int32
		count    int
		rf       int
		want     [][]int32
	}{
		{"broker 2 was away", []int32{1, 2, 3}, [][]int32{{1, 3}, {3, 1}}, 5, 2,
			[][]int32{{2, 3}, {3, 1}, {1, 2}}},
		{"broker 4 joined", []int32{1, 2, 3, 4}, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, 6, 3,
			[][]int32{{4, 1, 2}, {1, 2, 3}, {2, 3, 4}}},
		{"broker 3 is away now", []int32{1, 2}, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, 7, 2,
			[][]int32{{1, 2}, {2, 1}, {1, 2}, {2, 1}}},
		{"replicas moved off the rotation", []int32{1, 2, 3}, [][]int32{{2, 1}, {2, 3}, {2, 1}}, 6, 1,
			[][]int32{{3}, {1}, {3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metadata.PlaceNewPartitions(tc.brokers, tc.existing, tc.count, tc.rf)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPlaceNewPartitionsErrors(t *testing.T) {
	existing := [][]int32{{1, 2}, {2, 1}}
	tests := []struct {
		name    string
		brokers []int32
		count   int
		rf      int
		want    error
	}{
		{"the same count", []int32{1, 2}, 2, 2, metadata.ErrInvalid},
		{"fewer", []int32{1, 2}, 1, 2, metadata.ErrInvalid},
		{"past the limit", []int32{1, 2}, metadata.MaxPartitions + 1, 2, metadata.ErrInvalid},
		{"replication factor 0", []int32{1, 2}, 3, 0, metadata.ErrInvalid},
		{"too few brokers", []int32{1}, 3, 2, metadata.ErrNotEnoughBrokers},
		{"too few distinct brokers", []int32{1, 1}, 3, 2, metadata.ErrNotEnoughBrokers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := metadata.PlaceNewPartitions(tc.brokers, existing, tc.count, tc.rf)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// Replica lists given for new partitions: one per new partition, of the
// topic's replication factor, distinct registered brokers; a wrong one
// is named by its partition.
func TestCheckAssignments(t *testing.T) {
	c := brokersCluster(1, 2, 3)
	require.NoError(t, c.CheckAssignments([][]int32{{3, 1}, {2, 3}}, 4, 6, 2))
	tests := []struct {
		name  string
		lists [][]int32
		want  string
	}{
		{"too few lists", [][]int32{{3, 1}}, "adds 2, and 1 replica lists were given"},
		{"too many lists", [][]int32{{3, 1}, {2, 3}, {1, 2}}, "adds 2, and 3 replica lists were given"},
		{"a short list", [][]int32{{3, 1}, {2}}, "partition 5 is given 1 replicas [2]"},
		{"a broker twice", [][]int32{{3, 3}, {2, 1}}, "partition 4 lists broker 3 twice"},
		{"an unregistered broker", [][]int32{{3, 1}, {2, 7}}, "partition 5 names broker 7, which is not registered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.CheckAssignments(tc.lists, 4, 6, 2)
			require.ErrorIs(t, err, metadata.ErrInvalidAssignment)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// AddPartitions appends partitions as AddTopic makes them: led by their
// first replica at epoch 0, every replica active; the metadata stays
// valid, and lists it refuses change nothing.
func TestAddPartitions(t *testing.T) {
	c := validCluster()
	require.NoError(t, c.AddPartitions("alpha", [][]int32{{2, 3}, {3, 1}}))
	a := c.Topic("alpha")
	require.Len(t, a.Partitions, 5)
	assert.Equal(t, metadata.Partition{Replicas: []int32{2, 3}, Active: []int32{2, 3}, Leader: 2}, a.Partitions[3])
	assert.Equal(t, metadata.Partition{Replicas: []int32{3, 1}, Active: []int32{3, 1}, Leader: 3}, a.Partitions[4])
	require.NoError(t, c.Validate())

	before := c.Clone()
	assert.ErrorIs(t, c.AddPartitions("alpha", [][]int32{{2}}), metadata.ErrInvalidAssignment)
	assert.ErrorIs(t, c.AddPartitions("alpha", [][]int32{{2, 9}}), metadata.ErrInvalidAssignment)
	assert.ErrorIs(t, c.AddPartitions("gamma", [][]int32{{2, 3}}), metadata.ErrUnknownTopic)
	assert.Equal(t, before, c)
}
