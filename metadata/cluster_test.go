package metadata_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// validCluster returns a fresh, valid cluster built by hand (not by
// AddTopic), so that Validate is tested against the model, not against the
// code that builds it. Every call returns an equal, unshared value.
func validCluster() *metadata.Cluster {
	return &metadata.Cluster{
		Version:      metadata.FormatVersion,
		ClusterID:    "c0ffee",
		Epoch:        7,
		ControllerID: 1,
		Brokers: []metadata.Broker{
			{ID: 1, Addr: "10.0.0.1:9000", HTTP: "10.0.0.1:8080", Gossip: "10.0.0.1:7946"},
			{ID: 2, Addr: "10.0.0.2:9000"},
			{ID: 3, Addr: "10.0.0.3:9000"},
		},
		Topics: []metadata.Topic{
			{Name: "alpha", ReplicationFactor: 2, Partitions: []metadata.Partition{
				{Replicas: []int32{1, 2}, Active: []int32{1, 2}, Leader: 1, LeaderEpoch: 0},
				{Replicas: []int32{2, 3}, Active: []int32{3}, Leader: 3, LeaderEpoch: 4},
				{Replicas: []int32{3, 1}, Active: []int32{1, 3}, Leader: 1, LeaderEpoch: 2},
			}},
			{Name: "beta", ReplicationFactor: 3, Sealed: true, Partitions: []metadata.Partition{
				{Replicas: []int32{2, 3, 1}, Active: []int32{2, 3, 1}, Leader: 2, LeaderEpoch: 0},
			}},
		},
	}
}

func brokersCluster(ids ...int32) *metadata.Cluster {
	c := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "c", ControllerID: 1}
	for _, id := range ids {
		c.PutBroker(metadata.Broker{ID: id, Addr: "host:1"})
	}
	return c
}

func TestPlaceRoundRobin(t *testing.T) {
	tests := []struct {
		name       string
		brokers    []int32
		partitions int
		rf         int
		want       [][]int32
	}{
		{"one broker", []int32{5}, 3, 1, [][]int32{{5}, {5}, {5}}},
		{"rf 1 spreads leaders", []int32{1, 2, 3}, 4, 1, [][]int32{{1}, {2}, {3}, {1}}},
		{"rf 2 followers are the next brokers", []int32{1, 2, 3}, 4, 2,
			[][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}}},
		{"rf equal to broker count", []int32{1, 2, 3}, 3, 3,
			[][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}},
		{"sparse ids", []int32{10, 20, 40, 80}, 5, 3,
			[][]int32{{10, 20, 40}, {20, 40, 80}, {40, 80, 10}, {80, 10, 20}, {10, 20, 40}}},
		{"unsorted input", []int32{3, 1, 2}, 4, 2,
			[][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}}},
		{"reverse sorted sparse input", []int32{80, 40, 20, 10}, 5, 3,
			[][]int32{{10, 20, 40}, {20, 40, 80}, {40, 80, 10}, {80, 10, 20}, {10, 20, 40}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.brokers)
			got, err := metadata.Place(in, tt.partitions, tt.rf)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.brokers, in, "Place must not reorder its input")

			again, err := metadata.Place(slices.Clone(tt.brokers), tt.partitions, tt.rf)
			require.NoError(t, err)
			assert.Equal(t, got, again, "Place is not deterministic")
		})
	}
}

// TestPlaceRule checks the placement rule itself over many shapes, and that
// every permutation of the broker ids gives the same placement.
func TestPlaceRule(t *testing.T) {
	sorted := []int32{3, 7, 11, 12, 40, 41}
	perms := [][]int32{
		sorted,
		{41, 40, 12, 11, 7, 3},
		{12, 3, 41, 7, 40, 11},
	}
	for n := 1; n <= len(sorted); n++ {
		for rf := 1; rf <= n; rf++ {
			for _, partitions := range []int{1, n - 1, n, 2*n + 1, 50} {
				if partitions < 1 {
					continue
				}
				want, err := metadata.Place(sorted[:n], partitions, rf)
				require.NoError(t, err)
				require.Len(t, want, partitions)
				for p, replicas := range want {
					require.Len(t, replicas, rf)
					for r, id := range replicas {
						require.Equal(t, sorted[(p+r)%n], id, "n=%d rf=%d partition %d replica %d", n, rf, p, r)
					}
				}
				for _, perm := range perms {
					var ids []int32
					for _, id := range perm {
						if slices.Contains(sorted[:n], id) {
							ids = append(ids, id)
						}
					}
					got, err := metadata.Place(ids, partitions, rf)
					require.NoError(t, err)
					require.Equal(t, want, got, "input order %v", ids)
				}
			}
		}
	}
}

