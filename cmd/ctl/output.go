package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"gostream/record"
)

// writeJSON writes v as one line of JSON. HTML characters stay as they
// are: the output is read by people and scripts, not embedded in pages.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// newTable returns a writer that aligns tab-separated columns for people.
// Call Flush when the table is complete.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// joinIDs writes broker ids as "1,2,3", or "-" for none.
func joinIDs(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	return b.String()
}

// orEmpty returns ids, or an empty (not nil) slice, so that JSON shows []
// rather than null.
func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// yesNo is a bool for people.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// isTerminal reports whether w is a terminal, for progress lines that
// rewrite themselves with \r.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Consumed records as people and scripts see them.
//
// In tables a key or value is printed as it is when it is valid UTF-8
// without control characters, quoted Go-style ("a\tb") when it is valid
// UTF-8 with control characters (so that one record stays one line), and
// as base64 behind the marker "base64:" otherwise. A null key prints as
// (null), an empty one as "".
//
// In JSON (docs/cli.md) keys and values are strings. When any byte field of a
// record (key, value or a header value) is not valid UTF-8, every byte
// field of that record is base64 and the record carries
// "encoding":"base64". Header keys are text and always printed as such.

// nullKey is how a table shows a record without a key.
const nullKey = "(null)"

// base64Marker starts a key or value that a table shows in base64.
const base64Marker = "base64:"

// tableText renders bytes for a table column.
func tableText(b []byte) string {
	if !utf8.Valid(b) {
		return base64Marker + base64.StdEncoding.EncodeToString(b)
	}
	s := string(b)
	if s == "" || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// tableKey renders a record key for a table column.
func tableKey(k []byte) string {
	if k == nil {
		return nullKey
	}
	return tableText(k)
}

// consumedRecord is one record of consume -o json.
type consumedRecord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp string  `json:"timestamp"`
	Key       *string `json:"key"`
	Value     string  `json:"value"`
	// Headers is [] when the record has none.
	Headers []consumedHeader `json:"headers"`
	// Encoding is "base64" when the byte fields are base64, absent when
	// they are UTF-8 text.
	Encoding string `json:"encoding,omitempty"`
}

type consumedHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// timestampLayout is RFC 3339 in UTC with milliseconds, the precision of a
// record's timestamp: 2024-05-01T12:00:00.123Z.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTimestamp(unixMilli int64) string {
	return time.UnixMilli(unixMilli).UTC().Format(timestampLayout)
}

// newConsumedRecord converts r for JSON output.
func newConsumedRecord(topic string, partition int32, r *record.Record) consumedRecord {
	text := utf8.Valid(r.Key) && utf8.Valid(r.Value)
	for _, h := range r.Headers {
		text = text && utf8.Valid(h.Value)
	}
	enc := func(b []byte) string { return string(b) }
	out := consumedRecord{
		Topic:     topic,
		Partition: partition,
		Offset:    r.Offset,
		Timestamp: formatTimestamp(r.Timestamp),
		Headers:   make([]consumedHeader, 0, len(r.Headers)),
	}
	if !text {
		enc = base64.StdEncoding.EncodeToString
		out.Encoding = "base64"
	}
	if r.Key != nil {
		k := enc(r.Key)
		out.Key = &k
	}
	out.Value = enc(r.Value)
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, consumedHeader{Key: h.Key, Value: enc(h.Value)})
	}
	return out
}

// plural is "1 partition", "3 partitions".
func plural[N int | int32 | int64](n N, noun string) string {
	return pluralOf(n, noun, noun+"s")
}

// pluralOf is plural for a noun whose plural is not noun+"s": "1 batch",
// "2 batches".
func pluralOf[N int | int32 | int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// agree is one when n is 1 and many otherwise: the verb of a count,
// "1 replica is", "2 replicas are".
func agree[N int | int32 | int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
