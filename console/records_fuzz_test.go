package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeMessagesQuery is the query that asks for mq, written plainly: a
// parsed query written again parses to the same.
func encodeMessagesQuery(mq messagesQuery) string {
	v := url.Values{}
	if mq.partition >= 0 {
		v.Set("partition", strconv.Itoa(int(mq.partition)))
	}
	switch mq.start {
	case startEarliest:
		v.Set("start", "earliest")
	case startLatest:
		v.Set("start", "latest")
	case startOffset:
		v.Set("start", fmt.Sprint("offset:", mq.at))
	case startTime:
		v.Set("start", fmt.Sprint("time:", mq.at))
	case startOffsets:
		var es []string
		for _, p := range slices.Sorted(maps.Keys(mq.offsets)) {
			es = append(es, fmt.Sprintf("%d=%d", p, mq.offsets[p]))
		}
		v.Set("start", "offsets:"+strings.Join(es, ","))
	}
	v.Set("limit", strconv.Itoa(mq.limit))
	if mq.search != "" {
		v.Set("q", mq.search)
		var in []string
		for _, f := range []struct {
			on   bool
			name string
		}{{mq.in.key, "key"}, {mq.in.value, "value"}, {mq.in.headers, "headers"}} {
			if f.on {
				in = append(in, f.name)
			}
		}
		v.Set("in", strings.Join(in, ","))
	}
	return v.Encode()
}

func FuzzMessagesQuery(f *testing.F) {
	for _, s := range []string{
		"", "partition=0", "start=latest&limit=500", "start=offset:12&limit=3", "start=time:1700000000000",
		"start=offsets:0=10,3=7", "q=needle&in=key,headers", "q=%FF%FE", "limit=0", "partition=-1", "a=1&a=2",
		"start=offsets:0=1,0=2", "q=x;y", "in=key",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		mq, err := parseMessagesQuery(raw)
		if err != nil {
			assert.Less(t, len(err.Error()), 512, "an error says what is wrong, briefly")
			return
		}
		require.GreaterOrEqual(t, mq.partition, int32(-1))
		require.True(t, mq.limit >= 1 && mq.limit <= maxLimit, "limit %d", mq.limit)
		require.LessOrEqual(t, len(mq.search), maxSearch)
		require.True(t, mq.in.key || mq.in.value || mq.in.headers, "a search looks somewhere")
		require.GreaterOrEqual(t, mq.at, int64(0))
		if mq.start == startOffsets {
			require.NotEmpty(t, mq.offsets)
			require.Equal(t, int32(-1), mq.partition)
			for p, o := range mq.offsets {
				require.GreaterOrEqual(t, p, int32(0))
				require.GreaterOrEqual(t, o, int64(0))
			}
		} else {
			require.Nil(t, mq.offsets)
		}
		again, err := parseMessagesQuery(encodeMessagesQuery(mq))
		require.NoError(t, err)
		require.Equal(t, mq, again)
	})
}

// FuzzOptionalIDQuery parses a query as GET .../tail (partition) and GET
// /ui/api/series (node) do: what it takes is -1 or a number that reads
// back the same.
func FuzzOptionalIDQuery(f *testing.F) {
	for _, s := range []string{"", "partition=3", "partition=", "partition=2147483648", "partition=1&partition=1",
		"node=1", "node=2", "node=-1", "node=01", "partition=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, name := range []string{"partition", "node"} {
			id, err := parseOptionalID(raw, name)
			if err != nil {
				continue
			}
			require.GreaterOrEqual(t, id, int32(-1))
			if id >= 0 {
				again, err := parseOptionalID(name+"="+strconv.Itoa(int(id)), name)
				require.NoError(t, err)
				require.Equal(t, id, again)
			}
		}
	})
}

// FuzzProduceRequest decodes a produce body as the API does (readJSON):
// what it takes becomes a record holding exactly what was sent.
func FuzzProduceRequest(f *testing.F) {
	for _, s := range []string{
		`{"value":"v"}`, `{"key":"k","value":"","headers":[{"key":"h","value":"v"}]}`, `{"partition":3,"value":"x"}`,
		`{"partition":-1,"value":"x"}`, `{"key":"k"}`, `{"value":"\u0000\ud800"}`, `{"value":"v","other":1}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ProduceRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if dec.Decode(&req) != nil {
			return
		}
		rec, err := req.producerRecord("t")
		if err != nil {
			return
		}
		require.NotNil(t, req.Value)
		assert.Equal(t, *req.Value, string(rec.Value))
		assert.Equal(t, req.Key != nil, rec.Key != nil)
		assert.Equal(t, req.Partition != nil, rec.ManualPartition)
		if rec.ManualPartition {
			assert.GreaterOrEqual(t, rec.Partition, int32(0))
		}
		require.Len(t, rec.Headers, len(req.Headers))
		again, err := json.Marshal(req)
		require.NoError(t, err)
		var req2 ProduceRequest
		require.NoError(t, json.Unmarshal(again, &req2))
		rec2, err := req2.producerRecord("t")
		require.NoError(t, err)
		assert.Equal(t, rec, rec2)
	})
}