func TestPlaceResultsDoNotAlias(t *testing.T) {
	got, err := metadata.Place([]int32{1, 2}, 3, 2)
	require.NoError(t, err)
	got[0][0] = 99
	assert.Equal(t, []int32{1, 2}, got[2], "partitions share a replica slice")
}

func TestPlaceErrors(t *testing.T) {
	tests := []struct {
		name       string
		brokers    []int32
		partitions int
		rf         int
		want       error
	}{
		{"zero partitions", []int32{1, 2}, 0, 1, metadata.ErrInvalid},
		{"negative partitions", []int32{1, 2}, -1, 1, metadata.ErrInvalid},
		{"too many partitions", []int32{1, 2}, metadata.MaxPartitions + 1, 1, metadata.ErrInvalid},
		{"zero replication factor", []int32{1, 2}, 1, 0, metadata.ErrInvalid},
		{"negative replication factor", []int32{1, 2}, 1, -2, metadata.ErrInvalid},
		{"rf above broker count", []int32{1, 2}, 1, 3, metadata.ErrNotEnoughBrokers},
		{"no brokers", nil, 1, 1, metadata.ErrNotEnoughBrokers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metadata.Place(tt.brokers, tt.partitions, tt.rf)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, got)
		})
	}
	t.Run("max partitions is allowed", func(t *testing.T) {
		got, err := metadata.Place([]int32{1}, metadata.MaxPartitions, 1)
		require.NoError(t, err)
		assert.Len(t, got, metadata.MaxPartitions)
	})
}

func TestAddTopic(t *testing.T) {
	c := brokersCluster(30, 10, 20)
	topic, err := c.AddTopic("orders", 4, 2)
	require.NoError(t, err)
	require.NotNil(t, topic)
	assert.Equal(t, "orders", topic.Name)
	assert.Equal(t, 2, topic.ReplicationFactor)
	assert.False(t, topic.Sealed)

	want, err := metadata.Place([]int32{10, 20, 30}, 4, 2)
	require.NoError(t, err)
	require.Len(t, topic.Partitions, 4)
	for p, part := range topic.Partitions {
		assert.Equal(t, want[p], part.Replicas, "partition %d replicas", p)
		assert.Equal(t, part.Replicas, part.Active, "partition %d: every assigned replica starts active", p)
		assert.Equal(t, part.Replicas[0], part.Leader, "partition %d: leader is the first replica", p)
		assert.Equal(t, int32(0), part.LeaderEpoch, "partition %d", p)
	}
	part := &topic.Partitions[0]
	part.Active[0] = 99
	assert.Equal(t, int32(10), part.Replicas[0], "active set shares the replicas slice")

	assert.Same(t, c.Topic("orders"), topic, "AddTopic returns the stored topic")
	c.Topic("orders").Partitions[0].Active[0] = 10
	require.NoError(t, c.Validate())
}

func TestAddTopicKeepsTopicsSorted(t *testing.T) {
	c := brokersCluster(1, 2)
	for _, name := range []string{"m", "b", "z", "a", "B", "m-2", "_x", "0"} {
		_, err := c.AddTopic(name, 1, 1)
		require.NoError(t, err, name)
		names := make([]string, len(c.Topics))
		for i, tp := range c.Topics {
			names[i] = tp.Name
		}
		require.True(t, slices.IsSorted(names), "topics not sorted after adding %q: %v", name, names)
		require.NoError(t, c.Validate())
		for _, n := range names {
			require.NotNil(t, c.Topic(n), "Topic(%q) after adding %q", n, name)
		}
	}
	assert.Nil(t, c.Topic("missing"))
}

