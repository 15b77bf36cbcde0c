package durable

import (
	"errors"
	"fmt"
)

// ErrBadOffset marks an offset token that does not parse (HTTP 400).
var ErrBadOffset = errors.New("durable: malformed offset")

// Offset is a position in a stream: the number of records before it, and
// the number of bytes of stream data before it.
type Offset struct {
	Record int64
	Byte   int64
}

// Sentinels a client may send in place of a token.
const (
	StartToken = "-1"  // the beginning of the stream
	NowToken   = "now" // the current tail
)

// tokenDigits is the width of each number of a token: 16 decimal digits
// hold any offset below 10^16, and a fixed width makes string order the
// stream's order.
const tokenDigits = 16

// maxTokenValue is the largest number a token's field holds.
const maxTokenValue = 9_999_999_999_999_999

// TokenLen is the length of every token.
const TokenLen = 2*tokenDigits + 1

// Token returns o as a token: both numbers as 16 decimal digits, joined by
// an underscore. Tokens of one stream sort as strings in stream order, and
// never contain the characters the protocol forbids (, & = ? /). It panics
// on a negative field or one of more than 16 digits, which no stream has.
func (o Offset) Token() string {
	if o.Record < 0 || o.Byte < 0 || o.Record > maxTokenValue || o.Byte > maxTokenValue {
		panic(fmt.Sprintf("durable: offset %+v has no token", o))
	}
	return fmt.Sprintf("%016d_%016d", o.Record, o.Byte)
}

// Kind says what a client's offset parameter names.
type Kind int

const (
	// AtToken: a position the server handed out.
	AtToken Kind = iota
	// AtStart: "-1", or no offset parameter at all.
	AtStart
	// AtNow: "now", the tail.
	AtNow
)

// ParseOffset reads a client's offset parameter: empty or "-1" is the
// start, "now" the tail, anything else must be a token exactly as Token
// writes it (ErrBadOffset otherwise). Whether the stream has that
// position is for the caller to check.
func ParseOffset(s string) (Offset, Kind, error) {
	switch s {
	case "", StartToken:
		return Offset{}, AtStart, nil
	case NowToken:
		return Offset{}, AtNow, nil
	}
	if len(s) != TokenLen || s[tokenDigits] != '_' {
		return Offset{}, 0, fmt.Errorf("%w: %q is not an offset this server gave (want -1, now, or %d digits, _, %d digits)", ErrBadOffset, clip(s), tokenDigits, tokenDigits)
	}
	rec, ok1 := digits(s[:tokenDigits])
	b, ok2 := digits(s[tokenDigits+1:])
	if !ok1 || !ok2 {
		return Offset{}, 0, fmt.Errorf("%w: %q is not an offset this server gave", ErrBadOffset, clip(s))
	}
	return Offset{Record: rec, Byte: b}, AtToken, nil
}

func digits(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// clip shortens what a client sent for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
