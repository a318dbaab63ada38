package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// withRetry calls attempt until it succeeds, fails with an error that a
// retry cannot change, or ctx is done. Only transport failures, Unavailable
// answers and attempts that ran out of their own time are retried; the
// caller makes a retry safe by sending the same request_id or op_id every
// time. Each attempt gets a context bounded by wait plus the attempt timeout
// (wait is 0 except for a waiting acquire) and the attempt number, from 0.
//
// Each attempt goes to the endpoint in use (pick). One that fails so
// (failoverOn) moves the Client to the next endpoint, and the retry goes
// there: at once while this call has not yet tried every endpoint, with
// backoff after that. A retry on another node is as safe as one on the
// same: the ids and seqs live in the replicated state.
//
// When ctx ends with a cause (a lease's Context when the lease is lost), the
// error returned wraps that cause too, so that errors.Is(err, ErrLeaseLost)
// holds for a call made under a lost lease's context.
func (c *Client) withRetry(ctx context.Context, op string, wait time.Duration, attempt func(ctx context.Context, ep *endpoint, n int) error) error {
	if c.isClosed() {
		return ErrClientClosed
	}
	if c.sought.CompareAndSwap(false, true) {
		c.seekLeader(ctx, leaderAskTimeout)
	}
	pause := c.cfg.backoffMin
	unreachable := 0 // leading attempts that could not connect at all
	var last error   // the previous attempt's failure, said when ctx ends the next one
	for n := 0; ; n++ {
		ep := c.pick()
		err := c.bounded(ctx, wait, func(actx context.Context) error { return attempt(actx, ep, n) })
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if errors.Is(err, errAskAgain) {
				err = ctx.Err()
			}
			if last != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				// The attempt ctx cut says nothing; the one before it
				// (a node's answer, a dial error) says why the call
				// was still retrying.
				err = &retriedError{err: err, last: last}
			}
			return withCause(ctx, toError(op, err))
		}
		last = err
		if te := tlsFailure(ep.url, err); te != nil {
			return te
		}
		if c.cfg.failFast && unreachable == n && cannotConnect(err) {
			// With several endpoints, fail fast only when none of them
			// can be reached.
			if unreachable++; unreachable == len(c.endpoints) {
				return &UnreachableError{URL: strings.Join(c.Endpoints(), ","), Err: err}
			}
		}
		if !retriable(err) {
			return toError(op, err)
		}
		if failoverOn(err) {
			c.failover(ep)
		}
		c.cfg.logger.Debug("fence: retrying", "op", op, "attempt", n+1, "endpoint", ep.url, "err", err)
		if n+1 < len(c.endpoints) && failoverOn(err) {
			continue // the next endpoint has not been tried by this call yet
		}
		t := time.NewTimer(jitter(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, errAskAgain) {
				err = ctx.Err() // the last attempt's own error was not a failure
			}
			return withCause(ctx, toError(op, err))
		case <-t.C:
		}
		pause = min(2*pause, c.backoffCap(answeredUnavailable(err)))
	}
}

// electionBackoff bounds the retry pause after a server answered
// Unavailable: it is up, and most likely waiting for a leader (an election
// takes about an election timeout, 1s by default), so the call comes back
// at least this often and finds the new leader soon after it takes office.
// Failures to reach a server keep the full backoff (WithBackoff).
const electionBackoff = 250 * time.Millisecond

// backoffCap is the greatest retry pause, after a server answered
// Unavailable (waiting) or not.
func (c *Client) backoffCap(waiting bool) time.Duration {
	if waiting {
		return max(min(c.cfg.backoffMax, electionBackoff), c.cfg.backoffMin)
	}
	return c.cfg.backoffMax
}

// answeredUnavailable reports an Unavailable status sent by a server, as
// opposed to a connection that could not be made or broke.
func answeredUnavailable(err error) bool {
	var op *net.OpError
	return connect.CodeOf(err) == connect.CodeUnavailable && !errors.As(err, &op) &&
		!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errKeepAliveTimeout)
}

