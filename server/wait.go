package server

import (
	"context"
	"time"
)

// A waiting acquire's handler is bounded on the server, whatever the client
// sent (fault 2 of issue 6: a handler left waiting forever, or answered
// after its client had given up and retried).
const (
	// replyMargin is kept between the end of a wait and the client's own
	// deadline (Connect-Timeout-Ms, grpc-timeout): the machine ends the
	// wait and the answer (the grant or BUSY) travels back within it. It is
	// at most a quarter of the client's budget.
	replyMargin = time.Second
	// handlerMargin is how much longer than its wait a waiting handler may
	// run: the machine ends a wait by itself at its deadline; past this the
	// handler gives up (its wait is withdrawn like any abandoned one).
	handlerMargin = 5 * time.Second
)

// boundWait returns the wait to propose and the context to wait in. A wait
// longer than the client's deadline allows (its budget less the reply
// margin) is shortened, so the client hears the grant or BUSY (Waited)
// before it gives up instead of a grant it never sees. The context ends
// handlerMargin after the wait even when the client set no deadline.
func boundWait(ctx context.Context, wait time.Duration) (context.Context, time.Duration, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		budget := time.Until(dl)
		margin := min(replyMargin, budget/4)
		if budget-margin < wait {
			wait = max(budget-margin, time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait+handlerMargin)
	return ctx, wait, cancel
}
