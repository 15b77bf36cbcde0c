package controller

import (
	"context"
	"errors"
	"time"

	"gostream/transport"
)

// report gives each step's result, in order, and records in the audit
// trail, in one append, those that succeeded and are not there yet (a
// step's change is recorded with it: commitSteps).
func (c *Controller) report(requester string, dry bool, steps []*step) transport.ChangeReport {
	rep := transport.ChangeReport{Results: []transport.ChangeResult{}}
	var done []transport.ChangeResult
	for _, s := range steps {
		s.res.DryRun = dry
		res := c.result(s.res, s.err)
		rep.Results = append(rep.Results, res)
		if s.err == nil && !dry && !s.recorded {
			done = append(done, res)
		}
	}
	c.record(requester, done...)
	return rep
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

// events are the audit events of results, asked for by requester, now.
func events(requester string, results []transport.ChangeResult) []transport.HistoryEvent {
	if len(results) == 0 {
		return nil
	}
	now := time.Now().UTC()
	evs := make([]transport.HistoryEvent, len(results))
	for i, res := range results {
		evs[i] = transport.HistoryEvent{Time: now, Requester: requester, ChangeResult: res}
	}
	return evs
}

// record appends events of what changed nothing in the metadata to the
// audit trail (a change's own go with it: commitAudited). A failure to
// write it is logged.
func (c *Controller) record(requester string, results ...transport.ChangeResult) {
	evs := events(requester, results)
	if len(evs) == 0 {
		return
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