// failoverOn reports a failure of the endpoint rather than of the request:
// it could not be reached, the connection broke, it answered Unavailable
// (no leader, shutting down, a forwarded call it could not pass on), or an
// attempt got no answer in time. Another endpoint may do better.
func failoverOn(err error) bool {
	return !errors.Is(err, errAskAgain) && retriable(err)
}

// bounded runs one attempt under a context that ends wait plus the attempt
// timeout from now. An attempt that ran out of its own time (ctx itself
// still live) returns an error wrapping errAttemptTimeout, which is retried.
func (c *Client) bounded(ctx context.Context, wait time.Duration, attempt func(context.Context) error) error {
	actx, cancel := context.WithTimeoutCause(ctx, wait+c.cfg.attemptTimeout, errAttemptTimeout)
	defer cancel()
	err := attempt(actx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		return fmt.Errorf("%w after %s: %w", errAttemptTimeout, wait+c.cfg.attemptTimeout, err)
	}
	return err
}

// jitter returns a random pause in [pause/2, pause], so that clients that
// failed together do not retry together.
func jitter(pause time.Duration) time.Duration {
	return pause/2 + rand.N(pause/2+1)
}

// errAttemptTimeout: one attempt got no answer within its bound. Its outcome
// is unknown; a retry with the same id learns it.
var errAttemptTimeout = errors.New("attempt timed out")

// errAskAgain: the attempt learned for certain that it holds nothing and
// changed its request so that the next attempt is a new one.
var errAskAgain = errors.New("fence: ask again with a new request")

// retriable reports a failure after which the request may not have reached
// the server, or the server asks to come back: transport errors (which
// Connect reports as Unavailable), Unavailable answers and attempts that ran
// out of their own time. RESOURCE_EXHAUSTED (a server limit) and BUSY are
// not retried: waiting for them is the caller's decision.
func retriable(err error) bool {
	if errors.Is(err, errAskAgain) || errors.Is(err, errAttemptTimeout) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return connect.CodeOf(err) == connect.CodeUnavailable
}

// cannotConnect reports a failure to open a connection at all: refused,
// unknown host, no route. The request never reached a server.
func cannotConnect(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// UnreachableError: with WithFailFast, the first attempt of a call could
// not connect to the server at URL — with several endpoints, the first
// attempt on each could not connect to any of them, and URL lists them all,
// comma-separated.
type UnreachableError struct {
	URL string
	Err error // the (last) dial error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("fence: cannot reach the server at %s: %v", e.URL, dialCause(e.Err))
}

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// dialCause is the innermost useful part of a dial error ("connection
// refused"), without Connect's and net's wrapping.
func dialCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	return err
}

// withCause adds the cause of ctx's end to err when it says more than the
// plain context error (a lost lease, a released one, a closed client).
func withCause(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if cause == nil || cause == ctx.Err() || errors.Is(err, cause) {
		return err
	}
	return &causedError{err: err, cause: cause}
}

// retriedError is a call's error when its context ended during a retry:
// the cut attempt's error, with the failure that made the call retry.
type retriedError struct{ err, last error }

func (e *retriedError) Error() string {
	return fmt.Sprintf("%v (last failure before it: %v)", e.err, e.last)
}
func (e *retriedError) Unwrap() error { return e.err }

// causedError is a call's error when its context ended for a reason of its
// own: it matches both (errors.Is err, errors.Is cause).
type causedError struct{ err, cause error }

func (e *causedError) Error() string   { return fmt.Sprintf("%v (%v)", e.err, e.cause) }
func (e *causedError) Unwrap() []error { return []error{e.cause, e.err} }

// toError turns an API error into the typed fence error it carries, or
// wraps it with the operation's name.
func toError(op string, err error) error {
	typed := apierr.FromConnect(err)
	if fence.ReasonOf(typed) != "" {
		return typed
	}
	return fmt.Errorf("fence: %s: %w", op, err)
}