func TestAddTopicErrors(t *testing.T) {
	tests := []struct {
		name       string
		topic      string
		partitions int
		rf         int
		want       error
	}{
		{"empty name", "", 1, 1, metadata.ErrInvalidTopicName},
		{"dot", ".", 1, 1, metadata.ErrInvalidTopicName},
		{"dot dot", "..", 1, 1, metadata.ErrInvalidTopicName},
		{"slash", "a/b", 1, 1, metadata.ErrInvalidTopicName},
		{"backslash", `a\b`, 1, 1, metadata.ErrInvalidTopicName},
		{"space", "a b", 1, 1, metadata.ErrInvalidTopicName},
		{"non ascii", "tópico", 1, 1, metadata.ErrInvalidTopicName},
		{"nul", "a\x00", 1, 1, metadata.ErrInvalidTopicName},
		{"too long", strings.Repeat("x", 250), 1, 1, metadata.ErrInvalidTopicName},
		{"exists", "existing", 1, 1, metadata.ErrTopicExists},
		{"zero partitions", "new", 0, 1, metadata.ErrInvalid},
		{"too many partitions", "new", metadata.MaxPartitions + 1, 1, metadata.ErrInvalid},
		{"zero rf", "new", 1, 0, metadata.ErrInvalid},
		{"rf above brokers", "new", 1, 3, metadata.ErrNotEnoughBrokers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := brokersCluster(1, 2)
			_, err := c.AddTopic("existing", 2, 2)
			require.NoError(t, err)
			before := c.Clone()

			got, err := c.AddTopic(tt.topic, tt.partitions, tt.rf)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, got)
			assert.Equal(t, before, c, "a failed AddTopic changed the cluster")
		})
	}
	t.Run("longest valid name", func(t *testing.T) {
		c := brokersCluster(1)
		_, err := c.AddTopic(strings.Repeat("x", 249), 1, 1)
		require.NoError(t, err)
	})
}

func TestRemoveTopic(t *testing.T) {
	c := brokersCluster(1, 2, 3)
	for _, name := range []string{"a", "b", "c"} {
		_, err := c.AddTopic(name, 2, 2)
		require.NoError(t, err)
	}
	require.NoError(t, c.RemoveTopic("b"))
	assert.Nil(t, c.Topic("b"))
	require.NotNil(t, c.Topic("a"))
	require.NotNil(t, c.Topic("c"))
	assert.Len(t, c.Topics, 2)
	require.NoError(t, c.Validate())

	err := c.RemoveTopic("b")
	require.ErrorIs(t, err, metadata.ErrUnknownTopic)
	assert.Contains(t, err.Error(), `"b"`)
	assert.Len(t, c.Topics, 2)

	_, err = c.AddTopic("b", 1, 1)
	require.NoError(t, err, "a removed topic's name can be used again")

	require.NoError(t, c.RemoveTopic("a"))
	require.NoError(t, c.RemoveTopic("b"))
	require.NoError(t, c.RemoveTopic("c"))
	assert.Empty(t, c.Topics)
	require.ErrorIs(t, c.RemoveTopic("a"), metadata.ErrUnknownTopic)
}

func TestPutBroker(t *testing.T) {
	c := &metadata.Cluster{}
	for _, id := range []int32{5, 1, 9, 3, 7, 2} {
		c.PutBroker(metadata.Broker{ID: id, Addr: "old"})
	}
	assert.Equal(t, []int32{1, 2, 3, 5, 7, 9}, c.BrokerIDs())

	updated := metadata.Broker{ID: 5, Addr: "new:1", HTTP: "new:2", Gossip: "new:3"}
	c.PutBroker(updated)
	assert.Equal(t, []int32{1, 2, 3, 5, 7, 9}, c.BrokerIDs(), "an update must not add a broker")
	got, ok := c.Broker(5)
	require.True(t, ok)
	assert.Equal(t, updated, got)
	for _, id := range []int32{1, 2, 3, 7, 9} {
		b, ok := c.Broker(id)
		require.True(t, ok, id)
		assert.Equal(t, "old", b.Addr, "broker %d changed by an update of 5", id)
	}
	for _, id := range []int32{0, 4, 10, -1} {
		_, ok := c.Broker(id)
		assert.False(t, ok, "Broker(%d)", id)
	}
}

func TestCloneIsDeep(t *testing.T) {
	orig := validCluster()
	c := orig.Clone()
	require.Equal(t, orig, c)

	c.Version++
	c.ClusterID = "other"
	c.Epoch++
	c.ControllerID = 2
	c.Brokers[0].Addr = "changed"
	c.PutBroker(metadata.Broker{ID: 4, Addr: "x"})
	c.Topics[0].Name = "changed"
	c.Topics[0].ReplicationFactor = 9
	c.Topics[0].Partitions[0].Replicas[0] = 42
	c.Topics[0].Partitions[0].Active[1] = 42
	c.Topics[0].Partitions[0].Leader = 42
	c.Topics[0].Partitions[0].LeaderEpoch = 42
	c.Topics[1].Partitions = append(c.Topics[1].Partitions, metadata.Partition{})
	c.Topics[1].Partitions[0].Replicas = append(c.Topics[1].Partitions[0].Replicas[:1], 77)
	_, err := c.AddTopic("gamma", 1, 1)
	require.NoError(t, err)
	require.NoError(t, c.RemoveTopic("beta"))

	assert.Equal(t, validCluster(), orig, "mutating the clone changed the original")
}

