package quorum

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft logs a failed heartbeat or append at ERROR each time it retries a
// candidate it cannot reach, several times a second for as long as the
// candidate is down. limitedLogger passes each such message (by its text)
// on at most once per logEvery, with the count of those it held back;
// INFO messages (state changes) pass untouched.
type limitedLogger struct {
	hclog.Logger
	lim *limiter
}

const logEvery = 30 * time.Second

type limiter struct {
	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

func newLimitedLogger(l hclog.Logger) hclog.Logger {
	return limitedLogger{Logger: l, lim: &limiter{last: map[string]time.Time{}, held: map[string]int{}}}
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

func (l limitedLogger) Error(msg string, args ...interface{}) { l.limited(l.Logger.Error, msg, args) }
func (l limitedLogger) Warn(msg string, args ...interface{})  { l.limited(l.Logger.Warn, msg, args) }
func (l limitedLogger) Debug(msg string, args ...interface{}) { l.limited(l.Logger.Debug, msg, args) }
func (l limitedLogger) Trace(msg string, args ...interface{}) {}

func (l limitedLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	switch level {
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
