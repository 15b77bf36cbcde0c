package kafkaapi

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// fileOf writes what its pieces hold to a file: a batch that becomes a
// piece of the file (sent from it) rather than bytes.
type fileOf struct {
	f   *os.File
	end int64
}

func newFileOf(t *testing.T) *fileOf {
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return &fileOf{f: f}
}

func (w *fileOf) piece(t *testing.T, b []byte) piece {
	_, err := w.f.WriteAt(b, w.end)
	require.NoError(t, err)
	p := piece{file: &transport.FileRange{File: w.f, Offset: w.end, Length: int64(len(b))}}
	w.end += int64(len(b)) + 34 // a stored batch's header between Kafka batches
	return p
}

// randomFetchAnswer is a Fetch answer of version v with random topics,
// partitions, errors and batches (small ones, copied into the encoding,
// large ones, written where they are, and with files, some sent from
// files), and the kmsg answer it stands for.
func randomFetchAnswer(t *testing.T, rng *rand.Rand, v int16, files *fileOf) (*fetchAnswer, *kmsg.FetchResponse) {
	a := &fetchAnswer{version: v}
	k := kmsg.NewPtrFetchResponse()
	k.Version = v
	for range rng.Intn(4) {
		name := string(bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, 1+rng.Intn(300)))
		ft := fetchTopic{name: name}
		kt := kmsg.NewFetchResponseTopic()
		kt.Topic = name
		for range rng.Intn(4) {
			fp := fetchPartition{partition: rng.Int31(), errorCode: int16(rng.Intn(100)),
				highWatermark: rng.Int63(), lastStable: rng.Int63(), logStart: rng.Int63() - rng.Int63()}
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode = fp.partition, fp.errorCode
			kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = fp.highWatermark, fp.lastStable, fp.logStart
			kp.RecordBatches = []byte{}
			for range rng.Intn(5) {
				size := rng.Intn(2 * inlineBatch)
				if rng.Intn(4) == 0 {
					size = 200 << 10
				}
				b := make([]byte, size)
				rng.Read(b)
				if files != nil && rng.Intn(2) == 0 {
					fp.batches = append(fp.batches, files.piece(t, b))
				} else {
					fp.batches = append(fp.batches, piece{b: b})
				}
				kp.RecordBatches = append(kp.RecordBatches, b...)
			}
			ft.partitions = append(ft.partitions, fp)
			kt.Partitions = append(kt.Partitions, kp)
		}
		a.topics = append(a.topics, ft)
		k.Topics = append(k.Topics, kt)
	}
	return a, k
}

// kmsgFrame is the frame writeResponse wrote for a kmsg answer before
// Fetch answers were encoded here: size, correlation id, tags for header
// v1, kmsg's encoding.
func kmsgFrame(corr int32, resp kmsg.Response) []byte {
	buf := make([]byte, 8)
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	if resp.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// TestFetchAnswerEncoding: for every Fetch version served, the frame of
// a Fetch answer, its referred batches written in their places (from
// files too), is byte for byte kmsg's encoding of the same answer, and
// kmsg reads it back.
func TestFetchAnswerEncoding(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	fv := versions[kmsg.Fetch.Int16()]
	files := newFileOf(t)
	for v := fv.min; v <= fv.max; v++ {
		for i := range 50 {
			a, k := randomFetchAnswer(t, rng, v, files)
			corr := rng.Int31()
			var got bytes.Buffer
			var scratch []byte
			require.NoError(t, writeResponse(&got, &request{corr: corr}, a, &scratch))
			want := kmsgFrame(corr, k)
			require.Equal(t, want, got.Bytes(), "version %d, answer %d", v, i)

			hdr := 8
			if v >= 12 {
				hdr = 9
			}
			back := kmsg.NewPtrFetchResponse()
			back.Version = v
			require.NoError(t, back.ReadFrom(got.Bytes()[hdr:]), "version %d, answer %d", v, i)
			require.Len(t, back.Topics, len(k.Topics))
		}
	}
}

// TestFetchAnswerRefs: batches of at least inlineBatch bytes are not
// copied into the encoding, smaller ones are.
func TestFetchAnswerRefs(t *testing.T) {
	big, small := make([]byte, inlineBatch), make([]byte, inlineBatch-1)
	a := &fetchAnswer{version: 12, topics: []fetchTopic{{name: "t", partitions: []fetchPartition{{batches: []piece{{b: small}, {b: big}, {b: small}, {b: big}}}}}}}
	buf, refs := a.appendFrame(nil, 7)
	require.Len(t, refs, 2)
	require.Same(t, &big[0], &refs[0].b[0])
	require.Same(t, &big[0], &refs[1].b[0])
	require.Less(t, len(buf), 2*inlineBatch+100)
	require.Equal(t, uint32(len(buf)-4+2*len(big)), binary.BigEndian.Uint32(buf))
}

// TestWriteResponseConns: an answer with referred batches, some of them
// ranges of a file, arrives whole through a connection a LimitListener
// accepted (written with writev and sendfile on its TCP connection) and
// through one that is no TCP connection.
func TestWriteResponseConns(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var a *fetchAnswer
	var k *kmsg.FetchResponse
	files := newFileOf(t)
	for a == nil || len(kmsgFrame(1, k)) < 1<<20 {
		a, k = randomFetchAnswer(t, rng, 12, files)
	}
	want := kmsgFrame(9, k)
	check := func(t *testing.T, server, client net.Conn) {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(client)
			got <- b
		}()
		var scratch []byte
		require.NoError(t, writeResponse(server, &request{corr: 9}, a, &scratch))
		require.NoError(t, server.Close())
		require.Equal(t, want, <-got)
	}
	t.Run("limited TCP", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		ll := transport.LimitListener(ln, transport.NewConnLimiter(transport.ConnLimits{MaxConns: 4}))
		client, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer client.Close()
		server, err := ll.Accept()
		require.NoError(t, err)
		check(t, server, client)
	})
	t.Run("pipe", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		check(t, server, client)
	})
}
