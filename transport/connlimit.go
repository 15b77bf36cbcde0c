package transport

import (
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Limit names a limit that makes a server turn a client away.
type Limit int

// The limits of a server.
const (
	// LimitConns is the number of open connections in all.
	LimitConns Limit = iota + 1
	// LimitConnsPerAddr is the number of open connections from one IP
	// address.
	LimitConnsPerAddr
	// LimitMemory is the server's request memory (ServerConfig.MemoryBytes).
	LimitMemory
)

// String names the limit, for logs and metrics labels.
func (l Limit) String() string {
	switch l {
	case LimitConns:
		return "total"
	case LimitConnsPerAddr:
		return "per-address"
	case LimitMemory:
		return "memory"
	}
	return "Limit" + strconv.Itoa(int(l))
}

// Refusal is a connection or a request turned away because a limit was
// reached.
type Refusal struct {
	Limit Limit
	// Addr is the client's IP address (a connection) or IP:port (a
	// request).
	Addr string
	// Max is the limit's value: connections, or bytes.
	Max int64
}

// ConnLimits bounds the connections a listener keeps open. Zero values take
// defaults.
type ConnLimits struct {
	// MaxConns bounds the open connections in all (default
	// DefaultMaxConns).
	MaxConns int
	// MaxConnsPerAddr bounds the open connections from one IP address
	// (default DefaultMaxConnsPerAddr), so that one client cannot take
	// every connection.
	MaxConnsPerAddr int
	// Logger is told of refused connections, at most once per
	// refusalLogEvery.
	Logger hclog.Logger
	// OnRefused, if set, is called for every refused connection.
	OnRefused func(Refusal)
}

// Connection limits unless configured. The per-address one is well below
// the total so that one client holding all it may still leaves room for
// others, and high enough for a development machine where three nodes and
// every tool connect from 127.0.0.1.
const (
	DefaultMaxConns        = 4096
	DefaultMaxConnsPerAddr = 1024
)

// ConnLimiter counts open connections in all and per client IP address,
// and refuses those over its limits. It is safe for concurrent use.
type ConnLimiter struct {
	limits ConnLimits
	log    *refusalLog
	mu     struct {
		sync.Mutex
		total  int
		byAddr map[string]int
	}
}

// NewConnLimiter returns a limiter with limits.
func NewConnLimiter(limits ConnLimits) *ConnLimiter {
	if limits.MaxConns <= 0 {
		limits.MaxConns = DefaultMaxConns
	}
	if limits.MaxConnsPerAddr <= 0 {
		limits.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	if limits.Logger == nil {
		limits.Logger = hclog.NewNullLogger()
	}
	if limits.OnRefused == nil {
		limits.OnRefused = func(Refusal) {}
	}
	l := &ConnLimiter{limits: limits, log: newRefusalLog(limits.Logger)}
	l.mu.byAddr = make(map[string]int)
	return l
}

// addrKey is what connections are counted by: the IP address alone.
func addrKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Admit counts a new connection from addr. Under the limits it returns a
// function to call once when the connection closes. Over one it counts
// nothing, logs (at a bounded rate), reports the refusal to OnRefused and
// returns nil: the caller closes the connection at once.
func (l *ConnLimiter) Admit(addr net.Addr) (release func()) {
	key := addrKey(addr)
	l.mu.Lock()
	var r *Refusal
	switch {
	case l.mu.total >= l.limits.MaxConns:
		r = &Refusal{Limit: LimitConns, Addr: key, Max: int64(l.limits.MaxConns)}
	case l.mu.byAddr[key] >= l.limits.MaxConnsPerAddr:
		r = &Refusal{Limit: LimitConnsPerAddr, Addr: key, Max: int64(l.limits.MaxConnsPerAddr)}
	default:
		l.mu.total++
		l.mu.byAddr[key]++
	}
	l.mu.Unlock()
	if r != nil {
		l.log.refused("too many connections; closing new one", *r)
		l.limits.OnRefused(*r)
		return nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.mu.total--
			if l.mu.byAddr[key]--; l.mu.byAddr[key] == 0 {
				delete(l.mu.byAddr, key)
			}
			l.mu.Unlock()
		})
	}
}

// Conns is the number of connections admitted and not yet released.
func (l *ConnLimiter) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.total
}

// LimitListener returns a listener that accepts from ln only the
// connections l admits: one over a limit is closed at once and Accept goes
// on to the next. Closing an accepted connection releases it. It is for
// servers that do not go through Server (the HTTP surface); Server applies
// its own limits.
func LimitListener(ln net.Listener, l *ConnLimiter) net.Listener {
	return &limitListener{Listener: ln, l: l}
}

type limitListener struct {
	net.Listener
	l *ConnLimiter
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		nc, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release := ll.l.Admit(nc.RemoteAddr())
		if release == nil {
			nc.Close()
			continue
		}
		return &limitedConn{Conn: nc, release: release}, nil
	}
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// refusalLogEvery bounds how often refusals are logged: a client that
// opens connections in a loop must not fill the log.
const refusalLogEvery = 10 * time.Second

// refusalLog logs refusals at a bounded rate: the first at once, then at
// most one line per refusalLogEvery, which counts those not logged.
type refusalLog struct {
	log hclog.Logger
	mu  struct {
		sync.Mutex
		last       time.Time
		suppressed int
	}
}

func newRefusalLog(log hclog.Logger) *refusalLog { return &refusalLog{log: log} }

func (rl *refusalLog) refused(msg string, r Refusal) {
	now := time.Now()
	rl.mu.Lock()
	if now.Sub(rl.mu.last) < refusalLogEvery {
		rl.mu.suppressed++
		rl.mu.Unlock()
		return
	}
	suppressed := rl.mu.suppressed
	rl.mu.last, rl.mu.suppressed = now, 0
	rl.mu.Unlock()
	rl.log.Warn(msg, "limit", r.Limit.String(), "max", r.Max, "peer", r.Addr, "refused_since_last_line", suppressed)
}
