package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// A broker's rack is registered with it, and a registration with another
// rack, or none, changes it.
func TestRegisterRack(t *testing.T) {
	c := openWith(t, &fakeBrokers{})
	ctx := context.Background()
	register := func(rack string) (*metadata.Cluster, error) {
		return c.Register(ctx, &transport.RegisterBrokerRequest{ID: 2, Addr: "broker-2", RootID: rootOf(2), Rack: rack})
	}
	for _, rack := range []string{"rack-a", "rack-b", ""} {
		meta, err := register(rack)
		require.NoError(t, err)
		b, _ := meta.Broker(2)
		assert.Equal(t, rack, b.Rack)
	}
	epoch := c.Metadata().Epoch
	_, err := register("")
	require.NoError(t, err)
	assert.Equal(t, epoch, c.Metadata().Epoch, "the same registration changes nothing")

	_, err = register("a rack")
	require.ErrorIs(t, err, ErrInvalidRequest)
	b, _ := c.Metadata().Broker(2)
	assert.Empty(t, b.Rack)
}
