package testcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The controller group's checker finds two active controllers in one
// term, an active controller whose metadata is older than the one before
// it, and a broker whose metadata went back; a healthy history of a
// takeover passes.
func TestCheckControllerSamples(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	healthy := []ControllerSample{
		{At: at(0), Node: 1, State: "Leader", Active: true, Term: 2, GroupEpoch: 10, BrokerEpoch: 10},
		{At: at(1), Node: 2, State: "Follower", Term: 2, GroupEpoch: 10, BrokerEpoch: 10},
		// 1 killed; 2 takes over in term 3, one change later.
		{At: at(500), Node: 2, State: "Leader", Active: false, Term: 3, GroupEpoch: 10, BrokerEpoch: 10},
		{At: at(700), Node: 2, State: "Leader", Active: true, Term: 3, GroupEpoch: 11, BrokerEpoch: 11},
		// 1 back: its broker kept epoch 10 and catches up.
		{At: at(900), Node: 1, State: "Follower", Term: 3, GroupEpoch: 8, BrokerEpoch: 10},
		{At: at(1100), Node: 1, State: "Follower", Term: 3, GroupEpoch: 11, BrokerEpoch: 11},
	}
	assert.Empty(t, CheckControllerSamples(healthy))

	two := append(append([]ControllerSample(nil), healthy...),
		ControllerSample{At: at(1200), Node: 1, State: "Leader", Active: true, Term: 3, GroupEpoch: 11, BrokerEpoch: 11})
	v := CheckControllerSamples(two)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "two active controllers in Raft term 3: candidates 2 and 1")

	back := append(append([]ControllerSample(nil), healthy...),
		ControllerSample{At: at(1300), Node: 3, State: "Leader", Active: true, Term: 4, GroupEpoch: 9, BrokerEpoch: 11})
	v = CheckControllerSamples(back)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "the active controller's metadata went back: candidate 3 at epoch 9")

	broker := append(append([]ControllerSample(nil), healthy...),
		ControllerSample{At: at(1400), Node: 2, State: "Leader", Active: true, Term: 3, GroupEpoch: 11, BrokerEpoch: 7})
	v = CheckControllerSamples(broker)
	require.Len(t, v, 1)
	assert.Contains(t, v[0], "node 2's metadata went back: epoch 7")
}
