package durable

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOffsetTokens(t *testing.T) {
	o := Offset{Record: 42, Byte: 1337}
	assert.Equal(t, "0000000000000042_0000000000001337", o.Token())
	got, kind, err := ParseOffset(o.Token())
	require.NoError(t, err)
	assert.Equal(t, AtToken, kind)
	assert.Equal(t, o, got)
	for _, s := range []string{"", "-1"} {
		_, kind, err := ParseOffset(s)
		require.NoError(t, err)
		assert.Equal(t, AtStart, kind)
	}
	_, kind, err = ParseOffset("now")
	require.NoError(t, err)
	assert.Equal(t, AtNow, kind)
	// Tokens sort as strings in stream order.
	tokens := []string{Offset{0, 0}.Token(), Offset{1, 5}.Token(), Offset{9, 100}.Token(), Offset{10, 101}.Token(), Offset{123456789, 1 << 40}.Token()}
	assert.True(t, slices.IsSorted(tokens))
	for _, tok := range tokens {
		assert.NotContains(t, tok, ",")
		assert.NotContains(t, tok, "/")
		assert.NotEqual(t, StartToken, tok)
		assert.NotEqual(t, NowToken, tok)
	}
	for _, bad := range []string{"0", "-2", "NOW", "0000000000000042-0000000000001337", "000000000000004a_0000000000001337",
		"0000000000000042_000000000000133", "+000000000000042_0000000000001337", strings.Repeat("9", 40), "0000000000000042_0000000000001337\x00"} {
		_, _, err := ParseOffset(bad)
		assert.ErrorIs(t, err, ErrBadOffset, bad)
	}
}

func TestSplitJSON(t *testing.T) {
	tests := []struct {
		body string
		want []string
	}{
		{`{"a":1}`, []string{`{"a":1}`}},
		{` 7 `, []string{`7`}},
		{`"x"`, []string{`"x"`}},
		{`[1, {"b": 2} ,"c"]`, []string{`1`, `{"b": 2}`, `"c"`}},
		{`[[1,2],[3]]`, []string{`[1,2]`, `[3]`}}, // one level only
		{`[null]`, []string{`null`}},
	}
	for _, tt := range tests {
		got, err := SplitJSON([]byte(tt.body))
		require.NoError(t, err, tt.body)
		var strs []string
		for _, m := range got {
			strs = append(strs, string(m))
		}
		assert.Equal(t, tt.want, strs, tt.body)
	}
	for _, bad := range []string{``, `  `, `[]`, ` [ ] `, `{`, `1 2`, `[1,]`, `{"a":1}x`, "\xff"} {
		_, err := SplitJSON([]byte(bad))
		assert.ErrorIs(t, err, ErrBadJSON, "%q", bad)
	}
}

// FuzzParseOffset: whatever a client sends either is refused or is a
// token that Token writes back byte for byte (or a sentinel).
func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{"", "-1", "now", Offset{42, 1337}.Token(), "0000000000000042_000000000000133x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, kind, err := ParseOffset(s)
		if err != nil {
			return
		}
		if kind == AtToken && o.Token() != s {
			t.Fatalf("%q parsed as %+v, which is token %q", s, o, o.Token())
		}
	})
}

// FuzzSplitJSON: a body is refused or split into messages that are each
// one JSON value; an array body gives as many as it has elements.
func FuzzSplitJSON(f *testing.F) {
	for _, s := range []string{`[1,2]`, `{"a":[1]}`, `[]`, `[[1],[2,3]]`, ` "x" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := SplitJSON(body)
		if err != nil {
			return
		}
		if len(msgs) == 0 {
			t.Fatalf("%q split into nothing", body)
		}
		for _, m := range msgs {
			if !json.Valid(m) {
				t.Fatalf("%q gave message %q, not JSON", body, m)
			}
		}
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) != len(msgs) {
			t.Fatalf("%q: %d elements, %d messages", body, len(arr), len(msgs))
		}
	})
}
