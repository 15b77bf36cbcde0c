package metadata_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// racked is a broker per rack name given (racks[i] is broker i+1's).
func racked(racks ...string) []metadata.PlacementBroker {
	out := make([]metadata.PlacementBroker, len(racks))
	for i, r := range racks {
		out[i] = metadata.PlacementBroker{ID: int32(i + 1), Rack: r}
	}
	return out
}

func counts(placement [][]int32) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, list := range placement {
		for r, id := range list {
			replicas[id]++
			if r == 0 {
				leaders[id]++
			}
		}
	}
	return replicas, leaders
}

// racksOf counts a list's replicas per rack; a broker in no rack is a
// rack of its own.
func racksOf(list []int32, brokers []metadata.PlacementBroker) map[string]int {
	out := map[string]int{}
	for _, id := range list {
		for _, b := range brokers {
			if b.ID == id {
				out[rackName(b)]++
			}
		}
	}
	return out
}

func rackName(b metadata.PlacementBroker) string {
	if b.Rack == "" {
		return fmt.Sprint("broker-", b.ID)
	}
	return b.Rack
}

// Replicas of a partition go to distinct racks first, as many as there
// are, then to distinct brokers, and every broker gets its share.
func TestPlaceOverSpreadsRacks(t *testing.T) {
	tests := []struct {
		name       string
		racks      []string
		partitions int
		rf         int
		// most and least are how many of a partition's replicas each rack
		// holds (least 0: not every rack need hold one).
		most, least int
		replicas    []int // what each broker holds, at least and at most
	}{
		{"three racks of two, rf 3", []string{"a", "a", "b", "b", "c", "c"}, 12, 3, 1, 1, []int{6, 6}},
		{"racks of unequal size, rf 2", []string{"a", "a", "a", "a", "b", "b", "c", "c"}, 16, 2, 1, 0, []int{4, 4}},
		{"one broker of its own rack, rf 2", []string{"a", "a", "a", "b"}, 12, 2, 1, 1, []int{4, 12}}, // b in every partition, a brokers 4 each
		{"some brokers in no rack, rf 3", []string{"a", "a", "b", "", "", ""}, 12, 3, 1, 0, []int{5, 7}},
		{"two racks, rf 3", []string{"a", "b", "a", "b"}, 8, 3, 2, 1, []int{6, 6}},
		{"two racks, rf 4", []string{"a", "a", "a", "b", "b", "b"}, 6, 4, 2, 2, []int{4, 4}},
		{"ids in rack order", []string{"a", "a", "a", "b", "b", "b"}, 6, 2, 1, 1, []int{2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brokers := racked(tt.racks...)
			allRacks := map[string]bool{}
			for _, b := range brokers {
				allRacks[rackName(b)] = true
			}
			got, err := metadata.PlaceOver(brokers, tt.partitions, tt.rf)
			require.NoError(t, err)
			require.Len(t, got, tt.partitions)
			for p, list := range got {
				require.Len(t, list, tt.rf)
				for i, id := range list {
					require.NotContains(t, list[:i], id, "partition %d lists broker %d twice", p, id)
				}
				perRack := racksOf(list, brokers)
				for rack, n := range perRack {
					assert.LessOrEqual(t, n, tt.most, "partition %d %v: %d replicas in rack %s", p, list, n, rack)
				}
				if tt.least > 0 {
					assert.Len(t, perRack, len(allRacks), "partition %d %v does not cover every rack", p, list)
					for rack, n := range perRack {
						assert.GreaterOrEqual(t, n, tt.least, "partition %d %v: %d replicas in rack %s", p, list, n, rack)
					}
				}
			}
			replicas, leaders := counts(got)
			for _, b := range brokers {
				assert.GreaterOrEqual(t, replicas[b.ID], tt.replicas[0], "broker %d", b.ID)
				assert.LessOrEqual(t, replicas[b.ID], tt.replicas[1], "broker %d", b.ID)
				assert.InDelta(t, float64(tt.partitions)/float64(len(brokers)), leaders[b.ID], 1, "broker %d leads %d", b.ID, leaders[b.ID])
			}
			again, err := metadata.PlaceOver(brokers, tt.partitions, tt.rf)
			require.NoError(t, err)
			assert.Equal(t, got, again, "not deterministic")
			shuffled := slices.Clone(brokers)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again, err = metadata.PlaceOver(shuffled, tt.partitions, tt.rf)
			require.NoError(t, err)
			assert.Equal(t, got, again, "the brokers' order changed the placement")
		})
	}
}