func TestCloneKeepsNilAndEmpty(t *testing.T) {
	tests := []struct {
		name string
		c    *metadata.Cluster
	}{
		{"new cluster", &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "x", ControllerID: 1}},
		{"empty slices", &metadata.Cluster{Brokers: []metadata.Broker{}, Topics: []metadata.Topic{}}},
		{"topic without partitions", &metadata.Cluster{Topics: []metadata.Topic{{Name: "t"}}}},
		{"partition without replicas", &metadata.Cluster{Topics: []metadata.Topic{{Name: "t", Partitions: []metadata.Partition{{}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.c, tt.c.Clone())
		})
	}
}

func TestValidateAcceptsValid(t *testing.T) {
	require.NoError(t, validCluster().Validate())

	empty := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "x", ControllerID: 1}
	require.NoError(t, empty.Validate(), "a new cluster with no brokers or topics")

	c := brokersCluster(1, 2, 3)
	_, err := c.AddTopic("t", 7, 3)
	require.NoError(t, err)
	require.NoError(t, c.Validate(), "AddTopic output")
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		breaks func(c *metadata.Cluster)
		reason string // a part of the error text that names the broken invariant
	}{
		{"version zero", func(c *metadata.Cluster) { c.Version = 0 }, "format version 0"},
		{"future version", func(c *metadata.Cluster) { c.Version = metadata.FormatVersion + 1 }, "format version"},
		{"empty cluster id", func(c *metadata.Cluster) { c.ClusterID = "" }, "cluster id"},
		{"negative metadata epoch", func(c *metadata.Cluster) { c.Epoch = -1 }, "negative epoch"},
		{"controller id 0", func(c *metadata.Cluster) { c.ControllerID = 0 }, "controller id 0"},
		{"negative controller id", func(c *metadata.Cluster) { c.ControllerID = -3 }, "controller id -3"},
		{"broker id 0", func(c *metadata.Cluster) {
			c.Brokers = append([]metadata.Broker{{ID: 0, Addr: "a"}}, c.Brokers...)
		}, "broker id 0"},
		{"negative broker id", func(c *metadata.Cluster) {
			c.Brokers = append([]metadata.Broker{{ID: -1, Addr: "a"}}, c.Brokers...)
		}, "broker id -1"},
		{"duplicate broker", func(c *metadata.Cluster) {
			c.Brokers = append(c.Brokers, metadata.Broker{ID: 3, Addr: "dup"})
		}, "not sorted by unique id"},
		{"unsorted brokers", func(c *metadata.Cluster) {
			c.Brokers[0], c.Brokers[1] = c.Brokers[1], c.Brokers[0]
		}, "not sorted by unique id"},
		{"broker without address", func(c *metadata.Cluster) { c.Brokers[1].Addr = "" }, "broker 2 has no address"},
		{"empty topic name", func(c *metadata.Cluster) { c.Topics[0].Name = "" }, "invalid topic name"},
		{"topic name with slash", func(c *metadata.Cluster) { c.Topics[0].Name = "a/b" }, "invalid topic name"},
		{"topic name dot dot", func(c *metadata.Cluster) { c.Topics[0].Name = ".." }, "invalid topic name"},
		{"unsorted topics", func(c *metadata.Cluster) {
			c.Topics[0], c.Topics[1] = c.Topics[1], c.Topics[0]
		}, "topics not sorted"},
		{"duplicate topic", func(c *metadata.Cluster) {
			c.Topics[1].Name = c.Topics[0].Name
		}, "topics not sorted by unique name"},
		{"zero partitions", func(c *metadata.Cluster) { c.Topics[0].Partitions = nil }, `"alpha" has 0 partitions`},
		{"too many partitions", func(c *metadata.Cluster) {
			p := c.Topics[1].Partitions[0]
			c.Topics[1].Partitions = slices.Repeat([]metadata.Partition{p}, metadata.MaxPartitions+1)
		}, `"beta" has 10001 partitions`},
		{"zero replication factor", func(c *metadata.Cluster) { c.Topics[0].ReplicationFactor = 0 }, "replication factor 0"},
		{"no replicas", func(c *metadata.Cluster) {
			c.Topics[1].Partitions[0].Replicas = nil
		}, "beta/0 has no replicas"},
		{"move without its replicas", func(c *metadata.Cluster) {
			// alpha/2 is on 3, 1; moving to 2, 1 its replicas are 2, 1, 3.
			c.Topics[0].Partitions[2].Move = &metadata.Move{Target: []int32{2, 1}, From: []int32{3, 1}, Throttle: 1}
		}, "alpha/2 moves from [3 1] to [2 1], so its replicas are [2 1 3], not [3 1]"},
		{"move target twice", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[2].Move = &metadata.Move{Target: []int32{2, 2}, From: []int32{3, 1}, Throttle: 1}
		}, "alpha/2 lists broker 2 twice in its move target"},
		{"move to nothing", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[2].Move = &metadata.Move{From: []int32{3, 1}, Throttle: 1}
		}, "alpha/2 moves from [3 1] to []: both need a replica"},
		{"move without a throttle", func(c *metadata.Cluster) {
			p := &c.Topics[0].Partitions[2]
			p.Move = &metadata.Move{Target: []int32{2, 1}, From: []int32{3, 1}}
			p.Replicas = []int32{2, 1, 3}
		}, "alpha/2 moves at a throttle of 0 bytes/s"},
		{"duplicate replica", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[1].Replicas = []int32{3, 3}
		}, "alpha/1 lists broker 3 twice in its replicas"},
		{"unregistered replica", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[1].Replicas = []int32{4, 3}
		}, "alpha/1 names unregistered broker 4 in its replicas"},
		{"zero replica id", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[1].Replicas = []int32{0, 3}
		}, "alpha/1 names unregistered broker 0"},
		{"active not a subset of replicas", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[0].Active = []int32{1, 3} // 3 is registered but not assigned
		}, "alpha/0 has active replica 3"},
		{"duplicate active", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[0].Active = []int32{1, 1}
		}, "alpha/0 has active replica 1"},
		{"empty active set", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[1].Active = nil
		}, "alpha/1 leader 3 is not in the active set"},
		{"leader not active", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[0].Active = []int32{2}
		}, "alpha/0 leader 1 is not in the active set"},
		{"leader not a replica", func(c *metadata.Cluster) {
			c.Topics[0].Partitions[1].Leader = 1
		}, "alpha/1 leader 1 is not in the active set"},
		{"negative leader epoch", func(c *metadata.Cluster) {
			c.Topics[1].Partitions[0].LeaderEpoch = -1
		}, "beta/0 has leader epoch -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCluster()
			tt.breaks(c)
			err := c.Validate()
			require.ErrorIs(t, err, metadata.ErrInvalid)
			assert.Contains(t, err.Error(), tt.reason)
		})
	}
}

