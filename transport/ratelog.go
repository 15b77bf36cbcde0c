package transport

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// RateLog logs warnings at a bounded rate per key (a peer address, a
// principal): the first at once, then at most one line per Every for that
// key, which counts the lines held back since the last. A hostile client
// that fails a handshake in a loop, or a principal that is refused a
// thousand times a second, costs one line a minute. It keeps at most
// MaxKeys keys; past that it forgets them all and starts again, so its
// memory is bounded whatever the peers do. Safe for concurrent use.
type RateLog struct {
	log     hclog.Logger
	every   time.Duration
	maxKeys int
	mu      struct {
		sync.Mutex
		keys map[string]*rateKey
	}
}

type rateKey struct {
	last       time.Time
	suppressed int
}

// DefaultRateLogEvery is how often a RateLog logs one key unless told.
const DefaultRateLogEvery = time.Minute

// NewRateLog returns a RateLog on log that logs each key at most once per
// every (DefaultRateLogEvery when 0).
func NewRateLog(log hclog.Logger, every time.Duration) *RateLog {
	if every <= 0 {
		every = DefaultRateLogEvery
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	rl := &RateLog{log: log, every: every, maxKeys: 1024}
	rl.mu.keys = map[string]*rateKey{}
	return rl
}

// Warn logs msg with args for key, unless key was logged less than Every
// ago; then it only counts it.
func (rl *RateLog) Warn(key, msg string, args ...any) {
	now := time.Now()
	rl.mu.Lock()
	k := rl.mu.keys[key]
	if k == nil {
		if len(rl.mu.keys) >= rl.maxKeys {
			clear(rl.mu.keys)
		}
		k = &rateKey{}
		rl.mu.keys[key] = k
	} else if now.Sub(k.last) < rl.every {
		k.suppressed++
		rl.mu.Unlock()
		return
	}
	suppressed := k.suppressed
	k.last, k.suppressed = now, 0
	rl.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "held_back_since_last_line", suppressed)
	}
	rl.log.Warn(msg, args...)
}
