package metadata

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStreamTopic(t *testing.T) {
	a, err := StreamTopic("chat/room-1")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(a, StreamTopicPrefix))
	assert.Len(t, a, len(StreamTopicPrefix)+32)
	require.NoError(t, ValidateTopicName(a))
	b, err := StreamTopic("chat/room-2")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	again, _ := StreamTopic("chat/room-1")
	assert.Equal(t, a, again, "the same path, the same topic")
	long, err := StreamTopic(strings.Repeat("x/", 1000) + "y")
	require.NoError(t, err)
	assert.Len(t, long, len(a))
	for _, bad := range []string{"", "a/../b", "..", "./a", "a//b", "a/", "/a", "a\x00b", string([]byte{0xff, 0xfe}), strings.Repeat("x", MaxStreamPathBytes+1)} {
		_, err := StreamTopic(bad)
		assert.ErrorIs(t, err, ErrInvalidStreamPath, "%q", bad)
	}
	// Characters a URL path may carry are a stream's own.
	for _, ok := range []string{"a b", "ünïcode/ストリーム", "a%2Fb", "a:b@c", "..."} {
		_, err := StreamTopic(ok)
		assert.NoError(t, err, ok)
	}
}

// FuzzStreamTopic: every path is refused or gets a valid topic name of the
// fixed shape, the same one each time.
func FuzzStreamTopic(f *testing.F) {
	for _, s := range []string{"chat/room-1", "a/../b", "x", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		name, err := StreamTopic(path)
		if err != nil {
			return
		}
		if err := ValidateTopicName(name); err != nil || len(name) != len(StreamTopicPrefix)+32 || !strings.HasPrefix(name, StreamTopicPrefix) {
			t.Fatalf("path %q gave topic %q (%v)", path, name, err)
		}
		if again, _ := StreamTopic(path); again != name {
			t.Fatalf("path %q gave %q then %q", path, name, again)
		}
	})
}
