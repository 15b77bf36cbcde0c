package autopilot

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// Sentinel errors of package autopilot.
var (
	// ErrInvalidPolicy: a policy the autopilot refuses to run with.
	ErrInvalidPolicy = errors.New("autopilot: invalid policy")
	// ErrCommandFailedTwice: a command the autopilot ran failed twice in a
	// row for the same reason; it stopped.
	ErrCommandFailedTwice = errors.New("autopilot: a command failed twice")
	// ErrMostBrokersSilent: half of the brokers or more were silent at
	// once (or none answered) for the grace period: a network problem,
	// not dead brokers; it stopped.
	ErrMostBrokersSilent = errors.New("autopilot: most brokers silent")
)

// Off, as Policy.RecoverAfter or Policy.LeadersBackAfter, turns that step
// off: the operator does it by hand.
const Off time.Duration = -1

// Policy is when the autopilot acts.
type Policy struct {
	// FailoverAfter is the grace period: how long a broker is silent
	// before its partitions are failed over and it is dropped.
	FailoverAfter time.Duration
	// RecoverAfter is how long a returning broker answers before it is
	// recovered; Off: never.
	RecoverAfter time.Duration
	// LeadersBackAfter is how long the cluster is whole with leaders off
	// their preferred replicas before elect-leaders; Off: never.
	LeadersBackAfter time.Duration
	// PollInterval is how often the autopilot looks.
	PollInterval time.Duration
	// LeaseTTL is how long its lease lasts without a renewal.
	LeaseTTL time.Duration
}

// DefaultPolicy is the policy of docs/autopilot.md.
func DefaultPolicy() Policy {
	return Policy{FailoverAfter: 10 * time.Second, RecoverAfter: 5 * time.Second, LeadersBackAfter: 10 * time.Second,
		PollInterval: time.Second, LeaseTTL: 10 * time.Second}
}

// gossipConfig is the memberlist configuration the nodes run with: its
// LAN defaults (node/gossip.go starts from memberlist.DefaultLANConfig
// and changes only addresses, names and keys).
func gossipConfig() *memberlist.Config { return memberlist.DefaultLANConfig() }

// GossipBound is the least time gossip needs to find a dead member of a
// cluster of n nodes dead: a probe (ProbeInterval) unanswered within
// ProbeTimeout makes it suspect, and a suspect is declared dead after
// SuspicionMult × max(1, log10 n) × ProbeInterval. With the nodes'
// settings that is 1 s + 0.5 s + 4 s = 5.5 s up to 9 nodes.
func GossipBound(n int) time.Duration {
	mc := gossipConfig()
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	suspicion := time.Duration(float64(mc.SuspicionMult) * scale * float64(mc.ProbeInterval))
	return mc.ProbeInterval + mc.ProbeTimeout + suspicion
}

// gossipWhy explains GossipBound(n) for an error.
func gossipWhy(n int) string {
	mc := gossipConfig()
	size := "a cluster of up to 9 nodes"
	if n >= 10 {
		size = fmt.Sprintf("a cluster of %d nodes", n)
	}
	return fmt.Sprintf("the nodes' gossip (memberlist's LAN settings) probes each member every %s, waits %s for the answer, "+
		"then holds an unanswered member suspect for %s in %s before it declares it dead",
		mc.ProbeInterval, mc.ProbeTimeout, GossipBound(n)-mc.ProbeInterval-mc.ProbeTimeout, size)
}

