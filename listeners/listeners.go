// Package listeners reads a protocol's named listeners from configuration:
// the addresses a node binds and, per name, the address clients must dial
// (Kafka's listeners / advertised.listeners). A node serves each listener
// separately, and answers a client with the advertised addresses of the
// listener its request came in on (docs/kafka.md, "Listeners").
//
// The syntax is NAME://HOST:PORT,... with NAME matching [a-z0-9_-]{1,32};
// a bare HOST:PORT is the listener named "default". Parse refuses what a
// client could not use: an advertised host that is empty, 0.0.0.0 or ::, an
// advertised name with no listener, a listener on every interface with no
// advertised address, a name given twice and two listeners on one port.
package listeners

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Listener is one named listener of a protocol: the address it binds and
// the address it is advertised at, the one clients dial.
type Listener struct {
	Name      string
	Listen    string
	Advertise string
}

// DefaultName names a listener given as a bare HOST:PORT.
const DefaultName = "default"

// Which says which of the two values an Error is about.
type Which int

const (
	// InListen: the listeners to bind.
	InListen Which = iota
	// InAdvertise: the advertised addresses.
	InAdvertise
)

// Error is why Parse refused a value; the caller names the flag or field.
type Error struct {
	Which  Which
	Value  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("listeners %q: %s", e.Value, e.Reason)
}

var namePattern = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Parse reads a protocol's listeners from its two values, listen and
// advertise (package doc). A listener bound to a specific host and not
// advertised is advertised at its own address. Empty listen gives none.
// Its errors are *Error.
func Parse(listen, advertise string) ([]Listener, error) {
	ls, err := parseNamed(InListen, listen)
	if err != nil {
		return nil, err
	}
	ads, err := parseNamed(InAdvertise, advertise)
	if err != nil {
		return nil, err
	}
	refuse := func(w Which, format string, args ...any) error {
		v := listen
		if w == InAdvertise {
			v = advertise
		}
		return &Error{Which: w, Value: v, Reason: fmt.Sprintf(format, args...)}
	}
	byName := map[string]int{}
	ports := map[string]string{}
	for i, l := range ls {
		byName[l.Name] = i
		_, port, _ := net.SplitHostPort(l.Listen)
		if other, ok := ports[port]; ok && port != "0" {
			return nil, refuse(InListen, "listeners %s and %s share port %s", other, l.Name, port)
		}
		ports[port] = l.Name
	}
	for _, a := range ads {
		i, ok := byName[a.Name]
		if !ok {
			return nil, refuse(InAdvertise, "advertises %s, which has no listener of that name", a.Name)
		}
		host, _, _ := net.SplitHostPort(a.Listen)
		if unspecified(host) {
			return nil, refuse(InAdvertise, "listener %s advertises %q: clients cannot dial it; give the host name or address they reach this node at", a.Name, a.Listen)
		}
		ls[i].Advertise = a.Listen
	}
	for i, l := range ls {
		if l.Advertise != "" {
			continue
		}
		host, _, _ := net.SplitHostPort(l.Listen)
		if unspecified(host) {
			return nil, refuse(InAdvertise, "listener %s binds every interface (%s): advertise the address clients dial for it", l.Name, l.Listen)
		}
		ls[i].Advertise = l.Listen
	}
	return ls, nil
}

// parseNamed reads NAME://HOST:PORT,... or one bare HOST:PORT.
func parseNamed(w Which, value string) ([]Listener, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []Listener
	seen := map[string]bool{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		name, addr, named := strings.Cut(item, "://")
		if !named {
			name, addr = DefaultName, item
		}
		refuse := func(format string, args ...any) error {
			return &Error{Which: w, Value: value, Reason: fmt.Sprintf(format, args...)}
		}
		if !namePattern.MatchString(name) {
			return nil, refuse("listener name %q: want [a-z0-9_-], 1 to 32 characters", name)
		}
		if seen[name] {
			return nil, refuse("listener %s given twice", name)
		}
		seen[name] = true
		if why := CheckHostPort(addr); why != "" {
			return nil, refuse("listener %s: %s", name, why)
		}
		out = append(out, Listener{Name: name, Listen: addr})
	}
	return out, nil
}

// CheckHostPort returns why addr is not a HOST:PORT address, or "" if it is.
func CheckHostPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "want HOST:PORT"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "want HOST:PORT with PORT a number from 0 to 65535"
	}
	return ""
}

// unspecified reports whether host names no one address.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// Advertised returns the listeners' advertised addresses by name (nil for
// none).
func Advertised(ls []Listener) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range ls {
		out[l.Name] = l.Advertise
	}
	return out
}
