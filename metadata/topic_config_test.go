package metadata_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/storage"
)

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		key    string
		value  int64
		reason string // "" for a valid value; else part of the error
	}{
		{"retention.bytes", -1, ""},
		{"retention.bytes", 1, ""},
		{"retention.bytes", 1 << 40, ""},
		{"retention.bytes", 0, "want -1 (unlimited) or a positive number of bytes"},
		{"retention.bytes", -2, "retention.bytes -2: want -1"},
		{"retention.ms", -1, ""},
		{"retention.ms", 1, ""},
		{"retention.ms", metadata.MaxMs, ""},
		{"retention.ms", metadata.MaxMs + 1, "at most 9223372036854"},
		{"retention.ms", 0, "retention.ms 0: want -1 (forever) or a positive number of milliseconds"},
		{"segment.bytes", 1 << 20, ""},
		{"segment.bytes", 1 << 30, ""},
		{"segment.bytes", 1<<20 - 1, "segment.bytes 1048575: want a number of bytes from 1048576 (1 MiB) to 1073741824 (1 GiB)"},
		{"segment.bytes", 1<<30 + 1, "segment.bytes 1073741825"},
		{"segment.bytes", -1, "segment.bytes -1"},
		{"segment.ms", 1000, ""},
		{"segment.ms", 999, "segment.ms 999: want a number of milliseconds from 1000 (1 s)"},
		{"segment.ms", -1, "segment.ms -1"},
		{"retention.hours", 1, `unknown key "retention.hours": the keys are retention.bytes, retention.ms, segment.bytes, segment.ms`},
		{"", 1, `unknown key ""`},
	}
	for _, tt := range tests {
		err := metadata.CheckConfig(tt.key, tt.value)
		if tt.reason == "" {
			assert.NoError(t, err, "%s=%d", tt.key, tt.value)
			continue
		}
		if assert.ErrorIs(t, err, metadata.ErrInvalidConfig, "%s=%d", tt.key, tt.value) {
			assert.Contains(t, err.Error(), tt.reason)
		}
	}
}

func TestCheckConfigKey(t *testing.T) {
	for _, k := range metadata.ConfigKeys() {
		assert.NoError(t, metadata.CheckConfigKey(k))
		assert.NotEmpty(t, metadata.ConfigWant(k))
	}
	err := metadata.CheckConfigKey("retention.hours")
	require.ErrorIs(t, err, metadata.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `unknown key "retention.hours"`)
	assert.Empty(t, metadata.ConfigWant("retention.hours"))
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		entry  string
		key    string
		value  int64
		reason string
	}{
		{"retention.bytes=1073741824", "retention.bytes", 1 << 30, ""},
		{" retention.ms = -1 ", "retention.ms", -1, ""},
		{"segment.bytes=1048576", "segment.bytes", 1 << 20, ""},
		{"segment.ms=60000", "segment.ms", 60000, ""},
		{"retention.bytes=1GiB", "", 0, `retention.bytes "1GiB": not a number; want -1 (unlimited) or a positive number of bytes`},
		{"retention.ms=", "", 0, `retention.ms "": not a number`},
		{"segment.bytes=12", "", 0, "segment.bytes 12: want a number of bytes from 1048576"},
		{"cleanup.policy=compact", "", 0, `unknown key "cleanup.policy"`},
		{"retention.bytes", "", 0, `"retention.bytes": want KEY=VALUE`},
		{"=5", "", 0, `"=5": want KEY=VALUE`},
	}
	for _, tt := range tests {
		key, value, err := metadata.ParseConfig(tt.entry)
		if tt.reason == "" {
			require.NoError(t, err, tt.entry)
			assert.Equal(t, tt.key, key, tt.entry)
			assert.Equal(t, tt.value, value, tt.entry)
			continue
		}
		if assert.ErrorIs(t, err, metadata.ErrInvalidConfig, tt.entry) {
			assert.Contains(t, err.Error(), tt.reason, tt.entry)
		}
	}
}

