package record_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/record"
)

var codecs = []struct {
	name  string
	codec int
}{{"none", record.CompressionNone}, {"gzip", record.CompressionGzip}, {"snappy", record.CompressionSnappy},
	{"lz4", record.CompressionLZ4}, {"zstd", record.CompressionZstd}}

// kafkaRecords are records as a Kafka producer may send them: null and
// empty keys and values, headers with null values, timestamps out of
// order.
func kafkaRecords() []record.Record {
	return []record.Record{
		{Timestamp: 1_700_000_000_500, Key: []byte("k1"), Value: []byte("v1"), Headers: []record.Header{{Key: "h", Value: []byte("x")}}},
		{Timestamp: 1_700_000_000_100, Key: nil, Value: []byte("null key")},
		{Timestamp: 1_700_000_000_900, Key: []byte{}, Value: nil, Headers: []record.Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte{}}}},
		{Timestamp: 1_700_000_000_200, Key: []byte("k4"), Value: []byte{}},
	}
}

// kmsgRecords decodes a Kafka batch with franz-go's codec: its header, and
// (uncompressed) its records.
func kmsgRecords(t *testing.T, kb []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	require.NoError(t, rb.ReadFrom(kb))
	var recs []kmsg.Record
	if rb.Attributes&7 != 0 {
		return rb, nil
	}
	data := rb.Records
	for len(data) > 0 {
		n, w := binary.Varint(data)
		require.Greater(t, w, 0)
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(data[:w+int(n)]))
		recs = append(recs, r)
		data = data[w+int(n):]
	}
	return rb, recs
}

// A Kafka batch in each codec goes through as a producer sends it, a
// leader stamps it and a consumer reads it: every record's key (null
// distinct from empty), value (likewise), headers and timestamp kept, its
// offset from the base the leader gave; franz-go's codec reads the same
// batch, and the Kafka batch's CRC is what the producer computed.
func TestKafkaBatchRoundTrip(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			in := kafkaRecords()
			kb, err := record.AppendKafkaBatch(nil, in, record.KafkaBatchOptions{Compression: c.codec, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 40})
			require.NoError(t, err)
			require.NoError(t, record.CheckKafkaBatch(kb))
			rb, krecs := kmsgRecords(t, kb)
			assert.Equal(t, int32(len(in)), rb.NumRecords)
			assert.Equal(t, int16(c.codec), rb.Attributes&7)
			assert.Equal(t, int64(1_700_000_000_100), rb.FirstTimestamp)
			assert.Equal(t, int64(1_700_000_000_900), rb.MaxTimestamp)
			assert.Equal(t, int32(crc32.Checksum(kb[21:], crc32.MakeTable(crc32.Castagnoli))), rb.CRC)
			if c.codec == record.CompressionNone {
				require.Len(t, krecs, len(in))
				for i, r := range krecs {
					assert.Equal(t, in[i].Key, r.Key, "record %d key", i)
					assert.Equal(t, in[i].Value, r.Value, "record %d value", i)
					assert.Equal(t, in[i].Timestamp-rb.FirstTimestamp, r.TimestampDelta64)
				}
			}

			b, err := record.WrapKafka(kb)
			require.NoError(t, err)
			b.Stamp(100, 3, 1_800_000_000_000)
			require.NoError(t, b.Validate())
			assert.Equal(t, int64(100), b.BaseOffset())
			assert.Equal(t, int64(104), b.NextOffset())
			assert.Equal(t, int32(3), b.LeaderEpoch())
			id, epoch, seq := b.Producer()
			assert.Equal(t, []any{int64(7), int16(1), int32(40)}, []any{id, epoch, seq})
			inner, _ := kmsgRecords(t, b.Kafka())
			assert.Equal(t, int64(100), inner.FirstOffset)
			assert.Equal(t, int32(3), inner.PartitionLeaderEpoch)
			assert.Equal(t, rb.CRC, inner.CRC, "stamping leaves the Kafka batch's CRC alone")

			out, err := b.Decode()
			require.NoError(t, err)
			require.Len(t, out, len(in))
			for i, r := range out {
				assert.Equal(t, int64(100+i), r.Offset)
				assert.Equal(t, in[i].Timestamp, r.Timestamp, "record %d timestamp", i)
				assert.Equal(t, in[i].Key, r.Key, "record %d key", i)
				assert.Equal(t, in[i].Value, r.Value, "record %d value", i)
				assert.Equal(t, in[i].Headers, r.Headers, "record %d headers", i)
			}
		})
	}
}

