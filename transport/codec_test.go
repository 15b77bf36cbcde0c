package transport

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"gostream/internal/bufpool"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// messageCase is one value of a message type, used by the round-trip
// tests and to generate the fuzz seed corpus.
type messageCase struct {
	name string
	msg  Message
}

// newLike returns a new zero value of m's type.
func newLike(m Message) Message {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(Message)
}

func messageCases() []messageCase {
	long := strings.Repeat("x", math.MaxUint16)
	return []messageCase{
		{"Empty", &Empty{}},

		{"ProduceRequest/zero", &ProduceRequest{}},
		{"ProduceRequest/full", &ProduceRequest{Topic: "orders", TopicID: "00112233445566778899aabbccddeeff", Partition: 3, TimeoutMs: 1500, Batch: []byte("batch bytes \x00\xff")}},
		{"ProduceRequest/extremes", &ProduceRequest{Topic: long, Partition: math.MinInt32, TimeoutMs: math.MaxInt32, Batch: bytes.Repeat([]byte{0xab}, 70000)}},

		{"ProduceResponse/zero", &ProduceResponse{}},
		{"ProduceResponse/full", &ProduceResponse{Partition: 1, BaseOffset: 100, NextOffset: 110, LeaderID: 2, LeaderEpoch: 7, AppendTime: 1_700_000_000_000, Replicas: []int32{2, 1, 3}}},
		{"ProduceResponse/extremes", &ProduceResponse{Partition: -1, BaseOffset: math.MinInt64, NextOffset: math.MaxInt64, LeaderID: -1, LeaderEpoch: math.MaxInt32, AppendTime: -1, Replicas: []int32{math.MinInt32, 0, math.MaxInt32}}},

		{"FetchRequest/zero", &FetchRequest{}},
		{"FetchRequest/full", &FetchRequest{Topic: "événements", TopicID: "id", Partition: 9, Offset: 1 << 40, MaxBytes: 1 << 20, MaxWaitMs: 500}},
		{"FetchRequest/negative", &FetchRequest{Topic: "t", Partition: -1, Offset: -2, MaxBytes: -3, MaxWaitMs: -4}},

		{"FetchResponse/zero", &FetchResponse{}},
		{"FetchResponse/full", &FetchResponse{HighWatermark: 42, LogStartOffset: 7, Batches: []byte{1, 2, 3, 4, 5}}},

		{"ListOffsetsRequest/zero", &ListOffsetsRequest{}},
		{"ListOffsetsRequest/full", &ListOffsetsRequest{Topic: "a.b-c_d", TopicID: "ffeeddccbbaa99887766554433221100", Partition: 12}},

		{"ListOffsetsResponse/zero", &ListOffsetsResponse{}},
		{"ListOffsetsResponse/full", &ListOffsetsResponse{LogStartOffset: 5, HighWatermark: 10, LogEndOffset: 12}},

		{"MetadataRequest/all", &MetadataRequest{}},
		{"MetadataRequest/named", &MetadataRequest{Topics: []string{"a", "", "orders"}}},

		{"MetadataResponse/zero", &MetadataResponse{}},
		{"MetadataResponse/full", &MetadataResponse{
			ClusterID: "c-1", ControllerID: 1, MetadataEpoch: 99,
			Brokers: []BrokerInfo{
				{ID: 1, Addr: "10.0.0.1:9092", HTTP: "10.0.0.1:8080", Gossip: "10.0.0.1:7946"},
				{ID: 2, Addr: "n2:9092"},
			},
			Topics: []TopicInfo{
				{Name: "orders", ID: "00112233445566778899aabbccddeeff", ReplicationFactor: 3, Partitions: []PartitionInfo{
					{Partition: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, Active: []int32{1, 2}},
					{Partition: 1, Leader: -1, LeaderEpoch: 0, Replicas: []int32{2, 3, 1}},
				}},
				{Name: "sealed", ReplicationFactor: 1, Sealed: true, Partitions: []PartitionInfo{{}}},
			},
			MaxBatchBytes: 4 << 20,
		}},
		// The smallest elements: each must still decode when it is the last
		// thing in the body.
		{"MetadataResponse/minimal-elements", &MetadataResponse{
			Brokers: []BrokerInfo{{}},
			Topics:  []TopicInfo{{Name: "a"}, {}},
		}},
		{"MetadataResponse/empty-topic-last", &MetadataResponse{Topics: []TopicInfo{{}}}},
		{"MetadataResponse/max-batch-bytes", &MetadataResponse{MaxBatchBytes: math.MaxInt32}},

		{"TopicInfo/zero", &TopicInfo{}},
		{"TopicInfo/full", &TopicInfo{Name: "t", ID: "x", ReplicationFactor: 2, Sealed: true, Partitions: []PartitionInfo{{Partition: 0, Leader: 1, Replicas: []int32{1}, Active: []int32{1}}},
			Config: []TopicConfigValue{{Key: "retention.bytes", Value: -1, Default: true}, {Key: "segment.bytes", Value: 1 << 20}}}},
		{"TopicInfo/empty-config-last", &TopicInfo{Config: []TopicConfigValue{{}}}},
		{"TopicInfo/stream", &TopicInfo{Name: "__ds.00112233445566778899aabbccddeeff", ID: "x", ReplicationFactor: 3, Partitions: []PartitionInfo{{Leader: 1, Replicas: []int32{1, 2, 3}, Active: []int32{1, 2, 3}}},
			Stream: &StreamInfo{Path: "shop/orders", ContentType: "application/json", ForkedFrom: "shop/all", Deleted: true}}},

		{"CreateTopicRequest/zero", &CreateTopicRequest{}},
		{"CreateTopicRequest/full", &CreateTopicRequest{Name: "orders", Partitions: 12, ReplicationFactor: 3}},
		{"CreateTopicRequest/config", &CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1,
			Config: []ConfigEntry{{Key: "retention.bytes", Value: 1 << 30}, {Key: "retention.ms", Value: -1}, {}}}},

		{"AlterTopicConfigRequest/zero", &AlterTopicConfigRequest{}},
		{"AlterTopicConfigRequest/full", &AlterTopicConfigRequest{Name: "orders",
			Set: []ConfigEntry{{Key: "segment.bytes", Value: 1 << 20}}, Delete: []string{"retention.ms", ""}}},

		{"TopicRequest/zero", &TopicRequest{}},
		{"TopicRequest/full", &TopicRequest{Name: "orders"}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, tc := range messageCases() {
		t.Run(tc.name, func(t *testing.T) {
			enc := Marshal(nil, tc.msg)
			got := newLike(tc.msg)
			require.NoError(t, Unmarshal(enc, got))
			assert.Equal(t, tc.msg, got)
			assert.Equal(t, enc, Marshal(nil, got), "re-encoding changed the bytes")

			// Marshal appends: a prefix in dst is kept.
			withPrefix := Marshal([]byte("prefix"), tc.msg)
			assert.Equal(t, append([]byte("prefix"), enc...), withPrefix)
		})
	}
}

func TestMessageRejectsTruncationAndTrailingBytes(t *testing.T) {
	for _, tc := range messageCases() {
		t.Run(tc.name, func(t *testing.T) {
			enc := Marshal(nil, tc.msg)
			step := 1
			if len(enc) > 4096 {
				step = 97 // the long cases: every cut would take too long
			}
			for cut := 0; cut < len(enc); cut += step {
				err := Unmarshal(enc[:cut], newLike(tc.msg))
				require.ErrorIsf(t, err, ErrMalformed, "cut at %d of %d", cut, len(enc))
			}
			for _, extra := range [][]byte{{0}, {0xff}, {0, 0, 0, 0}} {
				err := Unmarshal(append(bytes.Clone(enc), extra...), newLike(tc.msg))
				require.ErrorIsf(t, err, ErrMalformed, "trailing %x", extra)
			}
		})
	}
}

// randomMessages generates values with random sizes, including the empty
// strings and empty lists that make elements as small as they can be.
func randomMessages(r *rand.Rand) []Message {
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	byts := func() []byte {
		n := r.IntN(20)
		if n == 0 {
			return nil
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	i32s := func() []int32 {
		n := r.IntN(4)
		if n == 0 {
			return nil
		}
		v := make([]int32, n)
		for i := range v {
			v[i] = r.Int32() - math.MaxInt32/2
		}
		return v
	}
	strs := func() []string {
		n := r.IntN(4)
		if n == 0 {
			return nil
		}
		v := make([]string, n)
		for i := range v {
			v[i] = str()
		}
		return v
	}
	entries := func() []ConfigEntry {
		var v []ConfigEntry
		for range r.IntN(3) {
			v = append(v, ConfigEntry{Key: str(), Value: r.Int64() - r.Int64()})
		}
		return v
	}
	md := &MetadataResponse{ClusterID: str(), ControllerID: r.Int32(), MetadataEpoch: r.Int64(), MaxBatchBytes: r.Int32()}
	for range r.IntN(4) {
		md.Brokers = append(md.Brokers, BrokerInfo{ID: r.Int32(), Addr: str(), HTTP: str(), Gossip: str()})
	}
	for range r.IntN(4) {
		ti := TopicInfo{Name: str(), ReplicationFactor: int16(r.IntN(1 << 16)), Sealed: r.IntN(2) == 1}
		for range r.IntN(3) {
			ti.Partitions = append(ti.Partitions, PartitionInfo{
				Partition: r.Int32(), Leader: r.Int32(), LeaderEpoch: r.Int32(), Replicas: i32s(), Active: i32s(),
			})
		}
		for range r.IntN(3) {
			ti.Config = append(ti.Config, TopicConfigValue{Key: str(), Value: r.Int64() - r.Int64(), Default: r.IntN(2) == 1})
		}
		if r.IntN(2) == 1 {
			ti.Stream = &StreamInfo{Path: str(), ContentType: str(), ForkedFrom: str(), Deleted: r.IntN(2) == 1}
		}
		md.Topics = append(md.Topics, ti)
	}
	return []Message{
		&ProduceRequest{Topic: str(), Partition: r.Int32(), TimeoutMs: r.Int32(), Batch: byts()},
		&ProduceResponse{Partition: r.Int32(), BaseOffset: r.Int64(), NextOffset: r.Int64(), LeaderID: r.Int32(), LeaderEpoch: r.Int32(), AppendTime: r.Int64(), Replicas: i32s()},
		&FetchRequest{Topic: str(), Partition: r.Int32(), Offset: r.Int64(), MaxBytes: r.Int32(), MaxWaitMs: r.Int32()},
		&FetchResponse{HighWatermark: r.Int64(), LogStartOffset: r.Int64(), Batches: byts()},
		&ListOffsetsRequest{Topic: str(), Partition: r.Int32()},
		&ListOffsetsResponse{LogStartOffset: r.Int64(), HighWatermark: r.Int64(), LogEndOffset: r.Int64()},
		&MetadataRequest{Topics: strs()},
		md,
		&CreateTopicRequest{Name: str(), Partitions: r.Int32(), ReplicationFactor: int16(r.IntN(1 << 16)), Config: entries()},
		&AlterTopicConfigRequest{Name: str(), Set: entries(), Delete: strs()},
		&TopicRequest{Name: str()},
	}
}

func TestMessageRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		for _, m := range randomMessages(r) {
			enc := Marshal(nil, m)
			got := newLike(m)
			require.NoErrorf(t, Unmarshal(enc, got), "iteration %d: %#v", i, m)
			require.Equalf(t, m, got, "iteration %d", i)
		}
	}
}

func TestDecoderOverruns(t *testing.T) {
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cases := []struct {
		name string
		body []byte
		read func(d *Decoder)
	}{
		{"int8 of nothing", nil, func(d *Decoder) { d.Int8() }},
		{"uint16 of one byte", []byte{1}, func(d *Decoder) { d.Uint16() }},
		{"uint32 of three bytes", []byte{1, 2, 3}, func(d *Decoder) { d.Uint32() }},
		{"int64 of seven bytes", make([]byte, 7), func(d *Decoder) { d.Int64() }},
		{"bool 2", []byte{2}, func(d *Decoder) { d.Bool() }},
		{"string length 10 with 3 bytes", []byte{0, 10, 'a', 'b', 'c'}, func(d *Decoder) { _ = d.String() }},
		{"string length 65535 with 0 bytes", []byte{0xff, 0xff}, func(d *Decoder) { _ = d.String() }},
		{"bytes length 10 with 3 bytes", append(u32(10), 1, 2, 3), func(d *Decoder) { d.Bytes32() }},
		{"bytes length 4G with 0 bytes", u32(math.MaxUint32), func(d *Decoder) { d.Bytes32() }},
		{"int32s count 2 with 7 bytes", append(u32(2), make([]byte, 7)...), func(d *Decoder) { d.Int32s() }},
		{"int32s count 4G", u32(math.MaxUint32), func(d *Decoder) { d.Int32s() }},
		{"strings count 3 with 5 bytes", append(u32(3), make([]byte, 5)...), func(d *Decoder) { d.Strings() }},
		{"strings count 4G", append(u32(math.MaxUint32), 0, 0), func(d *Decoder) { d.Strings() }},
		{"strings with an overrunning element", append(u32(1), 0, 5, 'a'), func(d *Decoder) { d.Strings() }},
		{"count of 8-byte elements, 15 bytes", append(u32(2), make([]byte, 15)...), func(d *Decoder) { d.Count(8) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.body)
			tc.read(d)
			require.ErrorIs(t, d.Finish(), ErrMalformed)

			// The first error sticks, and later reads give zero values.
			assert.Zero(t, d.Int64())
			assert.Empty(t, d.String())
			assert.Nil(t, d.Bytes32())
			require.ErrorIs(t, d.Finish(), ErrMalformed)
		})
	}
}