func TestTopicConfigOverDefaults(t *testing.T) {
	defaults := metadata.LogConfig{RetentionBytes: -1, RetentionMs: 7 * 24 * 3600 * 1000, SegmentBytes: 128 << 20, SegmentMs: 7 * 24 * 3600 * 1000}
	require.NoError(t, defaults.Validate())
	assert.Equal(t, defaults, metadata.TopicConfig(nil).Over(defaults))

	c := metadata.TopicConfig{"retention.bytes": 1 << 30, "segment.ms": 60000}
	require.NoError(t, c.Validate())
	eff := c.Over(defaults)
	assert.Equal(t, metadata.LogConfig{RetentionBytes: 1 << 30, RetentionMs: defaults.RetentionMs, SegmentBytes: 128 << 20, SegmentMs: 60000}, eff)
	for _, key := range metadata.ConfigKeys() {
		v, ok := eff.Get(key)
		require.True(t, ok, key)
		if own, set := c[key]; set {
			assert.Equal(t, own, v, key)
		}
	}
	_, ok := eff.Get("bogus")
	assert.False(t, ok)

	// -1 turns retention off in storage; the segment keys carry over.
	assert.Equal(t, storage.Policy{SegmentBytes: 128 << 20, SegmentAge: 7 * 24 * time.Hour, RetentionAge: 7 * 24 * time.Hour}, defaults.Policy())
	assert.Equal(t, storage.Policy{SegmentBytes: 128 << 20, SegmentAge: time.Minute, RetentionBytes: 1 << 30, RetentionAge: 7 * 24 * time.Hour}, eff.Policy())
	forever := metadata.TopicConfig{"retention.ms": -1}.Over(defaults)
	assert.Zero(t, forever.Policy().RetentionAge)

	assert.ErrorIs(t, metadata.TopicConfig{"segment.bytes": 5}.Validate(), metadata.ErrInvalidConfig)
	assert.ErrorIs(t, metadata.LogConfig{}.Validate(), metadata.ErrInvalidConfig, "a complete config sets every key")
}

func TestTopicConfigInMetadata(t *testing.T) {
	c := validCluster()
	c.Topics[0].Config = metadata.TopicConfig{"retention.bytes": 1 << 30, "segment.bytes": 1 << 20}
	require.NoError(t, c.Validate())

	// Clone copies the map.
	cl := c.Clone()
	require.Equal(t, c, cl)
	cl.Topics[0].Config["retention.bytes"] = 5
	delete(cl.Topics[0].Config, "segment.bytes")
	assert.Equal(t, int64(1<<30), c.Topics[0].Config["retention.bytes"], "mutating the clone changed the original")
	assert.Len(t, c.Topics[0].Config, 2)

	// A bad key or value is invalid metadata, naming the topic and key.
	for _, cfg := range []metadata.TopicConfig{{"retention.hours": 1}, {"segment.bytes": 10}} {
		bad := validCluster()
		bad.Topics[1].Config = cfg
		err := bad.Validate()
		require.ErrorIs(t, err, metadata.ErrInvalid)
		assert.Contains(t, err.Error(), `topic "beta"`)
	}

	// Saved and loaded as it was.
	s := metadata.NewStore(filepath.Join(t.TempDir(), "cluster.json"))
	require.NoError(t, s.Save(c))
	data, err := os.ReadFile(s.Path())
	require.NoError(t, err)
	assert.Contains(t, string(data), `"config": {
        "retention.bytes": 1073741824,
        "segment.bytes": 1048576
      }`)
	got, err := s.Load()
	require.NoError(t, err)
	assert.Equal(t, c, got)
}

// TestMetadataWithoutConfigLoads: a file written before topics had a
// configuration loads, with none, and is saved again without one; an
// empty config is the same as none.
func TestMetadataWithoutConfigLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.json")
	old := `{"version":1,"cluster_id":"c0ffee","epoch":3,"controller_id":1,
		"brokers":[{"id":1,"addr":"10.0.0.1:9000"}],
		"topics":[{"name":"a","id":"00112233445566778899aabbccddeeff","replication_factor":1,"partitions":[{"replicas":[1],"active":[1],"leader":1,"leader_epoch":0}]},
		          {"name":"b","replication_factor":1,"config":{},"partitions":[{"replicas":[1],"active":[1],"leader":1,"leader_epoch":0}]}]}`
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	s := metadata.NewStore(path)
	c, err := s.Load()
	require.NoError(t, err)
	assert.Nil(t, c.Topics[0].Config)
	assert.Nil(t, c.Topics[1].Config, "an empty config is none")
	require.NoError(t, s.Save(c))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "config")
	again, err := s.Load()
	require.NoError(t, err)
	assert.Equal(t, c, again)
}
