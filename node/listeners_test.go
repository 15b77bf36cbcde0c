package node

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("KafkaListen", "internal://0.0.0.0:9092, external://0.0.0.0:19092",
		"KafkaAdvertise", "internal://node1:9092,external://localhost:19092")
	require.NoError(t, err)
	assert.Equal(t, []Listener{{"internal", "0.0.0.0:9092", "node1:9092"}, {"external", "0.0.0.0:19092", "localhost:19092"}}, ls)
	assert.Equal(t, "external://localhost:19092,internal://node1:9092", metadataEndpoints(ls))

	ls, err = ParseListeners("KafkaListen", "127.0.0.1:9092", "KafkaAdvertise", "")
	require.NoError(t, err)
	assert.Equal(t, []Listener{{DefaultListenerName, "127.0.0.1:9092", "127.0.0.1:9092"}}, ls, "a specific address is its own advertised one")

	ls, err = ParseListeners("KafkaListen", "", "KafkaAdvertise", "")
	require.NoError(t, err)
	assert.Empty(t, ls)

	for _, c := range []struct{ listen, advertise, field, why string }{
		{"0.0.0.0:9092", "", "KafkaAdvertise", "binds every interface"},
		{":9092", "", "KafkaAdvertise", "binds every interface"},
		{"a://127.0.0.1:9092", "a://0.0.0.0:9092", "KafkaAdvertise", "clients cannot dial it"},
		{"a://127.0.0.1:9092", "a://[::]:9092", "KafkaAdvertise", "clients cannot dial it"},
		{"a://127.0.0.1:9092", "a://:9092", "KafkaAdvertise", "clients cannot dial it"},
		{"a://127.0.0.1:9092", "b://host:9092", "KafkaAdvertise", "advertises b, which has no listener"},
		{"a://127.0.0.1:9092,a://127.0.0.1:9093", "", "KafkaListen", "listener a given twice"},
		{"A://127.0.0.1:9092", "", "KafkaListen", "listener name"},
		{"a://127.0.0.1:9092,b://127.0.0.2:9092", "", "KafkaListen", "share port 9092"},
		{"a://127.0.0.1", "", "KafkaListen", "want HOST:PORT"},
	} {
		_, err := ParseListeners("KafkaListen", c.listen, "KafkaAdvertise", c.advertise)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%s / %s", c.listen, c.advertise)
		assert.Equal(t, c.field, fe.Field, "%s / %s", c.listen, c.advertise)
		assert.Contains(t, fe.Reason, c.why, "%s / %s", c.listen, c.advertise)
	}
}

func metadataEndpoints(ls []Listener) string {
	return metadata.FormatEndpoints(advertised(ls))
}