func TestDecoderCountWithinBody(t *testing.T) {
	// Exactly enough bytes for the claimed elements is fine.
	body := binary.BigEndian.AppendUint32(nil, 3)
	body = append(body, make([]byte, 12)...)
	d := NewDecoder(body)
	assert.Equal(t, []int32{0, 0, 0}, d.Int32s())
	require.NoError(t, d.Finish())
}

// allocBytes reports the bytes allocated by f, on average over runs.
func allocBytes(runs int, f func()) uint64 {
	f() // warm up
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestDecoderHugeCountsDoNotAllocate checks that every count in every
// message is checked against the bytes that remain before anything is
// allocated for it.
func TestDecoderHugeCountsDoNotAllocate(t *testing.T) {
	u32 := func(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
	str := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint16(b, uint16(len(s))), s...) }
	huge := uint32(math.MaxUint32)

	metadataPrefix := str(nil, "c")
	metadataPrefix = u32(metadataPrefix, 1)                     // controller
	metadataPrefix = append(metadataPrefix, make([]byte, 8)...) // epoch

	partitionPrefix := append(bytes.Clone(metadataPrefix), u32(nil, 0)...) // no brokers
	partitionPrefix = u32(partitionPrefix, 1)                              // one topic
	partitionPrefix = str(partitionPrefix, "t")
	partitionPrefix = str(partitionPrefix, "")         // id
	partitionPrefix = append(partitionPrefix, 0, 1, 0) // rf, sealed
	partitionPrefix = u32(partitionPrefix, 1)          // one partition
	partitionPrefix = append(partitionPrefix, make([]byte, 12)...)

	cases := []struct {
		name string
		body []byte
		msg  Message
		want string // in the error: proves which check failed
	}{
		{"MetadataRequest topics", u32(nil, huge), &MetadataRequest{}, "count 4294967295"},
		{"MetadataRequest topics, 2 bytes each claimed", append(u32(nil, 1<<20), 0, 0), &MetadataRequest{}, "count 1048576"},
		{"ProduceResponse replicas", append(make([]byte, 36), u32(nil, huge)...), &ProduceResponse{}, "count 4294967295"},
		{"ProduceRequest batch", append(append(str(str(nil, "t"), ""), make([]byte, 8)...), u32(nil, huge)...), &ProduceRequest{}, "length 4294967295"},
		{"FetchResponse batches", append(make([]byte, 16), u32(nil, 1<<30)...), &FetchResponse{}, "length 1073741824"},
		{"MetadataResponse brokers", u32(bytes.Clone(metadataPrefix), huge), &MetadataResponse{}, "count 4294967295"},
		{"MetadataResponse topics", u32(u32(bytes.Clone(metadataPrefix), 0), huge), &MetadataResponse{}, "count 4294967295"},
		{"TopicInfo partitions", u32(append(str(str(nil, "t"), ""), 0, 1, 0), huge), &TopicInfo{}, "count 4294967295"},
		{"PartitionInfo replicas", append(u32(bytes.Clone(partitionPrefix), huge), make([]byte, 8)...), &MetadataResponse{}, "count 4294967295"},
		{"PartitionInfo active", append(u32(u32(bytes.Clone(partitionPrefix), 0), huge), make([]byte, 4)...), &MetadataResponse{}, "count 4294967295"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Unmarshal(tc.body, newLike(tc.msg))
			require.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tc.want)
			n := allocBytes(20, func() { _ = Unmarshal(tc.body, newLike(tc.msg)) })
			assert.Less(t, n, uint64(4096), "bytes allocated to reject a %d-byte body", len(tc.body))
		})
	}
}

