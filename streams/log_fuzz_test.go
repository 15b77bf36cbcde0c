package streams

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gostream/durable"
	"gostream/record"
)

// FuzzDecodeBatch: a stream's leader decodes every batch of its log when
// it rebuilds the stream's state, from bytes read off the disk. Any bytes,
// and any batch with a record of any key and header (a valid frame, past
// the CRC), either fail to decode with an error or give a batch that
// encodes back into one that decodes to the same thing; nothing panics.
func FuzzDecodeBatch(f *testing.F) {
	seq := "0042"
	for _, b := range []*logBatch{
		{pos: 0, records: []logRecord{{Kind: kindInit}}},
		{pos: 17, producer: &durable.Producer{ID: "p1", Epoch: 3, Seq: 9}, streamSeq: &seq,
			records: []logRecord{{Kind: kindData, Data: []byte("hello")}, {Kind: kindClose}}},
		{pos: 1 << 40, records: []logRecord{{Kind: kindFiller}, {Kind: kindData, Data: []byte(`{"a":1},[2]`)}}},
	} {
		enc, err := b.encode()
		require.NoError(f, err)
		f.Add([]byte(enc), []byte{kindData}, headerPos, be64(3), []byte("v"))
		f.Add([]byte(enc[:len(enc)/2]), []byte{kindClose}, headerEpoch, []byte{1}, []byte(nil))
	}
	f.Add([]byte(nil), []byte("dd"), headerProducer, []byte("p"), []byte("x"))
	f.Add([]byte(nil), []byte{'z'}, headerStreamSeq, []byte("1"), []byte("x"))
	f.Fuzz(func(t *testing.T, data, key []byte, hkey string, hval, value []byte) {
		rb, err := record.AppendBatch(nil, []record.Record{{Key: key, Value: value, Headers: []record.Header{{Key: hkey, Value: hval}}}})
		require.NoError(t, err)
		data = append(data, rb...)
		_ = record.Batches(data, func(rb record.Batch) bool {
			b, err := decodeBatch(rb)
			if err != nil {
				return false
			}
			require.NotEmpty(t, b.records, "a decoded batch has records")
			again, err := b.encode()
			require.NoError(t, err)
			b2, err := decodeBatch(again)
			require.NoError(t, err, "a decoded batch encodes into one that decodes")
			require.Equal(t, b.pos, b2.pos)
			require.Equal(t, b.producer, b2.producer)
			require.Equal(t, b.streamSeq, b2.streamSeq)
			require.Len(t, b2.records, len(b.records))
			for i := range b.records {
				require.Equal(t, b.records[i].Kind, b2.records[i].Kind)
				require.Equal(t, string(b.records[i].Data), string(b2.records[i].Data))
			}
			return true
		})
	})
}
