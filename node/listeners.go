package node

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// Listener is one named listener of a protocol: the address it binds and
// the address it is advertised at, the one clients dial (docs/kafka.md,
// "Listeners").
type Listener struct {
	Name      string
	Listen    string
	Advertise string
}

// DefaultListenerName names a listener given as a bare HOST:PORT.
const DefaultListenerName = "default"

var listenerName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// ParseListeners reads a protocol's listeners from its two values (the
// Config fields listenField and advertiseField, which errors name):
// listen, NAME://HOST:PORT,... (a bare HOST:PORT is the listener named
// default), and advertise, the same for the addresses clients dial. A
// listener bound to a specific host and not advertised is advertised at
// its own address. It refuses, naming the flag: a name that is not
// [a-z0-9_-]{1,32}, a name given twice, an advertised host that is empty
// or 0.0.0.0 or ::, an advertised name with no listener, a listener on
// every interface with no advertised address, and two listeners on one
// port.
func ParseListeners(listenField, listen, advertiseField, advertise string) ([]Listener, error) {
	ls, err := parseNamed(listenField, listen)
	if err != nil {
		return nil, err
	}
	ads, err := parseNamed(advertiseField, advertise)
	if err != nil {
		return nil, err
	}
	byName := map[string]int{}
	ports := map[string]string{}
	for i, l := range ls {
		byName[l.Name] = i
		_, port, _ := net.SplitHostPort(l.Listen)
		if other, ok := ports[port]; ok && port != "0" {
			return nil, &FieldError{Field: listenField, Value: listen, Reason: fmt.Sprintf("listeners %s and %s share port %s", other, l.Name, port)}
		}
		ports[port] = l.Name
	}
	for _, a := range ads {
		i, ok := byName[a.Name]
		if !ok {
			return nil, &FieldError{Field: advertiseField, Value: advertise, Reason: fmt.Sprintf("advertises %s, which has no listener of that name", a.Name)}
		}
		host, _, _ := net.SplitHostPort(a.Listen)
		if unspecified(host) {
			return nil, &FieldError{Field: advertiseField, Value: advertise, Reason: fmt.Sprintf("listener %s advertises %q: clients cannot dial it; give the host name or address they reach this node at", a.Name, a.Listen)}
		}
		ls[i].Advertise = a.Listen
	}
	for i, l := range ls {
		if l.Advertise != "" {
			continue
		}
		host, _, _ := net.SplitHostPort(l.Listen)
		if unspecified(host) {
			return nil, &FieldError{Field: advertiseField, Value: advertise, Reason: fmt.Sprintf("listener %s binds every interface (%s): advertise the address clients dial for it", l.Name, l.Listen)}
		}
		ls[i].Advertise = l.Listen
	}
	return ls, nil
}

// parseNamed reads NAME://HOST:PORT,... or one bare HOST:PORT.
func parseNamed(field, value string) ([]Listener, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []Listener
	seen := map[string]bool{}
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		name, addr, named := strings.Cut(item, "://")
		if !named {
			name, addr = DefaultListenerName, item
		}
		if !listenerName.MatchString(name) {
			return nil, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf("listener name %q: want [a-z0-9_-], 1 to 32 characters", name)}
		}
		if seen[name] {
			return nil, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf("listener %s given twice", name)}
		}
		seen[name] = true
		if why := checkHostPort(addr); why != "" {
			return nil, &FieldError{Field: field, Value: value, Reason: fmt.Sprintf("listener %s: %s", name, why)}
		}
		out = append(out, Listener{Name: name, Listen: addr})
	}
	return out, nil
}

// unspecified reports whether host names no one address.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// advertised returns the listeners' advertised addresses by name.
func advertised(ls []Listener) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, l := range ls {
		out[l.Name] = l.Advertise
	}
	return out
}
