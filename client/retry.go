package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/internal/apierr"
)

// withRetry calls attempt until it succeeds, fails with an error that a
// retry cannot change, or ctx is done. Only transport failures and
// Unavailable answers are retried; the caller makes a retry safe by sending
// the same request_id or op_id every time. attempt gets the attempt number,
// from 0.
func (c *Client) withRetry(ctx context.Context, op string, attempt func(ctx context.Context, ep *endpoint, n int) error) error {
	if c.isClosed() {
		return ErrClientClosed
	}
	pause := c.cfg.backoffMin
	for n := 0; ; n++ {
		err := attempt(ctx, c.pick(), n)
		if err == nil {
			return nil
		}
		if !retriable(err) || ctx.Err() != nil {
			return toError(op, err)
		}
		c.cfg.logger.Debug("fence: retrying", "op", op, "attempt", n+1, "err", err)
		jittered := pause/2 + rand.N(pause/2+1)
		t := time.NewTimer(jittered)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, errAskAgain) {
				err = ctx.Err() // the last attempt's own error was not a failure
			}
			return toError(op, err)
		case <-t.C:
		}
		pause = min(2*pause, c.cfg.backoffMax)
	}
}

// errAskAgain: the attempt learned for certain that it holds nothing and
// changed its request so that the next attempt is a new one.
var errAskAgain = errors.New("fence: ask again with a new request")

// retriable reports a failure after which the request may not have reached
// the server, or the server asks to come back: transport errors (which
// Connect reports as Unavailable) and Unavailable answers.
func retriable(err error) bool {
	if errors.Is(err, errAskAgain) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return connect.CodeOf(err) == connect.CodeUnavailable
}

// toError turns an API error into the typed fence error it carries, or
// wraps it with the operation's name.
func toError(op string, err error) error {
	typed := apierr.FromConnect(err)
	if fence.ReasonOf(typed) != "" {
		return typed
	}
	return fmt.Errorf("fence: %s: %w", op, err)
}
