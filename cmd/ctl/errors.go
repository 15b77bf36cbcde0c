package main

import (
	"context"
	"errors"
	"strings"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// failed returns err as an operation failure (exit status 2) reported under
// the name of what went wrong, so that scripts can read it off the first
// word of stderr. An *exitcode.Error is returned as it is.
func failed(err error) error {
	if err == nil {
		return nil
	}
	var e *exitcode.Error
	if errors.As(err, &e) {
		return err
	}
	name := errorName(err)
	return exitcode.Fail(name, &namedError{msg: strings.Replace(err.Error(), name+": ", "", 1), err: err})
}

// namedError is an error whose message no longer repeats the name it is
// reported under: a cluster error wrapped by the client reads
// `create topic "x": TopicExists: ...`, and the line on stderr already
// starts with TopicExists.
type namedError struct {
	msg string
	err error
}

func (e *namedError) Error() string { return e.msg }
func (e *namedError) Unwrap() error { return e.err }

// errorName names an error of the client or the cluster. A cluster error
// keeps the name of its wire code (its message already starts with it:
// "TopicExists: ..."); the client's own errors get names of the same kind.
// The client's markers that say more than the code come first: NoLeader
// rather than the BrokerNotAvailable it also matches, and UnknownOutcome
// rather than the closed connection (BrokerNotAvailable), the deadline
// (Timeout) or the Ctrl-C (Interrupted) that left a request unanswered.
// A request the cluster answered with an error keeps that error's name
// even when the client marks its outcome unknown: a produce refused with
// ReplicationFailed or NoSpace is named so.
func errorName(err error) string {
	var te *transport.Error
	switch {
	case errors.Is(err, client.ErrUnknownOutcome) && !answered(err):
		return "UnknownOutcome"
	case errors.Is(err, client.ErrNoLeader):
		return "NoLeader"
	case errors.Is(err, client.ErrCorruptBatch):
		return "CorruptBatch"
	case errors.Is(err, client.ErrTopicRecreated):
		return "TopicRecreated"
	case errors.As(err, &te):
		return te.Code.String()
	case errors.Is(err, client.ErrBufferFull):
		return "BufferFull"
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	case errors.Is(err, context.Canceled):
		return "Interrupted"
	case errors.Is(err, client.ErrClosed):
		return "Closed"
	case errors.Is(err, client.ErrNotAppended):
		return "NotAppended"
	case errors.Is(err, client.ErrInvalidConfig):
		return "InvalidConfig"
	}
	return "Error"
}

// answered reports whether err carries an answer of the cluster that says
// what went wrong: an error code other than BrokerNotAvailable and
// Timeout, which say only that no answer came in time (the client makes
// them when the connection closes or the deadline passes, and a node
// answers Timeout when its own wait for the request ran out).
func answered(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.Code != transport.CodeBrokerNotAvailable && te.Code != transport.CodeTimeout
}

// interrupted reports whether err only says that the command's context
// ended because the user pressed Ctrl-C (or the process got SIGTERM).
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}
