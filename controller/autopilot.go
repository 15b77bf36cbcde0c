package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// The autopilot's lease (docs/autopilot.md): several autopilots may
// watch a cluster, and the one that holds the lease acts. Who holds it is
// persisted in the metadata (metadata.Cluster.Autopilot), so that every
// controller knows; until when is kept in the active controller's memory
// only, so that a renewal is no change to persist. A controller that
// becomes active treats the persisted holder's lease as renewed at that
// moment (forget): that may keep another autopilot waiting one time to
// live longer, never lets two hold it.

// minLeaseTTL is the shortest lease an autopilot may ask for.
const minLeaseTTL = time.Second

// leaseKeeper is the active controller's memory of the lease.
type leaseKeeper struct {
	// now is the clock (time.Now when nil).
	now func() time.Time

	mu struct {
		sync.Mutex
		// known is set once the persisted holder has been taken in since
		// this controller became active.
		known   bool
		holder  string
		expires time.Time
	}
}

func (k *leaseKeeper) clock() time.Time {
	if k.now != nil {
		return k.now()
	}
	return time.Now()
}

// forget drops what the keeper knows: the next request takes the
// persisted holder in, with a lease renewed then.
func (k *leaseKeeper) forget() {
	k.mu.Lock()
	k.mu.known, k.mu.holder, k.mu.expires = false, "", time.Time{}
	k.mu.Unlock()
}

// AutopilotLease takes, renews or gives back the autopilot's lease for
// req.Holder. It is granted when nobody holds it, when req.Holder does
// (a renewal), or when the holder's lease has expired; otherwise the
// answer names the holder and when its lease expires. A new holder, or a
// new time to live, is a persisted change of the metadata; a renewal is
// not. A release by the holder clears the persisted holder; by anyone
// else it changes nothing. It returns ErrInvalidRequest for a request
// without a holder or with a time to live out of bounds, and the
// refusals of any change (ErrNotController, ErrStaleMetadata).
func (c *Controller) AutopilotLease(ctx context.Context, req transport.AutopilotLeaseRequest) (transport.AutopilotLeaseResponse, error) {
	if req.Holder == "" || len(req.Holder) > metadata.MaxAutopilotHolder {
		return transport.AutopilotLeaseResponse{}, fmt.Errorf("%w: an autopilot lease names its holder, 1 to %d bytes", ErrInvalidRequest, metadata.MaxAutopilotHolder)
	}
	ttl := time.Duration(req.TTLMillis) * time.Millisecond
	if !req.Release && (ttl < minLeaseTTL || req.TTLMillis > metadata.MaxAutopilotTTLMillis) {
		return transport.AutopilotLeaseResponse{}, fmt.Errorf("%w: an autopilot lease of %d ms: want %d to %d", ErrInvalidRequest,
			req.TTLMillis, minLeaseTTL.Milliseconds(), metadata.MaxAutopilotTTLMillis)
	}
	var resp transport.AutopilotLeaseResponse
	what := fmt.Sprintf("autopilot lease to %s", req.Holder)
	if req.Release {
		what = fmt.Sprintf("autopilot lease given back by %s", req.Holder)
	}
	// The decision is made inside the change, under the lock that orders
	// changes, so that two autopilots asking at once are answered one
	// after the other.
	err := c.change(ctx, what, func(m *metadata.Cluster) error {
		k := &c.lease
		k.mu.Lock()
		defer k.mu.Unlock()
		now := k.clock()
		persisted := ""
		if m.Autopilot != nil {
			persisted = m.Autopilot.Holder
		}
		if !k.mu.known || k.mu.holder != persisted {
			// Taken in fresh: after a takeover, a restore, or a change
			// whose persist failed.
			k.mu.known, k.mu.holder, k.mu.expires = true, persisted, time.Time{}
			if m.Autopilot != nil {
				k.mu.expires = now.Add(time.Duration(m.Autopilot.TTLMillis) * time.Millisecond)
			}
		}
		switch {
		case req.Release:
			if k.mu.holder != req.Holder {
				resp = transport.AutopilotLeaseResponse{Holder: k.mu.holder, Expires: k.mu.expires.UnixMilli()}
				return errNoChange
			}
			k.mu.holder, k.mu.expires = "", time.Time{}
			resp = transport.AutopilotLeaseResponse{}
			if m.Autopilot == nil {
				return errNoChange
			}
			m.Autopilot = nil
			return nil
		case k.mu.holder == "" || k.mu.holder == req.Holder || !now.Before(k.mu.expires):
			if k.mu.holder != req.Holder {
				c.logger.Info("autopilot lease granted", "holder", req.Holder, "previous", k.mu.holder, "ttl", ttl)
			}
			k.mu.holder, k.mu.expires = req.Holder, now.Add(ttl)
			resp = transport.AutopilotLeaseResponse{Holder: req.Holder, Granted: true, Expires: k.mu.expires.UnixMilli()}
			want := metadata.AutopilotLease{Holder: req.Holder, TTLMillis: req.TTLMillis}
			if m.Autopilot != nil && *m.Autopilot == want {
				return errNoChange
			}
			m.Autopilot = &want
			return nil
		default:
			resp = transport.AutopilotLeaseResponse{Holder: k.mu.holder, Expires: k.mu.expires.UnixMilli()}
			return errNoChange
		}
	})
	if err != nil {
		return transport.AutopilotLeaseResponse{}, err
	}
	return resp, nil
}
