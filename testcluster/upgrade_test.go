package testcluster

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// untar unpacks the gzip'd tar file into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.Clean(h.Name))
		require.True(t, strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)), "entry %q leaves %s", h.Name, dir)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(path, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			require.NoError(t, err)
			_, err = io.Copy(out, tr)
			require.NoError(t, err)
			require.NoError(t, out.Close())
		}
	}
}

// A storage root the release before Kafka's protocol wrote (13 of 18,
// commit 965c179: testdata/release-13-node1.tar.gz, a single node with a
// topic "before" of two partitions holding 41 records of magic 1, keyed
// but one, each with a header, and group g's committed offset 5 of
// before/0) is served after the upgrade: gostream-ctl reads every record
// and the group's offset as they were, a Kafka client reads the same
// records (converted to Kafka batches) with their keys, the null key
// kept null, and headers, and what it produces next (magic 2) follows
// them in the same partitions, read by both.
func TestUpgradeFromTheReleaseBeforeKafka(t *testing.T) {
	c := newClusterWith(t, Config{Nodes: 1, Kafka: true})
	require.NoError(t, os.MkdirAll(filepath.Dir(c.Node(1).DataDir), 0o755))
	untar(t, filepath.Join("testdata", "release-13-node1.tar.gz"), filepath.Dir(c.Node(1).DataDir))
	require.NoError(t, c.Start())

	before := ctlRecordsOf(t, c, "before")
	require.Len(t, before, 41)
	for i := range 40 {
		r, ok := before[fmt.Sprint("value-", i)]
		require.True(t, ok, "value-%d", i)
		assert.Equal(t, fmt.Sprint("key-", i%7), r.Key)
		require.Len(t, r.Headers, 1)
		assert.Equal(t, fmt.Sprint(i), r.Headers[0].Value)
	}
	var g struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
		} `json:"offsets"`
	}
	require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "-o", "json", "group", "describe", "g").Stdout), &g))
	found := false
	for _, o := range g.Offsets {
		if o.Topic == "before" && o.Partition == 0 && o.Committed != nil {
			assert.Equal(t, int64(5), *o.Committed)
			found = true
		}
	}
	assert.True(t, found, "group g's offset of before/0: %+v", g.Offsets)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer pr.Close()
	for i := range 10 {
		r := &kgo.Record{Topic: "before", Partition: int32(i % 2), Key: []byte("after"), Value: []byte(fmt.Sprint("after-", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
		require.NoError(t, pr.ProduceSync(ctx, r).FirstErr())
	}
	after := ctlRecordsOf(t, c, "before")
	require.Len(t, after, 51)
	for v, r := range before {
		assert.Equal(t, r.Offset, after[v].Offset, "%s keeps its offset", v)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.ConsumeTopics("before"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	seen := 0
	for seen < 51 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of 51", seen)
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			want := after[string(r.Value)]
			assert.Equal(t, want.Partition, r.Partition, "%s", r.Value)
			assert.Equal(t, want.Offset, r.Offset, "%s", r.Value)
			if string(r.Value) == "no-key" {
				assert.Nil(t, r.Key, "a null key stays null")
				return
			}
			assert.Equal(t, want.Key, string(r.Key), "%s", r.Value)
			require.Len(t, r.Headers, 1, "%s", r.Value)
			assert.Equal(t, want.Headers[0].Value, string(r.Headers[0].Value), "%s", r.Value)
		})
	}
}

// ctlRecordsOf is what gostream-ctl consume -o json reads of topic, by
// value.
func ctlRecordsOf(t *testing.T, c *Cluster, topic string) map[string]ctlRecord {
	t.Helper()
	out := map[string]ctlRecord{}
	for _, line := range strings.Split(strings.TrimSpace(ctlOK(t, c, "consume", topic, "-o", "json").Stdout), "\n") {
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		out[r.Value] = r
	}
	return out
}
