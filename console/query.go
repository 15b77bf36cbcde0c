package console

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// strictQuery parses a request's raw query for an API that takes the
// parameters allowed. A query that is not well formed, a parameter the
// API does not take, or one given twice is an error that names it, so
// that a typo is told, not ignored.
func strictQuery(raw string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("the query is not well formed: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(allowed, k) {
			takes := "no parameter"
			if len(allowed) > 0 {
				takes = strings.Join(allowed, ", ")
			}
			return nil, fmt.Errorf("unknown parameter %s (this API takes %s)", quote(k), takes)
		}
		if n := len(v[k]); n > 1 {
			return nil, fmt.Errorf("parameter %s given %d times; give it once", k, n)
		}
	}
	return v, nil
}

// parseOptionalID parses the raw query of an API whose one parameter,
// name, is optional and names a partition or a node (GET .../tail's
// partition, GET /ui/api/series' node): a number from 0 to MaxInt32, or
// -1 when the query does not give it.
func parseOptionalID(raw, name string) (int32, error) {
	v, err := strictQuery(raw, name)
	if err != nil {
		return 0, err
	}
	s, ok := param(v, name)
	if !ok {
		return -1, nil
	}
	n, err := parseInt(name, s, 0, math.MaxInt32)
	return int32(n), err
}

// param returns the value of a parameter strictQuery accepted, and
// whether it was given.
func param(v url.Values, name string) (string, bool) {
	vals, ok := v[name]
	if !ok {
		return "", false
	}
	return vals[0], true
}

// parseInt parses s, the value of parameter name, as a decimal integer
// in [lo, hi]: digits only (no sign, no space), at most 19 of them.
func parseInt(name, s string, lo, hi int64) (int64, error) {
	bad := func() error {
		return fmt.Errorf("%s %s: want a decimal number from %d to %d", name, quote(s), lo, hi)
	}
	if s == "" || len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, bad()
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, bad()
	}
	return n, nil
}

// quote quotes a value a request gave, for an error message: at most 64
// bytes of it, so that a huge parameter does not make a huge error.
func quote(s string) string {
	const most = 64
	if len(s) > most {
		return strconv.Quote(s[:most]) + "..."
	}
	return strconv.Quote(s)
}
