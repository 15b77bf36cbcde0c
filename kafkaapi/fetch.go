package kafkaapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/internal/bufpool"
	"gostream/record"
	"gostream/transport"
)

// kerrTransactionsUnsupported answers what needs transactions, which
// gostream does not have.
var kerrTransactionsUnsupported = kerr.InvalidRequest.Code

// fetched is one partition's read.
type fetched struct {
	res broker.FetchResult
	err error
}

// size is the bytes of batches the read found.
func (f fetched) size() int {
	if f.res.Range != nil {
		return f.res.Range.Len()
	}
	return len(f.res.Batches)
}

// fetch reads each partition from this node's leader replica: at once,
// and when that found less than MinBytes, again, waiting up to MaxWait for
// the first partition to have records. Sessions (KIP-227) are not kept:
// the answer's session id is 0, so clients send full fetches.
func (s *Server) fetch(ctx context.Context, req *kmsg.FetchRequest) (response, error) {
	type part struct {
		topic string
		req   *kmsg.FetchRequestTopicPartition
		got   fetched
	}
	var parts []*part
	for ti := range req.Topics {
		t := &req.Topics[ti]
		for pi := range t.Partitions {
			parts = append(parts, &part{topic: t.Topic, req: &t.Partitions[pi]})
		}
	}
	rangeMin := 0
	if sendsFiles(ctx) {
		rangeMin = transport.SendFileMin
	}
	read := func(ctx context.Context, p *part, wait time.Duration) fetched {
		max := int(p.req.PartitionMaxBytes)
		if max <= 0 {
			max = 1
		}
		res, err := s.cfg.Core.Fetch(ctx, principalOf(ctx), broker.FetchRequest{Topic: p.topic, Partition: p.req.Partition,
			Offset: p.req.FetchOffset, MaxBytes: max, MaxWait: wait, RangeMin: rangeMin}, nil)
		return fetched{res, err}
	}
	total := 0
	for _, p := range parts {
		p.got = read(ctx, p, 0)
		total += p.got.size()
	}
	if wait := time.Duration(req.MaxWaitMillis) * time.Millisecond; total < int(max(req.MinBytes, 1)) && wait > 0 && len(parts) > 0 {
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range parts {
			if p.got.err != nil || p.got.size() > 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := read(wctx, p, wait)
				if errors.Is(got.err, context.Canceled) {
					return
				}
				mu.Lock()
				release(p.got)
				p.got = got
				mu.Unlock()
				if got.size() > 0 {
					cancel()
				}
			}()
		}
		wg.Wait()
		cancel()
	}
	budget := int(req.MaxBytes)
	if budget <= 0 {
		budget = 1 << 30
	}
	a := &fetchAnswer{version: req.Version}
	a.reads = make([]fetched, len(parts))
	byTopic := map[string]int{}
	for i, p := range parts {
		a.reads[i] = p.got
		ti, ok := byTopic[p.topic]
		if !ok {
			ti = len(a.topics)
			a.topics = append(a.topics, fetchTopic{name: p.topic})
			byTopic[p.topic] = ti
		}
		fp := fetchPartition{partition: p.req.Partition}
		if p.got.err != nil {
			fp.errorCode = s.code(p.got.err)
			fp.highWatermark, fp.lastStable, fp.logStart = -1, -1, -1
		} else {
			fp.highWatermark, fp.lastStable, fp.logStart = p.got.res.HighWatermark, p.got.res.HighWatermark, p.got.res.LogStartOffset
			// The request's MaxBytes bounds the answer, but for its first
			// batch, which goes whole.
			if budget > 0 {
				kb, n, err := kafkaBatches(p.got.res.Batches, &a.mem)
				if r := p.got.res.Range; r != nil {
					kb, n, err = kafkaRangeBatches(r, &a.mem)
				}
				if err != nil {
					fp.errorCode = s.code(err)
				} else {
					fp.batches = kb
					budget -= n
				}
			}
		}
		a.topics[ti].partitions = append(a.topics[ti].partitions, fp)
	}
	return a, nil
}

// fetchAnswer is a Fetch answer. It is the one answer encoded here
// rather than by kmsg, whose encoder copies every record batch into the
// answer's buffer: its batches are written from the reads' buffers where
// they are, or from their segment files (sendfile), given back once the
// answer is written (docs/kafka.md, "Serving a fetch").
// TestFetchAnswerEncoding checks the encoding byte for byte against
// kmsg's, for every version served.
type fetchAnswer struct {
	version int16
	topics  []fetchTopic
	reads   []fetched
	mem     lentMemory // given back once written
}

