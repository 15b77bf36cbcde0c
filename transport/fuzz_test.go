package transport

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var genFuzzSeeds = flag.Bool("gen-fuzz-seeds", false, "rewrite the generated seed corpus under testdata/fuzz")

// fuzzMessage checks a message codec on arbitrary bytes: decoding never
// panics, fails only with ErrMalformed, and a body that decodes is the one
// encoding of its value (re-encoding gives the same bytes).
func fuzzMessage[T any, P interface {
	*T
	Message
}](f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var m T
		if err := Unmarshal(body, P(&m)); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if again := Marshal(nil, P(&m)); !bytes.Equal(again, body) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x\n value %#v", body, again, m)
		}
	})
}

func FuzzEmpty(f *testing.F)                   { fuzzMessage[Empty](f) }
func FuzzProduceRequest(f *testing.F)          { fuzzMessage[ProduceRequest](f) }
func FuzzProduceResponse(f *testing.F)         { fuzzMessage[ProduceResponse](f) }
func FuzzFetchRequest(f *testing.F)            { fuzzMessage[FetchRequest](f) }
func FuzzFetchResponse(f *testing.F)           { fuzzMessage[FetchResponse](f) }
func FuzzListOffsetsRequest(f *testing.F)      { fuzzMessage[ListOffsetsRequest](f) }
func FuzzListOffsetsResponse(f *testing.F)     { fuzzMessage[ListOffsetsResponse](f) }
func FuzzMetadataRequest(f *testing.F)         { fuzzMessage[MetadataRequest](f) }
func FuzzMetadataResponse(f *testing.F)        { fuzzMessage[MetadataResponse](f) }
func FuzzTopicInfo(f *testing.F)               { fuzzMessage[TopicInfo](f) }
func FuzzCreateTopicRequest(f *testing.F)      { fuzzMessage[CreateTopicRequest](f) }
func FuzzTopicRequest(f *testing.F)            { fuzzMessage[TopicRequest](f) }
func FuzzAlterTopicConfigRequest(f *testing.F) { fuzzMessage[AlterTopicConfigRequest](f) }

// fuzzFrameMax is small so that the fuzzer reaches the size limit.
const fuzzFrameMax = 1 << 12

// FuzzReadFrame reads frames from arbitrary bytes until an error: every
// frame read re-encodes to the bytes it was read from, and the stream ends
// with io.EOF exactly at a frame boundary or with ErrFrame.
func FuzzReadFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		// A client's reader reads the same frames, into the memory of the
		// frame before when it is large enough (transport.Into), starting
		// from memory whose size the stream's first byte picks.
		cr := bytes.NewReader(stream)
		var into []byte
		if len(stream) > 0 {
			into = make([]byte, 0, int(stream[0])*4)
		}
		consumed := 0
		for {
			fr, err := ReadFrame(r, fuzzFrameMax)
			cf, bodyLen, cerr := readHeader(cr, fuzzFrameMax, fuzzFrameMax)
			if cerr == nil {
				cf.Body, cerr = readBody(cr, bodyLen, fuzzFrameMax, into)
			}
			if (err == nil) != (cerr == nil) || err == nil && !bytes.Equal(fr.Body, cf.Body) {
				t.Fatalf("a client's read differs: %v, %x; ReadFrame: %v, %x", cerr, cf.Body, err, fr.Body)
			}
			if cerr == nil {
				into = cf.Body[:0]
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					if consumed != len(stream) {
						t.Fatalf("io.EOF after %d of %d bytes", consumed, len(stream))
					}
				} else if !errors.Is(err, ErrFrame) {
					t.Fatalf("error does not wrap ErrFrame: %v", err)
				}
				return
			}
			if len(fr.Body)+FrameHeaderSize > fuzzFrameMax {
				t.Fatalf("frame of %d bytes over the limit", len(fr.Body)+FrameHeaderSize)
			}
			end := len(stream) - r.Len()
			if again := AppendFrame(nil, fr); !bytes.Equal(again, stream[consumed:end]) {
				t.Fatalf("re-encoding differs:\n in  %x\n out %x", stream[consumed:end], again)
			}
			consumed = end
		}
	})
}

// FuzzSplitResponse checks the error header of responses: it never panics,
// fails only with ErrMalformed, and what it accepts is the one encoding of
// what it returns.
func FuzzSplitResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		rest, werr, err := SplitResponse(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if werr != nil && werr.Code == CodeNone {
			t.Fatal("an error with code None")
		}
		again := append(AppendResponseError(nil, werr), rest...)
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", body, again)
		}
	})
}

