package controller

import (
	"context"
	"errors"
	"time"

	"gostream/transport"
)

// report gives each step's result, in order, and records in the audit
// trail, in one append, those that changed something.
func (c *Controller) report(requester string, dry bool, steps []*step) transport.ChangeReport {
	rep := transport.ChangeReport{Results: []transport.ChangeResult{}}
	var done []transport.ChangeResult
	for _, s := range steps {
		s.res.DryRun = dry
		res := c.result(s.res, s.err)
		rep.Results = append(rep.Results, res)
		if s.err == nil && !dry {
			done = append(done, res)
		}
	}
	c.record(requester, done...)
	return rep
}

// reportOne adds one result to a report, and records it in the audit
// trail when it changed something.
func (c *Controller) reportOne(rep *transport.ChangeReport, requester string, dry bool, res transport.ChangeResult, err error) {
	res = c.result(res, err)
	if err == nil && !dry {
		c.record(requester, res)
	}
	rep.Results = append(rep.Results, res)
}

// result is res with err and the name of its wire code, if it failed.
func (c *Controller) result(res transport.ChangeResult, err error) transport.ChangeResult {
	if err != nil {
		err = c.cfg.WireError(err)
		res.Error = err.Error()
		var te *transport.Error
		if errors.As(err, &te) {
			res.ErrorName = te.Code.String()
		}
	}
	return res
}

// record appends events to the audit trail. The trail is kept beside the
// metadata; a failure to write it is logged, not fatal to a change that
// is already persisted.
func (c *Controller) record(requester string, results ...transport.ChangeResult) {
	if len(results) == 0 {
		return
	}
	now := time.Now().UTC()
	evs := make([]transport.HistoryEvent, len(results))
	for i, res := range results {
		evs[i] = transport.HistoryEvent{Time: now, Requester: requester, ChangeResult: res}
	}
	if err := c.journal.record(context.Background(), evs); err != nil {
		c.logger.Error("write audit trail", "err", err)
	}
}

// Record appends an event a broker reported (a catch-up it ran) to the
// audit trail.
func (c *Controller) Record(ev transport.HistoryEvent) error {
	return c.journal.record(context.Background(), []transport.HistoryEvent{ev})
}

// History returns the audit trail, oldest first.
func (c *Controller) History() ([]transport.HistoryEvent, error) {
	return c.journal.history()
}
