package console

import (
	"net/http"
	"slices"
	"strings"

	"gostream/metadata"
)

// Streams is the answer of GET /ui/api/streams: every Durable Streams
// stream the principal may describe, from the survey's last round.
type Streams struct {
	SurveyRound
	Streams []Stream `json:"streams"`
}

// Stream is one Durable Streams stream (docs/durable-streams.md).
type Stream struct {
	// Path is the stream's path, under /v1/stream/; Topic the internal
	// topic that holds it.
	Path        string `json:"path"`
	Topic       string `json:"topic"`
	ContentType string `json:"contentType"`
	// ForkedFrom is the path of the stream it was forked from, "" for
	// none; Deleted is set on a stream deleted while forks of it remain
	// (it answers 410).
	ForkedFrom string `json:"forkedFrom"`
	Deleted    bool   `json:"deleted"`
	// Sealed is set when its topic is sealed. A stream its writer closed
	// (Stream-Closed) says so in its log, which the console does not read:
	// that shows on the stream's own HEAD, not here.
	Sealed bool `json:"sealed"`
	// Bytes and Records are what its log holds (one copy; the records
	// count the appends and the stream's own markers); null when its
	// partition's leader did not tell.
	Bytes   *int64 `json:"bytes"`
	Records *int64 `json:"records"`
	// Readers are its live readers in the cluster (long-polls and SSE
	// connections open, on whichever nodes they are connected to), as
	// every broker's status told them in the round; null when a broker's
	// status is missing from it.
	Readers *int `json:"readers"`
}

func (s *Server) streams(w http.ResponseWriter, r *http.Request) {
	snap := s.snapshot(w, r)
	if snap == nil {
		return
	}
	out := Streams{SurveyRound: snap.round(), Streams: []Stream{}}
	for i := range snap.topics {
		t := &snap.topics[i]
		st := t.meta.Stream
		if st == nil || !s.may(r, metadata.OpDescribe, metadata.ResourceStream, st.Path) {
			continue
		}
		one := Stream{Path: st.Path, Topic: t.meta.Name, ContentType: st.ContentType, ForkedFrom: st.ForkedFrom,
			Deleted: st.Deleted, Sealed: t.meta.Sealed}
		if bytes, records, unknown := t.sums(); unknown == 0 {
			one.Bytes, one.Records = &bytes, &records
		}
		if snap.readersKnown {
			readers := snap.streamReaders[st.Path]
			one.Readers = &readers
		}
		out.Streams = append(out.Streams, one)
	}
	slices.SortFunc(out.Streams, func(a, b Stream) int { return strings.Compare(a.Path, b.Path) })
	writeJSON(w, http.StatusOK, out)
}
