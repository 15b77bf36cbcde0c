package metadata

import "fmt"

// Bounds of an autopilot lease as the metadata records it.
const (
	// MaxAutopilotHolder bounds the length of an autopilot's name.
	MaxAutopilotHolder = 256
	// MaxAutopilotTTLMillis bounds a lease's time to live: an hour.
	MaxAutopilotTTLMillis = 60 * 60 * 1000
)

// AutopilotLease names the autopilot that holds the lease to act on the
// cluster (docs/autopilot.md) and the time to live it was granted for.
// Only who holds it is persisted; when it expires is the active
// controller's to know, and a controller that takes over counts the
// holder's lease from its takeover.
type AutopilotLease struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttl_ms"`
}

// Clone returns a copy of l (nil for nil).
func (l *AutopilotLease) Clone() *AutopilotLease {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

// validate checks a lease's holder and time to live.
func (l *AutopilotLease) validate() error {
	if l == nil {
		return nil
	}
	if l.Holder == "" || len(l.Holder) > MaxAutopilotHolder {
		return fmt.Errorf("%w: autopilot lease holder %q: want 1 to %d bytes", ErrInvalid, l.Holder, MaxAutopilotHolder)
	}
	if l.TTLMillis <= 0 || l.TTLMillis > MaxAutopilotTTLMillis {
		return fmt.Errorf("%w: autopilot lease of %d ms: want 1 to %d", ErrInvalid, l.TTLMillis, MaxAutopilotTTLMillis)
	}
	return nil
}
