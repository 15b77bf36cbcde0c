package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
)

func TestReadReservation(t *testing.T) {
	const batch = 4 << 20
	assert.Equal(t, pooledReadBuffer+batch, readReservation(1, batch), "a pooled buffer, and a first batch larger than what was asked")
	assert.Equal(t, pooledReadBuffer+batch, readReservation(pooledReadBuffer, batch))
	assert.Equal(t, 2<<20+batch, readReservation(2<<20, batch))
	assert.Equal(t, batch, readReservation(batch, batch), "no batch is larger than the read")
	assert.Equal(t, 8<<20, readReservation(8<<20, batch))
}

// A fetch counts the records it returns from the offset asked: those of
// its first batch before it go back to the fetcher but are not for it.
func TestFetchedRecords(t *testing.T) {
	batch := func(base int64, n int) []byte {
		b, err := record.AppendBatch(nil, make([]record.Record, n))
		require.NoError(t, err)
		record.Batch(b).Stamp(base, 1, 0)
		return b
	}
	buf := append(batch(10, 3), batch(13, 2)...)
	assert.Equal(t, int64(5), fetchedRecords(buf, 10))
	assert.Equal(t, int64(4), fetchedRecords(buf, 11))
	assert.Equal(t, int64(0), fetchedRecords(nil, 0))
	assert.Equal(t, int64(3), fetchedRecords(append(batch(10, 3), 0, 0, 0), 0), "bytes that do not frame end the count")
}
