package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A topic that grew is shared out again at the next heartbeat: the
// coordinator reads the partition count at every heartbeat, so a lone
// member gets the new partitions at once, and with two members the new
// ones go to the member range gives them, the moved one only once its
// owner released it.
func TestCoordinatorAssignsThePartitionsATopicGrewBy(t *testing.T) {
	topics := fakeTopics{"t": 2}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	n := 0
	c := NewCoordinator(CoordinatorConfig{Log: &memLog{}, Topics: topics, Now: clock.now,
		NewMemberID: func() string { n++; return fmt.Sprintf("m%d", n) }})
	c.Start(0)

	a := join(t, c, "")
	require.Equal(t, []int32{0, 1}, parts(a.Assigned))
	topics["t"] = 4
	a, err := beat(c, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2, 3}, parts(a.Assigned), "the next heartbeat hands out the new partitions")

	// A second member: range gives it 2 and 3, once a let them go.
	b := join(t, c, "")
	a, err = beat(c, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1}, parts(a.Assigned))
	_, err = beat(c, a, a.Assigned)
	require.NoError(t, err)
	b, err = beat(c, b, nil)
	require.NoError(t, err)
	assert.Equal(t, []int32{2, 3}, parts(b.Assigned))

	// The topic grows again, to 6: range moves 2 from b to a, and gives
	// the new 4 and 5 to b at once.
	topics["t"] = 6
	b, err = beat(c, b, b.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 4, 5}, parts(b.Assigned))
	a, err = beat(c, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1}, parts(a.Assigned), "2 is still b's")
	_, err = beat(c, b, b.Assigned)
	require.NoError(t, err)
	a, err = beat(c, a, a.Assigned)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, parts(a.Assigned))
}
