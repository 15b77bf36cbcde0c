package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// Streams are spread: each new stream is led by the broker that leads the
// fewest, its followers the next brokers in id order; a topic of one
// partition would otherwise always be led by the lowest broker id.
func TestPlaceStreamSpreadsLeaders(t *testing.T) {
	m := &metadata.Cluster{}
	for _, id := range []int32{3, 1, 2} {
		m.Brokers = append(m.Brokers, metadata.Broker{ID: id})
	}
	add := func(name string, rf int, stream bool) *metadata.Topic {
		tp, err := m.AddTopic(name, 1, rf)
		require.NoError(t, err)
		if stream {
			tp.Stream = &metadata.Stream{Path: name}
			placeStream(m, tp)
		}
		return m.Topic(name)
	}
	// A plain topic does not count.
	add("orders", 3, false)
	want := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}}
	for i, w := range want {
		tp := add(fmt.Sprintf("__ds.s%d", i), 3, true)
		p := tp.Partitions[0]
		assert.Equal(t, w, p.Replicas, "stream %d", i)
		assert.Equal(t, w, p.Active, "stream %d", i)
		assert.Equal(t, w[0], p.Leader, "stream %d", i)
	}
	// Fewer replicas than brokers: consecutive brokers from the leader.
	tp := add("__ds.small", 2, true)
	assert.Equal(t, []int32{2, 3}, tp.Partitions[0].Replicas)
}
