package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReadReservation(t *testing.T) {
	const batch = 4 << 20
	assert.Equal(t, pooledReadBuffer+batch, readReservation(1, batch), "a pooled buffer, and a first batch larger than what was asked")
	assert.Equal(t, pooledReadBuffer+batch, readReservation(pooledReadBuffer, batch))
	assert.Equal(t, 2<<20+batch, readReservation(2<<20, batch))
	assert.Equal(t, batch, readReservation(batch, batch), "no batch is larger than the read")
	assert.Equal(t, 8<<20, readReservation(8<<20, batch))
}
