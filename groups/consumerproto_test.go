package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The subscriptions and assignments clients write (encoded here by
// franz-go's kmsg, at every version) read back; other bytes are refused.
func TestConsumerProtocol(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		s := kmsg.NewConsumerMemberMetadata()
		s.Version, s.Topics, s.UserData = v, []string{"b", "a"}, []byte("x")
		s.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "a", Partitions: []int32{1}}}
		topics, err := ConsumerSubscription(s.AppendTo(nil))
		require.NoError(t, err, "version %d", v)
		assert.Equal(t, []string{"a", "b"}, topics)

		a := kmsg.NewConsumerMemberAssignment()
		a.Version = v
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{0, 2}}, {Topic: "b", Partitions: []int32{5}}}
		tps, err := ConsumerAssignment(a.AppendTo(nil))
		require.NoError(t, err)
		assert.Equal(t, []TopicPartition{{"a", 0}, {"a", 2}, {"b", 5}}, tps)
	}
	tps, err := ConsumerAssignment(nil)
	require.NoError(t, err)
	assert.Empty(t, tps)
	for _, bad := range [][]byte{{0}, {0, 0, 0, 0, 0, 9}, {0xff, 0xff}, {0, 0, 0x7f, 0, 0, 0}} {
		_, err := ConsumerSubscription(bad)
		assert.Error(t, err, "%x", bad)
		_, err = ConsumerAssignment(bad)
		assert.Error(t, err, "%x", bad)
	}
}

// Any bytes are read or refused; nothing panics or allocates past them.
func FuzzConsumerProtocol(f *testing.F) {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{0, 2}}}
	f.Add(a.AppendTo(nil))
	s := kmsg.NewConsumerMemberMetadata()
	s.Version, s.Topics = 3, []string{"t"}
	f.Add(s.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		ConsumerSubscription(b)
		ConsumerAssignment(b)
	})
}