type fetchTopic struct {
	name       string
	partitions []fetchPartition
}

// fetchPartition is one partition's part of a Fetch answer. The fields
// this server never sets (aborted transactions, the preferred read
// replica, the diverging epoch, the current leader, a snapshot id) are
// encoded as absent.
type fetchPartition struct {
	partition                           int32
	errorCode                           int16
	highWatermark, lastStable, logStart int64
	batches                             []piece // Kafka record batches, in order
}

// piece is one Kafka record batch of a partition's record set, or a run
// of them: bytes, or a range of a segment file that holds them, sent from
// the file on a plain connection.
type piece struct {
	b    []byte
	file *transport.FileRange
}

func (p piece) len() int {
	if p.file != nil {
		return int(p.file.Length)
	}
	return len(p.b)
}

// inlineBatch is the size under which a batch is copied into the
// answer's encoding rather than written where it is: for a small batch,
// one more buffer in the writev costs more than the copy.
const inlineBatch = 4 << 10

func (a *fetchAnswer) appendFrame(dst []byte, corr int32) ([]byte, []ref) {
	flex := a.version >= 12
	start := len(dst)
	dst = appendHeader(dst, corr, flex)
	var refs []ref
	referred := 0
	dst = binary.BigEndian.AppendUint32(dst, 0) // throttle
	if a.version >= 7 {
		dst = binary.BigEndian.AppendUint16(dst, 0) // error code
		dst = binary.BigEndian.AppendUint32(dst, 0) // session id: none, full fetches
	}
	dst = appendLen(dst, len(a.topics), flex)
	for _, t := range a.topics {
		if flex {
			dst = binary.AppendUvarint(dst, uint64(len(t.name)+1))
		} else {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(t.name)))
		}
		dst = append(dst, t.name...)
		dst = appendLen(dst, len(t.partitions), flex)
		for _, p := range t.partitions {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.partition))
			dst = binary.BigEndian.AppendUint16(dst, uint16(p.errorCode))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.highWatermark))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.lastStable))
			if a.version >= 5 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.logStart))
			}
			dst = appendLen(dst, -1, flex) // aborted transactions: null
			if a.version >= 11 {
				dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // preferred read replica: -1
			}
			n := 0
			for _, b := range p.batches {
				n += b.len()
			}
			// Never null: librdkafka refuses a null record set.
			dst = appendLen(dst, n, flex)
			for _, b := range p.batches {
				if b.file == nil && len(b.b) < inlineBatch {
					dst = append(dst, b.b...)
				} else {
					refs = append(refs, ref{at: len(dst), b: b.b, file: b.file})
					referred += b.len()
				}
			}
			if flex {
				dst = append(dst, 0) // the partition's tagged fields: none
			}
		}
		if flex {
			dst = append(dst, 0) // the topic's
		}
	}
	if flex {
		dst = append(dst, 0) // the answer's
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4+referred))
	return dst, refs
}

// appendLen appends the length of an array or of bytes (-1: null): an
// int32, or for a flexible version the compact form, length+1 as an
// unsigned varint.
func appendLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(dst, uint64(n+1))
	}
	return binary.BigEndian.AppendUint32(dst, uint32(int32(n)))
}

func (a *fetchAnswer) release() {
	a.mem.giveBack()
	for _, f := range a.reads {
		release(f)
	}
	a.reads = nil
}

// release gives a read's buffer back.
func release(f fetched) {
	if f.res.Release != nil {
		f.res.Release()
	}
}

// lentMemory is the memory an answer's batches are written from, besides
// the reads' own buffers: chunks of segment files (rangeChunks) and
// batches of magic 1 converted (from bufpool, by size), given back once
// the answer is written.
type lentMemory struct {
	chunks    []*[]byte
	converted [][]byte
}

func (m *lentMemory) giveBack() {
	for _, c := range m.chunks {
		rangeChunks.Put(c)
	}
	for _, c := range m.converted {
		bufpool.Put(c)
	}
	m.chunks, m.converted = nil, nil
}