// Validate checks the policy for a cluster of n brokers (n < 10 for the
// check made before the cluster is known): every error matches
// ErrInvalidPolicy and says why.
func (p Policy) Validate(n int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPolicy, fmt.Sprintf(format, args...))
	}
	switch {
	case p.FailoverAfter <= 0:
		return bad("--failover-after %s: want a positive duration", p.FailoverAfter)
	case p.PollInterval <= 0:
		return bad("--poll-interval %s: want a positive duration", p.PollInterval)
	case p.RecoverAfter < 0 && p.RecoverAfter != Off:
		return bad("--recover-after %s: want a duration of 0 or more, or off", p.RecoverAfter)
	case p.LeadersBackAfter < 0 && p.LeadersBackAfter != Off:
		return bad("--leaders-back-after %s: want a duration of 0 or more, or off", p.LeadersBackAfter)
	}
	if b := GossipBound(n); p.FailoverAfter < b {
		return bad("--failover-after %s is shorter than the %s gossip needs to find a dead node dead (%s): "+
			"the autopilot would fail brokers over on a missed probe, before gossip could agree they are gone; give at least %s",
			p.FailoverAfter, b, gossipWhy(n), b)
	}
	if 2*p.PollInterval > p.FailoverAfter {
		return bad("--poll-interval %s is more than half of --failover-after %s: a broker would be failed over after one or two looks",
			p.PollInterval, p.FailoverAfter)
	}
	if p.LeaseTTL < 3*p.PollInterval {
		return bad("--lease-ttl %s is less than three poll intervals (%s): one slow poll would lose the lease", p.LeaseTTL, 3*p.PollInterval)
	}
	if p.LeaseTTL < time.Second || p.LeaseTTL > time.Hour {
		return bad("--lease-ttl %s: want 1s to 1h", p.LeaseTTL)
	}
	return nil
}

// policyFile is a policy file's JSON: durations as Go writes them
// ("10s", "1m30s"), or "off" where a step may be turned off.
type policyFile struct {
	FailoverAfter    *string `json:"failover_after"`
	RecoverAfter     *string `json:"recover_after"`
	LeadersBackAfter *string `json:"leaders_back_after"`
	PollInterval     *string `json:"poll_interval"`
	LeaseTTL         *string `json:"lease_ttl"`
}

// ParsePolicy reads a policy file's JSON over base: the keys it sets
// replace base's values. Unknown keys and bad values match
// ErrInvalidPolicy.
func ParsePolicy(data []byte, base Policy) (Policy, error) {
	var f policyFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return base, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	p := base
	for _, k := range []struct {
		key      string
		value    *string
		to       *time.Duration
		mayBeOff bool
	}{
		{"failover_after", f.FailoverAfter, &p.FailoverAfter, false},
		{"recover_after", f.RecoverAfter, &p.RecoverAfter, true},
		{"leaders_back_after", f.LeadersBackAfter, &p.LeadersBackAfter, true},
		{"poll_interval", f.PollInterval, &p.PollInterval, false},
		{"lease_ttl", f.LeaseTTL, &p.LeaseTTL, false},
	} {
		if k.value == nil {
			continue
		}
		d, err := ParseDuration(*k.value, k.mayBeOff)
		if err != nil {
			return base, fmt.Errorf("%w: %s: %v", ErrInvalidPolicy, k.key, err)
		}
		*k.to = d
	}
	return p, nil
}

// ParseDuration reads a duration as Go writes it, or "off" (Off) when
// mayBeOff.
func ParseDuration(s string, mayBeOff bool) (time.Duration, error) {
	if mayBeOff && strings.EqualFold(strings.TrimSpace(s), "off") {
		return Off, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if mayBeOff {
			return 0, fmt.Errorf("%q: want a duration (10s, 1m) or off", s)
		}
		return 0, fmt.Errorf("%q: want a duration (10s, 1m)", s)
	}
	return d, nil
}

// String is the policy as the autopilot logs it at start.
func (p Policy) String() string {
	return fmt.Sprintf("failover after %s, recover after %s, leaders back after %s, poll every %s, lease %s",
		p.FailoverAfter, offOr(p.RecoverAfter), offOr(p.LeadersBackAfter), p.PollInterval, p.LeaseTTL)
}

func offOr(d time.Duration) string {
	if d == Off {
		return "off"
	}
	return d.String()
}
