package listeners_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/listeners"
	"gostream/metadata"
)

func TestParse(t *testing.T) {
	ls, err := listeners.Parse("internal://0.0.0.0:9092, external://0.0.0.0:19092", "internal://node1:9092,external://localhost:19092")
	require.NoError(t, err)
	assert.Equal(t, []listeners.Listener{{"internal", "0.0.0.0:9092", "node1:9092"}, {"external", "0.0.0.0:19092", "localhost:19092"}}, ls)
	assert.Equal(t, "external://localhost:19092,internal://node1:9092", metadata.FormatEndpoints(listeners.Advertised(ls)))

	ls, err = listeners.Parse("127.0.0.1:9092", "")
	require.NoError(t, err)
	assert.Equal(t, []listeners.Listener{{listeners.DefaultName, "127.0.0.1:9092", "127.0.0.1:9092"}}, ls, "a specific address is its own advertised one")

	ls, err = listeners.Parse("", "")
	require.NoError(t, err)
	assert.Empty(t, ls)
	assert.Nil(t, listeners.Advertised(ls))

	for _, c := range []struct {
		listen, advertise string
		which             listeners.Which
		why               string
	}{
		{"0.0.0.0:9092", "", listeners.InAdvertise, "binds every interface"},
		{":9092", "", listeners.InAdvertise, "binds every interface"},
		{"a://127.0.0.1:9092", "a://0.0.0.0:9092", listeners.InAdvertise, "clients cannot dial it"},
		{"a://127.0.0.1:9092", "a://[::]:9092", listeners.InAdvertise, "clients cannot dial it"},
		{"a://127.0.0.1:9092", "a://:9092", listeners.InAdvertise, "clients cannot dial it"},
		{"a://127.0.0.1:9092", "b://host:9092", listeners.InAdvertise, "advertises b, which has no listener"},
		{"a://127.0.0.1:9092", "a://host", listeners.InAdvertise, "want HOST:PORT"},
		{"a://127.0.0.1:9092,a://127.0.0.1:9093", "", listeners.InListen, "listener a given twice"},
		{"A://127.0.0.1:9092", "", listeners.InListen, "listener name"},
		{"a://127.0.0.1:9092,b://127.0.0.2:9092", "", listeners.InListen, "share port 9092"},
		{"a://127.0.0.1", "", listeners.InListen, "want HOST:PORT"},
		{"a://127.0.0.1:99999", "", listeners.InListen, "PORT a number"},
	} {
		_, err := listeners.Parse(c.listen, c.advertise)
		var le *listeners.Error
		require.ErrorAs(t, err, &le, "%s / %s", c.listen, c.advertise)
		assert.Equal(t, c.which, le.Which, "%s / %s", c.listen, c.advertise)
		assert.Contains(t, le.Reason, c.why, "%s / %s", c.listen, c.advertise)
	}
}
