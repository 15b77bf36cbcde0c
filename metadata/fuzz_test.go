package metadata_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

var genFuzzSeeds = flag.Bool("gen-fuzz-seeds", false, "rewrite the generated seed corpus under testdata/fuzz")

// storeFuzzSeed is one metadata file for FuzzStoreLoad.
type storeFuzzSeed struct {
	name string
	data []byte
}

func storeFuzzSeeds(t testing.TB) []storeFuzzSeed {
	indent := func(c *metadata.Cluster) []byte {
		b, err := json.MarshalIndent(c, "", "  ")
		require.NoError(t, err)
		return append(b, '\n')
	}
	newCluster := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1}
	oneBroker := newCluster.Clone()
	oneBroker.Epoch = 1
	oneBroker.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:9092", HTTP: "127.0.0.1:8080", Gossip: "127.0.0.1:7946"})
	_, err := oneBroker.AddTopic("events", 3, 1)
	require.NoError(t, err)
	oneBroker.Topics[0].ID = "00112233445566778899aabbccddeeff" // seeds are fixed bytes
	oneBroker.Brokers[0].RootID = "ffeeddccbbaa99887766554433221100"
	full := validCluster()
	valid := indent(full)
	leaderNotActive := full.Clone()
	leaderNotActive.Topics[0].Partitions[0].Active = []int32{2}
	withConfig := full.Clone()
	withConfig.Topics[0].Config = metadata.TopicConfig{"retention.bytes": 1 << 30, "retention.ms": -1, "segment.bytes": 1 << 20, "segment.ms": 60000}
	configured := indent(withConfig)
	replaceIn := func(data []byte, old, new string) []byte {
		s := strings.Replace(string(data), old, new, 1)
		require.NotEqual(t, string(data), s, "seed edit %q found nothing", old)
		return []byte(s)
	}

	replace := func(old, new string) []byte {
		s := strings.Replace(string(valid), old, new, 1)
		require.NotEqual(t, string(valid), s, "seed edit %q found nothing", old)
		return []byte(s)
	}
	flip := func(at int) []byte {
		b := append([]byte{}, valid...)
		b[at] ^= 0x20
		return b
	}
	return []storeFuzzSeed{
		{"valid-new-cluster", indent(newCluster)},
		{"valid-one-broker", indent(oneBroker)},
		{"valid-full", valid},
		{"valid-compact", func() []byte { b, err := json.Marshal(full); require.NoError(t, err); return b }()},
		{"empty", []byte{}},
		{"null", []byte("null")},
		{"garbage", []byte("\x00\xffnot json\x7f")},
		{"truncated", valid[:len(valid)/2]},
		{"unknown-field", replace(`"epoch": 7,`, `"epoch": 7, "extra": true,`)},
		{"trailing-brace", append(append([]byte{}, valid...), '}')},
		{"trailing-object", append(append([]byte{}, valid...), "{}"...)},
		{"leader-not-active", indent(leaderNotActive)},
		{"duplicate-replica", replace(`"replicas": [
            1,
            2
          ]`, `"replicas": [
            1,
            1
          ]`)},
		{"negative-leader-epoch", replace(`"leader_epoch": 4`, `"leader_epoch": -4`)},
		{"controller-huge", replace(`"controller_id": 1`, `"controller_id": 99999999999`)},
		{"bad-topic-id", indent(func() *metadata.Cluster { c := oneBroker.Clone(); c.Topics[0].ID = "not-hex"; return c }())},
		{"bitflip-key", flip(strings.Index(string(valid), `"brokers"`) + 1)},
		{"valid-topic-config", configured},
		{"empty-topic-config", replaceIn(valid, `"sealed": true,`, `"sealed": true, "config": {},`)},
		{"topic-config-unknown-key", replaceIn(configured, `"retention.ms"`, `"retention.hours"`)},
		{"topic-config-bad-value", replaceIn(configured, `"segment.bytes": 1048576`, `"segment.bytes": 12`)},
		{"topic-config-not-a-number", replaceIn(configured, `"segment.ms": 60000`, `"segment.ms": "1m"`)},
	}
}

// TestStoreFuzzSeedCorpus keeps testdata/fuzz/FuzzStoreLoad in step with
// storeFuzzSeeds; run with -gen-fuzz-seeds to rewrite it.
func TestStoreFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzStoreLoad")
	for _, s := range storeFuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		path := filepath.Join(dir, s.name)
		if *genFuzzSeeds {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "seed %s missing; run go test -run TestStoreFuzzSeedCorpus -gen-fuzz-seeds", s.name)
		assert.Equal(t, want, string(got), "seed %s is stale; run go test -run TestStoreFuzzSeedCorpus -gen-fuzz-seeds", s.name)
	}
}

// FuzzStoreLoad loads arbitrary bytes as the metadata file. Load must not
// panic, must fail only with ErrCorrupt and leave the file alone, and what
// it accepts must validate and survive Save and Load unchanged.
func FuzzStoreLoad(f *testing.F) {
	// One directory per process: inputs run one at a time, and a fresh
	// directory per input would slow the fuzzer down for nothing.
	dir := f.TempDir()
	path := filepath.Join(dir, "cluster.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))

		c, err := metadata.NewStore(path).Load()
		if err != nil {
			require.ErrorIs(t, err, metadata.ErrCorrupt)
			require.Contains(t, err.Error(), path)
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			require.Equal(t, string(data), string(after), "Load changed a file it could not load")
			return
		}
		require.NoError(t, c.Validate())
		require.Equal(t, c, c.Clone())

		s := metadata.NewStore(filepath.Join(dir, "saved.json"))
		require.NoError(t, s.Save(c))
		saved, err := os.ReadFile(s.Path())
		require.NoError(t, err)
		again, err := s.Load()
		require.NoError(t, err)
		require.Equal(t, c, again)

		// Saving what was loaded back gives the same bytes.
		require.NoError(t, s.Save(again))
		resaved, err := os.ReadFile(s.Path())
		require.NoError(t, err)
		require.Equal(t, string(saved), string(resaved))
	})
}