// A Sized message's EncodedSize is the exact length of its encoding, so the
// one buffer a frame is built in never grows.
func TestEncodedSizeIsExact(t *testing.T) {
	cases := append(messageCases(),
		messageCase{"ReplicateRequest/batch", &ReplicateRequest{Topic: "orders", Partition: 2, LeaderEpoch: 3, LeaderID: 1, HighWatermark: 77, Batch: []byte("abc")}},
		messageCase{"ReplicateRequest/batches", &ReplicateRequest{Topic: "orders", Batches: [][]byte{[]byte("ab"), nil, []byte("cdef")}}},
	)
	sized := 0
	for _, tc := range cases {
		s, ok := tc.msg.(Sized)
		if !ok {
			continue
		}
		sized++
		assert.Equal(t, len(Marshal(nil, tc.msg)), s.EncodedSize(), tc.name)
		buf := newFrame(tc.msg, 0)
		frame := Marshal(buf, tc.msg)
		assert.Equal(t, frameHead+s.EncodedSize(), len(frame), tc.name)
		assert.Equal(t, cap(buf), cap(frame), "%s: the frame buffer grew", tc.name)
		assert.Same(t, unsafe.SliceData(buf), unsafe.SliceData(frame), "%s: the frame buffer grew", tc.name)
		if len(frame) < bufpool.MinSize {
			assert.Equal(t, cap(frame), len(frame), "%s: the frame buffer is oversized", tc.name)
		}
	}
	assert.GreaterOrEqual(t, sized, 5, "ProduceRequest, FetchResponse and ReplicateRequest cases")
}