// kafkaBatches are the Kafka batches of a read, and their bytes: a
// batch of magic 2 is the Kafka batch it carries, written from the read's
// buffer (storage checked its checksums on the read); one of magic 1 is
// converted, into memory taken from bufpool and added to mem.
func kafkaBatches(b []byte, mem *lentMemory) ([]piece, int, error) {
	var out []piece
	total := 0
	for off := 0; off < len(b); {
		n, err := record.FrameSize(b[off:], len(b)-off)
		if err != nil {
			return nil, 0, err
		}
		kb, err := kafkaBatch(b[off:off+n], mem)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, piece{b: kb})
		total += len(kb)
		off += n
	}
	return out, total, nil
}

// kafkaBatch is the Kafka batch of one stored batch: the one it carries
// (magic 2), or its records converted (magic 1) into a buffer of its
// size from bufpool, added to mem.
func kafkaBatch(b []byte, mem *lentMemory) ([]byte, error) {
	if b[record.MagicOffset] == record.MagicKafka {
		return b[record.HeaderSize:], nil
	}
	kb := bufpool.Get(record.Batch(b).KafkaSizeBound())[:0]
	var convErr error
	err := record.Batches(b, func(rb record.Batch) bool {
		kb, convErr = rb.AppendKafka(kb)
		return convErr == nil
	})
	if err == nil {
		err = convErr
	}
	mem.converted = append(mem.converted, kb) // one that grew is left to the collector
	return kb, err
}

// lentRange is what a fetch's batches lent as a range of a segment file
// offer (storage.Range).
type lentRange interface {
	File() *os.File
	Position() int64
	Len() int
	ReadAt(p []byte, off int64) (int, error)
}

// rangeChunk is how much of a range kafkaRangeBatches reads at a time
// for its small batches.
const rangeChunk = 64 << 10

// rangeChunks are kafkaRangeBatches' buffers, given back with the answer
// that was written from them.
var rangeChunks = sync.Pool{New: func() any { b := make([]byte, rangeChunk); return &b }}

// kafkaRangeBatches are the Kafka batches of a read lent as a range of a
// segment file, and their bytes. Each stored batch of magic 2 whose
// Kafka batch is at least transport.SendFileMin bytes is that part of the
// file, sent from it (its 34-byte header is left out: the Kafka batch is
// the rest), found by reading its header alone; smaller batches are read,
// rangeChunk bytes at a time, and those of magic 1 converted, as
// kafkaBatches does. The chunks read come from rangeChunks, and are
// added to mem for the answer to give back once written. Storage
// lent only batches it had checked, so they are not checked again here.
func kafkaRangeBatches(r lentRange, mem *lentMemory) ([]piece, int, error) {
	var (
		out   []piece
		total int
		hdr   [record.HeaderSize]byte
		chunk []byte // the range's bytes [at, at+len(chunk))
		at    int64
		end   = int64(r.Len())
	)
	readAt := func(b []byte, off int64) error {
		if _, err := r.ReadAt(b, off); err != nil {
			return fmt.Errorf("read %s at %d: %w", r.File().Name(), r.Position()+off, err)
		}
		return nil
	}
	for off := int64(0); off < end; {
		h := hdr[:]
		if off >= at && off+record.HeaderSize <= at+int64(len(chunk)) {
			h = chunk[off-at:]
		} else if err := readAt(h[:min(record.HeaderSize, end-off)], off); err != nil {
			return nil, 0, err
		}
		n, err := record.FrameSize(h[:min(int64(len(h)), end-off)], int(end-off))
		if err != nil {
			return nil, 0, err
		}
		size := int64(n)
		if h[record.MagicOffset] == record.MagicKafka && size-record.HeaderSize >= transport.SendFileMin {
			f := &transport.FileRange{File: r.File(), Offset: r.Position() + off + record.HeaderSize, Length: size - record.HeaderSize}
			out = append(out, piece{file: f})
			total += int(f.Length)
			off += size
			continue
		}
		if off < at || off+size > at+int64(len(chunk)) {
			if size > rangeChunk {
				chunk = make([]byte, size) // a large batch of magic 1, converted below
			} else {
				// A new chunk each time: the pieces taken from the last
				// one are written from it.
				bp := rangeChunks.Get().(*[]byte)
				mem.chunks = append(mem.chunks, bp)
				chunk = (*bp)[:min(rangeChunk, end-off)]
			}
			if err := readAt(chunk, off); err != nil {
				return nil, 0, err
			}
			at = off
		}
		kb, err := kafkaBatch(chunk[off-at:off-at+size], mem)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, piece{b: kb})
		total += len(kb)
		off += size
	}
	return out, total, nil
}