func TestMoveValidAndCloned(t *testing.T) {
	c := validCluster()
	p := &c.Topics[1].Partitions[0] // beta/0 on 2, 3, 1
	p.Move = &metadata.Move{Target: []int32{3, 1}, From: []int32{2, 3, 1}, Throttle: 50 << 20, Started: 1}
	p.Replicas = metadata.MoveReplicas(p.Move.From, p.Move.Target)
	require.Equal(t, []int32{3, 1, 2}, p.Replicas)
	require.NoError(t, c.Validate())
	assert.Empty(t, p.Adding())
	assert.Equal(t, []int32{2}, p.Removing())

	q := &c.Topics[0].Partitions[0] // alpha/0 on 1, 2: to 3, 2
	q.Move = &metadata.Move{Target: []int32{3, 2}, From: []int32{1, 2}, Throttle: 1}
	q.Replicas = metadata.MoveReplicas(q.Move.From, q.Move.Target)
	require.NoError(t, c.Validate())
	assert.Equal(t, []int32{3}, q.Adding())
	assert.Equal(t, []int32{1}, q.Removing())

	n := c.Clone()
	n.Topics[0].Partitions[0].Move.Target[0] = 9
	assert.Equal(t, int32(3), q.Move.Target[0], "Clone shares the move's target")
	assert.Empty(t, metadata.Partition{Replicas: []int32{1}}.Adding())
}
