package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadJSON marks a JSON-mode body the server refuses (HTTP 400).
var ErrBadJSON = errors.New("durable: invalid JSON body")

// SplitJSON returns the messages of a JSON-mode append: a body that is an
// array gives one message per element (flattened one level: an element
// that is itself an array is one message), any other JSON value is one
// message. Each message is its JSON text as the client wrote it, less the
// space around it. An empty array, a body that is not exactly one JSON
// value, or one that is empty, is ErrBadJSON.
func SplitJSON(body []byte) ([][]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrBadJSON)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: not one JSON value", ErrBadJSON)
	}
	if trimmed[0] != '[' {
		return [][]byte{trimmed}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(trimmed, &elems); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: an empty array appends nothing", ErrBadJSON)
	}
	out := make([][]byte, len(elems))
	for i, e := range elems {
		out[i] = bytes.TrimSpace(e)
	}
	return out, nil
}