// A batch franz-go's codec builds is read as it wrote it.
func TestKafkaBatchFromFranzGo(t *testing.T) {
	var recs []byte
	for i, v := range []string{"a", "bb", "ccc"} {
		r := kmsg.Record{TimestampDelta64: int64(i * 10), OffsetDelta: int32(i), Key: []byte(fmt.Sprint("key", i)), Value: []byte(v),
			Headers: []kmsg.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}}
		r.Length = int32(len(recordBody(&r))) // AppendTo writes Length as given
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: 2, FirstTimestamp: 1000, MaxTimestamp: 1020, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: 3, Records: recs}
	kb := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(kb[8:], uint32(len(kb)-12))
	binary.BigEndian.PutUint32(kb[17:], crc32.Checksum(kb[21:], crc32.MakeTable(crc32.Castagnoli)))
	require.NoError(t, record.CheckKafkaBatch(kb))
	b, err := record.WrapKafka(kb)
	require.NoError(t, err)
	b.Stamp(5, 1, 2000)
	out, err := b.Decode()
	require.NoError(t, err)
	require.Len(t, out, 3)
	for i, r := range out {
		assert.Equal(t, int64(5+i), r.Offset)
		assert.Equal(t, int64(1000+10*i), r.Timestamp)
		assert.Equal(t, fmt.Sprint("key", i), string(r.Key))
		assert.Equal(t, []record.Header{{Key: "n", Value: []byte(fmt.Sprint(i))}}, r.Headers)
	}
}

// recordBody is a kmsg record's bytes after its length.
func recordBody(r *kmsg.Record) []byte {
	c := *r
	c.Length = 0
	b := c.AppendTo(nil)
	return b[1:] // a zero length is one varint byte
}

// A LogAppendTime batch's records take the leader's append time, which
// stamping writes into the Kafka batch (with its CRC).
func TestKafkaBatchLogAppendTime(t *testing.T) {
	kb, err := record.AppendKafkaBatch(nil, kafkaRecords(), record.NoProducer)
	require.NoError(t, err)
	kb[22] |= 0x08 // timestamp type LogAppendTime
	binary.BigEndian.PutUint32(kb[17:], crc32.Checksum(kb[21:], crc32.MakeTable(crc32.Castagnoli)))
	b, err := record.WrapKafka(kb)
	require.NoError(t, err)
	b.Stamp(0, 1, 1_900_000_000_000)
	require.NoError(t, b.Validate())
	out, err := b.Decode()
	require.NoError(t, err)
	for _, r := range out {
		assert.Equal(t, int64(1_900_000_000_000), r.Timestamp)
	}
}

// The LogAppendTime option builds such a batch: a producer without clocks
// of its own (the native Go client's idempotent producer) gets the
// leader's append time on every record, as a batch of magic 1 does.
func TestKafkaBatchLogAppendTimeOption(t *testing.T) {
	opts := record.KafkaBatchOptions{ProducerID: 9, ProducerEpoch: 0, BaseSequence: 3, LogAppendTime: true}
	kb, err := record.AppendKafkaBatch(nil, []record.Record{{Value: []byte("a")}, {Key: []byte("k"), Value: []byte("b")}}, opts)
	require.NoError(t, err)
	rb, _ := kmsgRecords(t, kb)
	assert.Equal(t, int16(0x08), rb.Attributes&0x08, "timestamp type LogAppendTime")
	b, err := record.WrapKafka(kb)
	require.NoError(t, err)
	b.Stamp(7, 2, 1_900_000_000_000)
	require.NoError(t, b.Validate())
	out, err := b.Decode()
	require.NoError(t, err)
	require.Len(t, out, 2)
	for _, r := range out {
		assert.Equal(t, int64(1_900_000_000_000), r.Timestamp)
	}
	assert.Equal(t, int64(1_900_000_000_000), b.MaxTimestamp())

	plain, err := record.AppendKafkaBatch(nil, []record.Record{{Value: []byte("a")}}, record.NoProducer)
	require.NoError(t, err)
	rb, _ = kmsgRecords(t, plain)
	assert.Zero(t, rb.Attributes&0x08, "create time unless asked")
}

// KafkaEncodedSize bounds what a record takes in an uncompressed Kafka
// batch, wherever it sits and whatever its timestamp: a batch is never
// larger than its header and its records' bounds.
func TestKafkaEncodedSizeBoundsTheBatch(t *testing.T) {
	big := make([]byte, 300)
	cases := map[string][]record.Record{
		"kafka records":               kafkaRecords(),
		"empty":                       {{}},
		"null key and value, headers": {{Key: nil, Value: nil, Headers: []record.Header{{Key: "", Value: nil}, {Key: "h", Value: big}}}},
		"large fields":                {{Key: big, Value: make([]byte, 70_000), Timestamp: -1 << 62}, {Timestamp: 1 << 62}},
	}
	many := make([]record.Record, 20_000) // offset deltas of three varint bytes
	for i := range many {
		many[i] = record.Record{Value: []byte{byte(i)}}
	}
	cases["many"] = many
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			bound := record.KafkaHeaderSize
			for i := range recs {
				bound += recs[i].KafkaEncodedSize()
			}
			kb, err := record.AppendKafkaBatch(nil, recs, record.NoProducer)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(kb), bound)
		})
	}
}

