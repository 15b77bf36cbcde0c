package quorum

import (
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft logs a failed heartbeat or append at ERROR each time it retries a
// candidate it cannot reach, several times a second for as long as the
// candidate is down. limitedLogger passes each such message (by its text)
// on at most once per logEvery, with the count of those it held back;
// INFO messages (state changes) pass untouched.
//
// It also gives Raft's messages the levels of our logs (Error: an
// operator must act; Warn: a handled anomaly). A candidate Raft cannot
// reach is retried by Raft, and `cluster status` tells the operator
// when one stays lost: Warn, not Error. And while the group comes up
// (startGrace from the process's start), the candidates not yet
// listening, the first elections and a new member's catch-up are how
// every start goes, not anomalies: Debug and Info.
type limitedLogger struct {
	hclog.Logger
	lim *limiter
}

const logEvery = 30 * time.Second

// startGrace is how long after its start a candidate takes the others'
// absence for their start: make run's own start timeout.
const startGrace = 30 * time.Second

type limiter struct {
	start time.Time
	mu    sync.Mutex
	last  map[string]time.Time
	held  map[string]int
}

func newLimitedLogger(l hclog.Logger) hclog.Logger {
	return limitedLogger{Logger: l, lim: &limiter{start: time.Now(), last: map[string]time.Time{}, held: map[string]int{}}}
}

// Raft's messages about a candidate it cannot reach, and about elections
// and a member's catch-up, by their beginnings.
var (
	unreachable = []string{"failed to make requestVote RPC", "failed to appendEntries to", "failed to heartbeat to",
		"failed to contact", "failed to send snapshot to", "failed to pipeline appendEntries", "failed to start pipeline replication to"}
	startingUp = []string{"heartbeat timeout reached, starting election", "Election timeout reached, restarting election",
		"no known peers, aborting election", "failed to get previous log", "appendEntries rejected, sending older logs"}
)

// closing reports whether an error among args is that of a connection
// closed under its reader.
func closing(args []interface{}) bool {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, net.ErrClosed) {
			return true
		}
	}
	return false
}

// reset reports whether an error among args is a connection reset by the
// peer.
func reset(args []interface{}) bool {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, syscall.ECONNRESET) {
			return true
		}
	}
	return false
}

func hasPrefix(msg string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// level is the level msg, with args, is logged at, Raft's own being
// level.
func (l *limiter) level(level hclog.Level, msg string, args []interface{}) hclog.Level {
	starting := time.Since(l.start) < startGrace
	switch {
	case level < hclog.Warn:
		return level
	case closing(args):
		// A connection of ours closed as the node stops (Raft's stream
		// layer reads on until then): how every stop goes.
		return hclog.Debug
	case msg == "failed to decode incoming command" && reset(args):
		// The peer's end went away abruptly (it stopped or was killed
		// while its stream to us still had bytes in flight): the peer's
		// state, said where Raft sees it (unreachable peers above); the
		// command was never half applied.
		return hclog.Info
	case hasPrefix(msg, unreachable) && starting:
		return hclog.Debug
	case hasPrefix(msg, unreachable):
		return hclog.Warn
	case hasPrefix(msg, startingUp) && starting:
		return hclog.Info
	}
	return level
}

// allow reports whether msg may be logged now, and how many were held
// back since it last was.
func (l *limiter) allow(msg string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[msg]; ok && time.Since(t) < logEvery {
		l.held[msg]++
		return false, 0
	}
	held := l.held[msg]
	l.last[msg], l.held[msg] = time.Now(), 0
	return true, held
}

func (l limitedLogger) limited(log func(string, ...interface{}), msg string, args []interface{}) {
	ok, held := l.lim.allow(msg)
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "repeated_since_last_logged", held)
	}
	log(msg, args...)
}

func (l limitedLogger) Error(msg string, args ...interface{}) { l.Log(hclog.Error, msg, args...) }
func (l limitedLogger) Warn(msg string, args ...interface{})  { l.Log(hclog.Warn, msg, args...) }
func (l limitedLogger) Debug(msg string, args ...interface{}) { l.Log(hclog.Debug, msg, args...) }
func (l limitedLogger) Trace(msg string, args ...interface{}) {}

func (l limitedLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	switch level = l.lim.level(level, msg, args); level {
	case hclog.Info:
		l.Logger.Log(level, msg, args...)
	case hclog.Trace, hclog.NoLevel:
	default:
		l.limited(func(m string, a ...interface{}) { l.Logger.Log(level, m, a...) }, msg, args)
	}
}

func (l limitedLogger) Named(name string) hclog.Logger {
	return limitedLogger{Logger: l.Logger.Named(name), lim: l.lim}
}

func (l limitedLogger) ResetNamed(name string) hclog.Logger {
	return limitedLogger{Logger: l.Logger.ResetNamed(name), lim: l.lim}
}

func (l limitedLogger) With(args ...interface{}) hclog.Logger {
	return limitedLogger{Logger: l.Logger.With(args...), lim: l.lim}
}
