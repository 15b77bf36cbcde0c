package node

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGroupFirstErrorCancelsTheOthers(t *testing.T) {
	g := newGroup(context.Background())
	boom := errors.New("boom")
	g.run(func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("second, after cancel")
	})
	g.run(func(context.Context) error { return boom })
	assert.Equal(t, boom, g.wait())
}

func TestGroupParentCancelStopsAll(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := newGroup(ctx)
	for range 3 {
		g.run(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
	}
	cancel()
	assert.NoError(t, g.wait())
}