// Batches go out as one Batch field holding the slices back to back: the
// follower decodes what a concatenated Batch would give.
func TestReplicateRequestBatches(t *testing.T) {
	parts := [][]byte{[]byte("first"), []byte(""), []byte("second\x00\xff")}
	split := &ReplicateRequest{Topic: "t", Partition: 1, LeaderEpoch: 2, LeaderID: 3, HighWatermark: 4, Batches: parts}
	whole := &ReplicateRequest{Topic: "t", Partition: 1, LeaderEpoch: 2, LeaderID: 3, HighWatermark: 4, Batch: bytes.Join(parts, nil)}
	enc := Marshal(nil, split)
	assert.Equal(t, Marshal(nil, whole), enc)
	var got ReplicateRequest
	require.NoError(t, Unmarshal(enc, &got))
	assert.Equal(t, *whole, got)
}

// TestGatheredFramesEqualCopiedOnes: a request whose batches are written
// where they lie goes out as the same bytes as one copied into its frame,
// above and below the sizes from which they are gathered.
func TestGatheredFramesEqualCopiedOnes(t *testing.T) {
	fill := func(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }
	cases := []struct {
		name     string
		msg      Message
		gathered bool
	}{
		{"produce/small", &ProduceRequest{Topic: "t", TopicID: "id", Partition: 1, TimeoutMs: 5, Batch: fill(100, 1)}, false},
		{"produce/empty", &ProduceRequest{Topic: "t"}, false},
		{"produce/large", &ProduceRequest{Topic: "t", TopicID: "id", Partition: 1, TimeoutMs: 5, Batch: fill(gatherMin, 2)}, true},
		{"replicate/batch", &ReplicateRequest{Topic: "t", Partition: 2, LeaderEpoch: 3, LeaderID: 4, HighWatermark: 5, Batch: fill(100<<10, 3)}, true},
		{"replicate/batches", &ReplicateRequest{Topic: "t", Batches: [][]byte{fill(20<<10, 4), fill(30<<10, 5)}}, true},
		{"replicate/many-small", &ReplicateRequest{Topic: "t", Batches: slices.Repeat([][]byte{fill(1<<10, 6)}, 64)}, false},
	}
	for _, tc := range cases {
		want := finishFrame(Marshal(make([]byte, frameHead), tc.msg), 7, Version1, 9)
		bufs, own := frameOf(tc.msg, 7, Version1, 9)
		assert.Equal(t, want, bytes.Join(bufs, nil), tc.name)
		assert.Equal(t, tc.gathered, len(bufs) > 1, "%s: gathered", tc.name)
		assert.Equal(t, tc.gathered, own == nil, "%s: a gathered frame's head is not pooled", tc.name)
		var back ProduceRequest
		if p, ok := tc.msg.(*ProduceRequest); ok {
			require.NoError(t, Unmarshal(bytes.Join(bufs, nil)[frameHead:], &back), tc.name)
			assert.Equal(t, *p, back, tc.name)
		}
	}
}
