package metadata_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// validJSON is validCluster as the store writes it.
func validJSON(t *testing.T) []byte {
	t.Helper()
	data, err := json.Marshal(validCluster())
	require.NoError(t, err)
	return data
}

func TestStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := metadata.NewStore(filepath.Join(dir, "cluster.json"))
	assert.Equal(t, filepath.Join(dir, "cluster.json"), s.Path())

	tests := []struct {
		name    string
		cluster *metadata.Cluster
	}{
		{"new cluster", &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "new", ControllerID: 1}},
		{"with brokers and topics", validCluster()},
		{"built by AddTopic", func() *metadata.Cluster {
			c := brokersCluster(1, 2, 3, 4)
			c.Epoch = 12
			_, err := c.AddTopic("events", 9, 3)
			require.NoError(t, err)
			_, err = c.AddTopic("audit.log", 1, 1)
			require.NoError(t, err)
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.cluster.Clone()
			require.NoError(t, s.Save(tt.cluster))
			assert.Equal(t, want, tt.cluster, "Save changed its argument")

			got, err := s.Load()
			require.NoError(t, err)
			assert.Equal(t, tt.cluster, got)
			assert.Equal(t, []string{"cluster.json"}, dirNames(t, dir), "Save left other files behind")
		})
	}
}

func TestStoreLoadMissing(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "cluster.json"),
		filepath.Join(dir, "no-such-dir", "cluster.json"),
	} {
		c, err := metadata.NewStore(path).Load()
		require.ErrorIs(t, err, metadata.ErrNotFound, path)
		assert.NotErrorIs(t, err, metadata.ErrCorrupt)
		assert.Nil(t, c)
	}
	assert.Empty(t, dirNames(t, dir), "Load of a missing file created something")
}

func TestStoreLoadCorrupt(t *testing.T) {
	valid := validJSON(t)
	brokenInvariant := validCluster()
	brokenInvariant.Topics[0].Partitions[0].Active = []int32{2} // leader 1 not active
	invalid, err := json.Marshal(brokenInvariant)
	require.NoError(t, err)
	unknownField := strings.Replace(string(valid), `"epoch":7`, `"epoch":7,"color":"blue"`, 1)
	require.NotEqual(t, string(valid), unknownField)
	unknownNested := strings.Replace(string(valid), `"leader_epoch":4`, `"leader_epoch":4,"isr":[3]`, 1)
	require.NotEqual(t, string(valid), unknownNested)

	tests := []struct {
		name   string
		data   []byte
		reason string // a part of the error text that says what is wrong
	}{
		{"empty file", []byte{}, "EOF"},
		{"whitespace only", []byte(" \n\t"), "EOF"},
		{"garbage", []byte("\x00\xff\x13garbage\x7f"), "invalid character"},
		{"not an object", []byte(`[1, 2, 3]`), "cannot unmarshal array"},
		{"null", []byte("null"), "format version 0"},
		{"empty object", []byte("{}"), "format version 0"},
		{"truncated", valid[:len(valid)/2], "unexpected EOF"},
		{"truncated by one byte", valid[:len(valid)-1], "unexpected EOF"},
		{"unknown field", []byte(unknownField), `unknown field "color"`},
		{"unknown nested field", []byte(unknownNested), `unknown field "isr"`},
		{"wrong type", []byte(strings.Replace(string(valid), `"epoch":7`, `"epoch":"7"`, 1)), "cannot unmarshal string"},
		{"id out of range", []byte(strings.Replace(string(valid), `"controller_id":1`, `"controller_id":4294967297`, 1)), "cannot unmarshal number"},
		{"second object", append(append([]byte{}, valid...), valid...), "data after the metadata object"},
		{"trailing garbage", append(append([]byte{}, valid...), " x"...), "data after the metadata object"},
		{"trailing brace", append(append([]byte{}, valid...), "}"...), "data after the metadata object"},
		{"trailing bracket", append(append([]byte{}, valid...), "\n]"...), "data after the metadata object"},
		{"trailing number", append(append([]byte{}, valid...), " 1"...), "data after the metadata object"},
		{"breaks an invariant", invalid, "leader 1 is not in the active set"},
		{"future version", []byte(strings.Replace(string(valid), `"version":1`, `"version":2`, 1)), "format version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cluster.json")
			require.NoError(t, os.WriteFile(path, tt.data, 0o644))

			c, err := metadata.NewStore(path).Load()
			require.ErrorIs(t, err, metadata.ErrCorrupt)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), path, "the error names the file")
			assert.Contains(t, err.Error(), tt.reason, "the error says why")

			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tt.data, after, "Load changed a file it could not load")
			assert.Equal(t, []string{"cluster.json"}, dirNames(t, dir))
		})
	}
}

