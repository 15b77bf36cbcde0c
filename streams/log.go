package streams

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"

	"gostream/durable"
	"gostream/record"
)

// A stream is the one partition of its topic. Every append is one batch,
// so it is in the log whole or not at all. The key's one byte says what a
// record is; the first record of every batch carries the batch's
// metadata in headers.
const (
	kindData   = 'd' // stream data: one append's body (JSON mode: its values, joined by commas)
	kindInit   = 'i' // the stream is ready: its creation (and a fork's copy) is complete
	kindClose  = 'c' // the stream is closed
	kindFiller = 'f' // holds an offset and nothing else (a fork's copy of a source's control record)
)

// Header keys of a batch's first record.
const (
	headerPos       = "p"   // bytes of stream data before the batch (8 bytes, big endian)
	headerProducer  = "pid" // idempotent producer id
	headerEpoch     = "pep" // its epoch (8 bytes)
	headerSeq       = "psq" // its sequence (8 bytes)
	headerStreamSeq = "sq"  // the Stream-Seq of the append
)

// logRecord is one record of a stream's log.
type logRecord struct {
	Offset int64
	Kind   byte
	Data   []byte
}

// validKind reports whether k is a kind of record a stream's log holds.
func validKind(k byte) bool {
	switch k {
	case kindData, kindInit, kindClose, kindFiller:
		return true
	}
	return false
}

// logBatch is one batch of a stream's log.
type logBatch struct {
	pos       int64 // bytes of data before it
	producer  *durable.Producer
	streamSeq *string
	records   []logRecord
	next      int64 // offset after it (decoded batches)
}

func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func (b *logBatch) encode() (record.Batch, error) {
	rs := make([]record.Record, len(b.records))
	for i, r := range b.records {
		rs[i] = record.Record{Key: []byte{r.Kind}, Value: r.Data}
	}
	h := []record.Header{{Key: headerPos, Value: be64(b.pos)}}
	if p := b.producer; p != nil {
		h = append(h, record.Header{Key: headerProducer, Value: []byte(p.ID)},
			record.Header{Key: headerEpoch, Value: be64(p.Epoch)}, record.Header{Key: headerSeq, Value: be64(p.Seq)})
	}
	if b.streamSeq != nil {
		h = append(h, record.Header{Key: headerStreamSeq, Value: []byte(*b.streamSeq)})
	}
	rs[0].Headers = h
	return record.AppendBatch(nil, rs)
}

// eachBatch decodes the batches of buf in order and calls fn with each
// until it returns false; a batch that is not a stream's is an error.
func eachBatch(buf []byte, fn func(*logBatch) bool) error {
	var derr error
	err := record.Batches(buf, func(rb record.Batch) bool {
		b, err := decodeBatch(rb)
		if err != nil {
			derr = err
			return false
		}
		return fn(b)
	})
	if err == nil {
		err = derr
	}
	return err
}

// errNotStreamRecord is a record that is not what a stream's leader
// writes.
var errNotStreamRecord = errors.New("not a record of a Durable Streams log")

func decodeBatch(b record.Batch) (*logBatch, error) {
	out := &logBatch{next: b.NextOffset()}
	first := true
	var derr error
	err := b.Records(func(r *record.Record) bool {
		if len(r.Key) != 1 {
			derr = fmt.Errorf("%w: record %d has a key of %d bytes", errNotStreamRecord, r.Offset, len(r.Key))
			return false
		}
		if !validKind(r.Key[0]) {
			derr = fmt.Errorf("%w: record %d is of kind %q", errNotStreamRecord, r.Offset, r.Key[0])
			return false
		}
		if first {
			first = false
			var p durable.Producer
			var hasP bool
			for _, h := range r.Headers {
				switch h.Key {
				case headerPos, headerEpoch, headerSeq:
					if len(h.Value) != 8 {
						derr = fmt.Errorf("%w: header %s of record %d has %d bytes", errNotStreamRecord, h.Key, r.Offset, len(h.Value))
						return false
					}
					v := int64(binary.BigEndian.Uint64(h.Value))
					switch h.Key {
					case headerPos:
						out.pos = v
					case headerEpoch:
						p.Epoch = v
					default:
						p.Seq = v
					}
				case headerProducer:
					p.ID, hasP = string(h.Value), true
				case headerStreamSeq:
					s := string(h.Value)
					out.streamSeq = &s
				}
			}
			if hasP {
				out.producer = &p
			}
		}
		out.records = append(out.records, logRecord{Offset: r.Offset, Kind: r.Key[0], Data: r.Value})
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// streamData is what an append's body is stored as: the body, or in JSON
// mode its values (an array flattened one level) joined by commas. An
// empty array is refused, but at creation, where it creates nothing.
func streamData(ct string, body []byte, creating bool) ([]byte, error) {
	if !durable.IsJSON(ct) {
		return body, nil
	}
	if creating && (len(body) == 0 || isEmptyArray(body)) {
		return nil, nil
	}
	vals, err := durable.SplitJSON(body)
	if err != nil {
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	return bytes.Join(vals, []byte{','}), nil
}

func isEmptyArray(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}