// fuzzSeeds returns the generated seed corpus: file name -> input, per fuzz
// target. Seeds are valid encodings, plus a few broken ones that start the
// fuzzer near the checks.
func fuzzSeeds() map[string]map[string][]byte {
	seeds := map[string]map[string][]byte{}
	add := func(target, name string, b []byte) {
		if seeds[target] == nil {
			seeds[target] = map[string][]byte{}
		}
		seeds[target][name] = b
	}
	for _, tc := range messageCases() {
		enc := Marshal(nil, tc.msg)
		if len(enc) > 4096 {
			continue // big seeds slow the fuzzer down
		}
		target := "Fuzz" + reflect.TypeOf(tc.msg).Elem().Name()
		name := tc.name
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		} else {
			name = "valid"
		}
		add(target, name, enc)
		if len(enc) > 2 && strings.HasSuffix(tc.name, "full") {
			add(target, "truncated", enc[:len(enc)/2])
			add(target, "trailing-byte", append(bytes.Clone(enc), 0))
		}
	}
	add("FuzzMetadataResponse", "huge-broker-count", []byte("\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
	add("FuzzMetadataRequest", "huge-count", []byte("\xff\xff\xff\xff\x00\x00"))

	frames := AppendFrame(nil, Frame{API: uint16(APIProduce), Version: Version1, CorrelationID: 1, Body: Marshal(nil, &ProduceRequest{Topic: "t", Batch: []byte("b")})})
	frames = AppendFrame(frames, Frame{API: uint16(APIMetadata), Version: Version1, CorrelationID: 2})
	add("FuzzReadFrame", "two-frames", frames)
	add("FuzzReadFrame", "empty", []byte{})
	add("FuzzReadFrame", "empty-body", AppendFrame(nil, Frame{API: 4, Version: 1, CorrelationID: 7}))
	add("FuzzReadFrame", "at-limit", AppendFrame(nil, Frame{Body: make([]byte, fuzzFrameMax-FrameHeaderSize)}))
	add("FuzzReadFrame", "over-limit", AppendFrame(nil, Frame{Body: make([]byte, fuzzFrameMax-FrameHeaderSize+1)}))
	add("FuzzReadFrame", "truncated", frames[:len(frames)-3])
	add("FuzzReadFrame", "cut-in-length", frames[:2])
	add("FuzzReadFrame", "short-length", []byte("\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00"))
	add("FuzzReadFrame", "http", []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	add("FuzzReadFrame", "tls", []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"))

	for i, m := range streamSeeds() {
		enc := append([]byte{byte(i)}, Marshal(nil, m)...)
		name := reflect.TypeOf(m).Elem().Name()
		add("FuzzStreamMessage", name, enc)
		add("FuzzStreamMessage", name+"-truncated", enc[:1+(len(enc)-1)/2])
		add("FuzzStreamMessage", name+"-trailing-byte", append(bytes.Clone(enc), 0))
	}
	for name, b := range streamHostileSeeds {
		add("FuzzStreamMessage", name, b)
	}

	add("FuzzSplitResponse", "success", AppendResponseError(nil, nil))
	add("FuzzSplitResponse", "success-with-body", Marshal(AppendResponseError(nil, nil), &ListOffsetsResponse{LogStartOffset: 1, HighWatermark: 2, LogEndOffset: 3}))
	add("FuzzSplitResponse", "not-leader", AppendResponseError(nil, ToWire(fmt.Errorf("%w: leader is 2", ErrNotLeader))))
	add("FuzzSplitResponse", "unknown-code", AppendResponseError(nil, &Error{Code: 999, Message: "Code999"}))
	add("FuzzSplitResponse", "error-with-body", append(AppendResponseError(nil, ErrUnknownTopic), 1, 2))
	add("FuzzSplitResponse", "success-retriable", []byte{0, 0, 1, 0, 0})
	return seeds
}

// corpusFile is the content of a seed file in the format of `go test fuzz v1`.
func corpusFile(b []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// TestFuzzSeedCorpus keeps testdata/fuzz in step with fuzzSeeds. With
// -gen-fuzz-seeds it rewrites the files; otherwise it checks that each
// target has its seeds (the seeds themselves run as part of each Fuzz
// function under plain `go test`).
func TestFuzzSeedCorpus(t *testing.T) {
	for target, files := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, b := range files {
			path := filepath.Join(dir, name)
			if *genFuzzSeeds {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(path, corpusFile(b), 0o644))
				continue
			}
			got, err := os.ReadFile(path)
			if assert.NoError(t, err, "run go test -run TestFuzzSeedCorpus -gen-fuzz-seeds") {
				assert.Equal(t, string(corpusFile(b)), string(got), "%s is stale: run with -gen-fuzz-seeds", path)
			}
		}
	}
	for _, tc := range messageCases() {
		target := "Fuzz" + reflect.TypeOf(tc.msg).Elem().Name()
		assert.DirExists(t, filepath.Join("testdata", "fuzz", target), "every message has a fuzz target with seeds")
	}
}