func TestStoreLoadAcceptsTrailingWhitespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.json")
	require.NoError(t, os.WriteFile(path, append(validJSON(t), " \n\r\n\t"...), 0o644))
	c, err := metadata.NewStore(path).Load()
	require.NoError(t, err)
	assert.Equal(t, validCluster(), c)
}

func TestStoreSaveRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.json")
	s := metadata.NewStore(path)
	require.NoError(t, s.Save(validCluster()))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	bad := validCluster()
	bad.Epoch++
	bad.Brokers[0].Addr = ""
	err = s.Save(bad)
	require.ErrorIs(t, err, metadata.ErrInvalid)

	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused Save changed the file")
	assert.Equal(t, []string{"cluster.json"}, dirNames(t, dir))
	got, err := s.Load()
	require.NoError(t, err)
	assert.Equal(t, validCluster(), got)

	t.Run("without an old file", func(t *testing.T) {
		dir := t.TempDir()
		s := metadata.NewStore(filepath.Join(dir, "cluster.json"))
		require.ErrorIs(t, s.Save(&metadata.Cluster{}), metadata.ErrInvalid)
		assert.Empty(t, dirNames(t, dir))
		_, err := s.Load()
		require.ErrorIs(t, err, metadata.ErrNotFound)
	})
}

func TestStoreSaveReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.json")
	s := metadata.NewStore(path)
	c := brokersCluster(1, 2, 3)
	for i := range 20 {
		c.Epoch = int64(i)
		c.PutBroker(metadata.Broker{ID: int32(i + 1), Addr: "host:1"})
		if i%3 == 0 {
			_, err := c.AddTopic("t"+strings.Repeat("x", i), i+1, 3)
			require.NoError(t, err)
		}
		require.NoError(t, s.Save(c))
		assert.Equal(t, []string{"cluster.json"}, dirNames(t, dir), "save %d left a temporary file", i)
		got, err := s.Load()
		require.NoError(t, err)
		require.Equal(t, c, got, "save %d", i)
	}
}

func TestStoreSaveFailsWithoutDirectory(t *testing.T) {
	dir := t.TempDir()
	s := metadata.NewStore(filepath.Join(dir, "missing", "cluster.json"))
	require.Error(t, s.Save(validCluster()))
	assert.Empty(t, dirNames(t, dir))
}

// TestParse covers metadata that arrives over the wire rather than from the
// store: the same format and checks, with the source named in errors.
func TestParse(t *testing.T) {
	data, err := metadata.Marshal(validCluster())
	require.NoError(t, err)
	c, err := metadata.Parse(data, "controller 1")
	require.NoError(t, err)
	assert.Equal(t, validCluster(), c)
	again, err := metadata.Marshal(c)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "Marshal of parsed metadata changed the bytes")

	for _, bad := range [][]byte{
		append(append([]byte{}, data...), '}'),
		data[:len(data)/3],
		[]byte(`{"version":1,"cluster_id":"x","controller_id":0}`),
	} {
		_, err := metadata.Parse(bad, "controller 1")
		require.ErrorIs(t, err, metadata.ErrCorrupt)
		assert.Contains(t, err.Error(), "controller 1")
	}
}
