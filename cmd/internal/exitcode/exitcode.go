// Package exitcode owns the error contract that gostream's binaries share
// with the people and scripts that run them (docs/cli.md): the exit status says
// what kind of failure it was, and stderr gets one line that starts with the
// error's name, for example
//
//	InvalidFlag: --controller "x": want ID@HOST:PORT
//
// The statuses are:
//
//	0  done
//	1  bad usage: unknown flag or command, bad flag value, missing argument
//	2  the cluster refused, or the operation failed
package exitcode

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// The exit statuses of gostream's binaries.
const (
	// OK means the command did what was asked.
	OK = 0
	// Usage means the command line was wrong; nothing was attempted.
	Usage = 1
	// Failed means the command was understood but the operation failed or
	// the cluster refused it.
	Failed = 2
)

// Error is an error reported under a name, such as "InvalidFlag" or
// "Unreachable", together with the exit status it causes.
type Error struct {
	// Name is the word the stderr line starts with. It is part of the
	// contract: scripts match on it.
	Name string
	// Code is the exit status, Usage or Failed.
	Code int
	// Err is what went wrong.
	Err error
}

// Error returns "Name: message".
func (e *Error) Error() string { return e.Name + ": " + e.Err.Error() }

// Unwrap returns the underlying error, so errors.Is sees through an Error.
func (e *Error) Unwrap() error { return e.Err }

// Usagef returns an Error with exit status Usage and a formatted message.
func Usagef(name, format string, args ...any) *Error {
	return &Error{Name: name, Code: Usage, Err: fmt.Errorf(format, args...)}
}

// Fail returns an Error with exit status Failed that wraps err.
func Fail(name string, err error) *Error {
	return &Error{Name: name, Code: Failed, Err: err}
}

// Report writes err to w as one line and returns the exit status it
// causes: OK for nil, the Code of the first *Error in err's chain, and
// Failed, under the name "Error", for anything else.
func Report(w io.Writer, err error) int {
	if err == nil {
		return OK
	}
	name, code := "Error", Failed
	msg := err.Error()
	var e *Error
	if errors.As(err, &e) {
		name, code = e.Name, e.Code
		// The name leads the line once, even when e was wrapped.
		msg = strings.Replace(msg, e.Name+": ", "", 1)
	}
	// One line, so that scripts can read the name off the first word.
	msg = strings.TrimSpace(strings.ReplaceAll(msg, "\n", " "))
	fmt.Fprintf(w, "%s: %s\n", name, msg)
	return code
}

// Go's flag package names a flag with one dash ("-partitions"); the
// commands document and take two.
var (
	flagUndefined = regexp.MustCompile(`^flag provided but not defined: -{1,2}(\S+)$`)
	flagInvalid   = regexp.MustCompile(`^invalid value (".*") for flag -{1,2}(\S+): (.*)$`)
	flagNoValue   = regexp.MustCompile(`^flag needs an argument: -{1,2}(\S+)$`)
)

// dashed is a flag's name as a user types it: -o, --partitions.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// FlagError is the usage error for an error of the flag parser, with the
// flag named as the user typed it: UnknownFlag for a flag the command
// does not have ("unknown flag --bogus"), InvalidFlag otherwise. help is
// the command line whose --help lists the flags.
func FlagError(err error, help string) *Error {
	msg := err.Error()
	if m := flagUndefined.FindStringSubmatch(msg); m != nil {
		return Usagef("UnknownFlag", "unknown flag %s (see %s --help)", dashed(m[1]), help)
	}
	if m := flagInvalid.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if why == "parse error" { // strconv's word for "abc" as a number
			why = "not a number"
		}
		return Usagef("InvalidFlag", "invalid value %s for %s: %s", m[1], dashed(m[2]), why)
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return Usagef("InvalidFlag", "%s needs a value (see %s --help)", dashed(m[1]), help)
	}
	return Usagef("InvalidFlag", "%v", err)
}
