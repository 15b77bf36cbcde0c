package node

import (
	"context"
	"sync"
)

// group runs goroutines that share one context: the first one to return an
// error cancels that context for all of them, and wait returns that first
// error after every goroutine has returned. It is errgroup.WithContext
// without the dependency.
type group struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		err error
	}
}

// newGroup returns a group whose goroutines see a context derived from ctx.
func newGroup(ctx context.Context) *group {
	ctx, cancel := context.WithCancelCause(ctx)
	return &group{ctx: ctx, cancel: cancel}
}

// run starts fn in a goroutine owned by the group.
func (g *group) run(fn func(ctx context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(g.ctx); err != nil {
			g.mu.Lock()
			if g.mu.err == nil {
				g.mu.err = err
			}
			g.mu.Unlock()
			g.cancel(err)
		}
	}()
}

// wait blocks until every goroutine of the group has returned, then returns
// the first error any of them returned, or nil.
func (g *group) wait() error {
	g.wg.Wait()
	g.cancel(nil)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.err
}