// Many topics of one partition take turns leading, over the whole
// cluster: before, each was led by the lowest broker id.
func TestAddTopicSpreadsLeadersOverTheCluster(t *testing.T) {
	c := brokersCluster(1, 2, 3)
	for i := range 6 {
		_, err := c.AddTopic(fmt.Sprintf("t%d", i), 1, 1+i%3)
		require.NoError(t, err)
	}
	_, err := c.AddTopic("four", 4, 2)
	require.NoError(t, err)
	leaders := map[int32]int{}
	for _, tp := range c.Topics {
		for _, p := range tp.Partitions {
			leaders[p.Replicas[0]]++
			assert.Equal(t, p.Replicas[0], p.Leader)
		}
	}
	assert.Equal(t, map[int32]int{1: 4, 2: 3, 3: 3}, leaders)
	require.NoError(t, c.Validate())
}

// A broker added later holds nothing: a new topic's followers go to it
// first, and the leftover partition's leadership too.
func TestAddTopicWeighsWhatBrokersHold(t *testing.T) {
	c := brokersCluster(1, 2, 3)
	_, err := c.AddTopic("old", 6, 2)
	require.NoError(t, err)
	c.PutBroker(metadata.Broker{ID: 4, Addr: "host:1"})
	tp, err := c.AddTopic("new", 5, 2)
	require.NoError(t, err)
	var leaders []int32
	held := 0
	for _, p := range tp.Partitions {
		leaders = append(leaders, p.Replicas[0])
		if slices.Contains(p.Replicas, 4) {
			held++
		}
	}
	assert.Equal(t, []int32{4, 1, 2, 3, 4}, leaders, "the leftover partition goes to the broker that leads nothing")
	assert.Equal(t, 5, held, "broker 4 holds a replica of every new partition")
}

func TestPlacementBrokers(t *testing.T) {
	c := validCluster()
	c.Brokers[1].Rack = "r2"
	p := &c.Topics[0].Partitions[0] // 1,2
	p.Move = &metadata.Move{Target: []int32{3, 2}, From: []int32{1, 2}, Throttle: 1}
	p.Replicas = metadata.MoveReplicas(p.Move.From, p.Move.Target)
	require.NoError(t, c.Validate())
	got := c.PlacementBrokers([]int32{1, 2, 3, 9})
	// alpha: {3,2} (moving, its target), {2,3}, {3,1}; beta: {2,3,1}.
	assert.Equal(t, []metadata.PlacementBroker{
		{ID: 1, Leaders: 0, Replicas: 2},
		{ID: 2, Rack: "r2", Leaders: 2, Replicas: 3},
		{ID: 3, Leaders: 2, Replicas: 4},
		{ID: 9},
	}, got)
}

func TestPlaceOverRefusesABrokerTwice(t *testing.T) {
	_, err := metadata.PlaceOver([]metadata.PlacementBroker{{ID: 1}, {ID: 2}, {ID: 1}}, 1, 1)
	require.ErrorIs(t, err, metadata.ErrInvalid)
}

func TestValidateRack(t *testing.T) {
	for _, ok := range []string{"a", "rack-1", "us-east-1a", "eu/west:2", strings.Repeat("r", metadata.MaxRackLen)} {
		assert.NoError(t, metadata.ValidateRack(ok), ok)
	}
	for _, bad := range []string{"", "a b", "rack,2", "é", strings.Repeat("r", metadata.MaxRackLen+1)} {
		assert.ErrorIs(t, metadata.ValidateRack(bad), metadata.ErrInvalid, bad)
	}
}
