package controller

import (
	"errors"
	"time"

	"gostream/transport"
)

// report gives each step's result, in order, recording in the audit trail
// those that changed something.
func (c *Controller) report(requester string, dry bool, steps []*step) transport.ChangeReport {
	rep := transport.ChangeReport{Results: []transport.ChangeResult{}}
	for _, s := range steps {
		s.res.DryRun = dry
		c.reportOne(&rep, requester, dry, s.res, s.err)
	}
	return rep
}

// reportOne adds one result to a report, with its error and the error's
// code name, or, when it changed something, records it in the audit
// trail.
func (c *Controller) reportOne(rep *transport.ChangeReport, requester string, dry bool, res transport.ChangeResult, err error) {
	if err != nil {
		err = c.cfg.WireError(err)
		res.Error = err.Error()
		var te *transport.Error
		if errors.As(err, &te) {
			res.ErrorName = te.Code.String()
		}
	} else if !dry {
		c.record(requester, res)
	}
	rep.Results = append(rep.Results, res)
}

// record appends an event to the audit trail. The trail is kept beside
// the metadata; a failure to write it is logged, not fatal to a change
// that is already persisted.
func (c *Controller) record(requester string, res transport.ChangeResult) {
	ev := transport.HistoryEvent{Time: time.Now().UTC(), Requester: requester, ChangeResult: res}
	if err := c.history.append(ev); err != nil {
		c.logger.Error("write audit trail", "err", err)
	}
}

// Record appends an event a broker reported (a catch-up it ran) to the
// audit trail.
func (c *Controller) Record(ev transport.HistoryEvent) error {
	return c.history.append(ev)
}

// History returns the audit trail, oldest first.
func (c *Controller) History() ([]transport.HistoryEvent, error) {
	return c.history.read()
}
