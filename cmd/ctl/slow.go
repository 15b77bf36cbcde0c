package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"gostream/client"
)

// slowAfter is how long a change waits for the controller before
// gostream-ctl checks whether it answers at all.
const slowAfter = 2 * time.Second

// watchedChange runs call, a change sent to the controller. If the controller has
// not answered after slowAfter and does not answer a ping either (it is
// paused, or cut off), stderr hears of it at once rather than at the
// --timeout. When the change ends with its outcome unknown (sent, never
// answered), the error says how to find out: check.
func watchedChange(ctx context.Context, cl *client.Client, stderr io.Writer, check string, call func() error) error {
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-done:
			return
		case <-time.After(slowAfter):
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		addr, err := cl.PingController(pctx)
		cancel()
		// Said even if the change ended meanwhile: a ping unanswered is
		// news about the controller either way.
		if err != nil && ctx.Err() == nil {
			deadline, _ := ctx.Deadline()
			fmt.Fprintf(stderr, "gostream-ctl: the controller at %s has not answered for %s, nor a ping: it may be paused or cut off; waiting at most until the --timeout (%s left)\n",
				addr, slowAfter, time.Until(deadline).Round(time.Second))
		}
	}()
	err := call()
	close(done)
	<-watched
	if err != nil && errors.Is(err, client.ErrUnknownOutcome) && check != "" {
		return fmt.Errorf("%w; check with %s", err, check)
	}
	return err
}