// A batch of magic 1 is served to a Kafka consumer as an uncompressed
// Kafka batch at its offsets and epoch, each record's timestamp the
// append time.
func TestMagic1AsKafkaBatch(t *testing.T) {
	b, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: nil, Value: []byte("w"),
		Headers: []record.Header{{Key: "h", Value: []byte("1")}}}})
	require.NoError(t, err)
	record.Batch(b).Stamp(42, 7, 1_700_000_000_000)
	kb, err := record.Batch(b).AppendKafka(nil)
	require.NoError(t, err)
	rb, recs := kmsgRecords(t, kb)
	assert.Equal(t, int64(42), rb.FirstOffset)
	assert.Equal(t, int32(7), rb.PartitionLeaderEpoch)
	assert.Equal(t, int64(1_700_000_000_000), rb.FirstTimestamp)
	require.Len(t, recs, 2)
	assert.Nil(t, recs[1].Key)
	assert.Equal(t, "w", string(recs[1].Value))
	assert.Equal(t, "h", recs[1].Headers[0].Key)
}

// A native batch served to a Kafka consumer keeps every record: keys and
// values null or empty or long, headers with empty keys and null values,
// hundreds of records (the destination grows), appended after what the
// destination holds.
func TestMagic1AsKafkaBatchKeepsEveryRecord(t *testing.T) {
	var recs []record.Record
	for i := range 300 {
		r := record.Record{Value: bytes.Repeat([]byte{byte(i)}, i*7%1500)}
		switch i % 5 {
		case 0:
			r.Key = nil
		case 1:
			r.Key, r.Value = []byte{}, nil
		case 2:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
			r.Headers = []record.Header{{Key: "", Value: nil}, {Key: "h", Value: []byte{}}, {Key: "trace", Value: []byte("abc")}}
		case 3:
			r.Key, r.Value = bytes.Repeat([]byte("k"), 200), []byte{}
		}
		recs = append(recs, r)
	}
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	batch := record.Batch(b)
	batch.Stamp(1<<40, 9, 1_700_000_000_123)
	stored, err := batch.Decode()
	require.NoError(t, err)
	for _, dst := range [][]byte{nil, []byte("prefix"), make([]byte, 3, 1<<20)} {
		kb, err := batch.AppendKafka(dst)
		require.NoError(t, err)
		require.True(t, bytes.Equal(dst, kb[:len(dst)]), "what dst held is kept")
		requireKafkaOf(t, batch, stored, kb[len(dst):])
		require.LessOrEqual(t, len(kb)-len(dst), batch.KafkaSizeBound())
	}
}

// What a producer may not send is refused before anything is written.
func TestCheckKafkaBatchRefuses(t *testing.T) {
	good, err := record.AppendKafkaBatch(nil, kafkaRecords(), record.NoProducer)
	require.NoError(t, err)
	recrc := func(kb []byte) []byte {
		binary.BigEndian.PutUint32(kb[17:], crc32.Checksum(kb[21:], crc32.MakeTable(crc32.Castagnoli)))
		return kb
	}
	edit := func(f func(kb []byte) []byte) []byte { return f(append([]byte{}, good...)) }
	for name, kb := range map[string][]byte{
		"short":              good[:60],
		"truncated":          good[:len(good)-1],
		"bad CRC":            edit(func(kb []byte) []byte { kb[len(kb)-1] ^= 1; return kb }),
		"magic 1":            edit(func(kb []byte) []byte { kb[16] = 1; return recrc(kb) }),
		"control batch":      edit(func(kb []byte) []byte { kb[22] |= 0x20; return recrc(kb) }),
		"transactional":      edit(func(kb []byte) []byte { kb[22] |= 0x10; return recrc(kb) }),
		"unknown codec":      edit(func(kb []byte) []byte { kb[22] |= 0x05; return recrc(kb) }),
		"base offset not 0":  edit(func(kb []byte) []byte { binary.BigEndian.PutUint64(kb[0:], 9); return kb }),
		"wrong count":        edit(func(kb []byte) []byte { binary.BigEndian.PutUint32(kb[57:], 5); return recrc(kb) }),
		"last offset delta":  edit(func(kb []byte) []byte { binary.BigEndian.PutUint32(kb[23:], 9); return recrc(kb) }),
		"length field wrong": edit(func(kb []byte) []byte { binary.BigEndian.PutUint32(kb[8:], 10); return kb }),
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, record.CheckKafkaBatch(kb), record.ErrInvalid)
			_, err := record.WrapKafka(kb)
			assert.ErrorIs(t, err, record.ErrInvalid)
		})
	}
}

// A batch of magic 2 flagged as control or transactional is refused from
// a producer of either protocol, though it would validate.
func TestCheckProducedRefusesControlAndTransactional(t *testing.T) {
	kb, err := record.AppendKafkaBatch(nil, kafkaRecords(), record.NoProducer)
	require.NoError(t, err)
	b, err := record.WrapKafka(kb)
	require.NoError(t, err)
	require.NoError(t, b.CheckProduced())
	for _, bit := range []byte{0x10, 0x20} {
		c := append(record.Batch(nil), b...)
		c[record.HeaderSize+22] |= bit
		binary.BigEndian.PutUint32(c[record.HeaderSize+17:], crc32.Checksum(c[record.HeaderSize+21:], crc32.MakeTable(crc32.Castagnoli)))
		c.Stamp(0, 0, 0)
		require.NoError(t, c.Validate(), "it validates")
		assert.ErrorIs(t, c.CheckProduced(), record.ErrInvalid, "attribute bit %#x", bit)
	}
}
