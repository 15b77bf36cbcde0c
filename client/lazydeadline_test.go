package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLazyDeadline(t *testing.T) {
	// Nothing waited: no timer was made, and the deadline still holds.
	l := newLazyDeadline(time.Now().Add(50 * time.Millisecond))
	assert.NoError(t, l.Err())
	d, ok := l.Deadline()
	assert.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(50*time.Millisecond), d, 50*time.Millisecond)
	assert.False(t, l.started.Load(), "Err and Deadline make no timer")
	require.Eventually(t, func() bool { return l.Err() != nil }, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, l.Err(), context.DeadlineExceeded)
	select {
	case <-l.Done(): // asked for after the deadline: closed already
	case <-time.After(5 * time.Second):
		t.Fatal("Done is not closed after the deadline")
	}
	l.stop()

	// Waited on: Done closes at the deadline, and a context derived from
	// it ends with it.
	l = newLazyDeadline(time.Now().Add(50 * time.Millisecond))
	child, cancel := context.WithCancel(l)
	defer cancel()
	start := time.Now()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a derived context did not end at the deadline")
	}
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	assert.ErrorIs(t, l.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, child.Err(), context.DeadlineExceeded)
	l.stop()

	// Stopped before its deadline, once started: Canceled.
	l = newLazyDeadline(time.Now().Add(time.Hour))
	done := l.Done()
	l.stop()
	<-done
	assert.ErrorIs(t, l.Err(), context.Canceled)
}
