package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// A group member started paused joins and is assigned its partitions,
// and gives up those that move as it polls, but reads nothing until it
// is resumed; Pause stops it again without it leaving the group.
func TestGroupConsumerPauseResume(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "pz", 4, 3)
	produceValues(t, c, "pz", "v", 400)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	members := make([]*client.GroupConsumer, 2)
	for i := range members {
		gc, err := client.NewGroupConsumer(newClient(t, c), client.GroupConfig{Group: "pg", Topics: []string{"pz"}, SessionTimeout: 3 * time.Second, Paused: true})
		require.NoError(t, err)
		defer gc.Close(context.Background())
		members[i] = gc
	}
	read := make([]int, len(members))
	poll := func() {
		for i, gc := range members {
			got, err := gc.Poll(ctx, 50*time.Millisecond)
			require.NoError(t, err)
			for _, pr := range got {
				read[i] += len(pr.Records)
			}
		}
	}
	// Paused, they settle into two partitions each and read nothing.
	require.Eventually(t, func() bool {
		poll()
		return len(members[0].Assignment()) == 2 && len(members[1].Assignment()) == 2
	}, 30*time.Second, 10*time.Millisecond, "two partitions each")
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		poll()
	}
	assert.Equal(t, []int{0, 0}, read, "nothing read while paused")

	// Resumed, each reads its own partitions: all 400 records.
	for _, gc := range members {
		gc.Resume()
	}
	require.Eventually(t, func() bool {
		poll()
		return read[0]+read[1] == 400
	}, 30*time.Second, 10*time.Millisecond, "every record read once resumed: %v", read)
	assert.Positive(t, read[0])
	assert.Positive(t, read[1])

	// Paused again, the new records are not read; resumed, they are.
	members[0].Pause()
	members[1].Pause()
	before := read[0] + read[1]
	produceValues(t, c, "pz", "w", 100)
	deadline = time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		poll()
	}
	assert.Equal(t, before, read[0]+read[1], "nothing new read while paused")
	members[0].Resume()
	members[1].Resume()
	require.Eventually(t, func() bool {
		poll()
		return read[0]+read[1] == 500
	}, 30*time.Second, 10*time.Millisecond, "the new records once resumed: %v", read)
	assert.Len(t, describeGroup(t, cl, "pg").Members, 2, "both stayed in the group")
}
