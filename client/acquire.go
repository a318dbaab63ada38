package client

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
)

// Acquire takes lock name and returns the held Lease, kept alive in the
// background until it is released or lost.
//
// On a Client with a session (the default) the lease is bound to the
// session unless TTL or KeepAlive is given: it has no TTL of its own, lives
// while the session lives, and ends with it (see Lease). The request goes
// over the session's stream with the session's next seq, so a resend after
// a reconnect is applied once. With TTL or KeepAlive, or on a Client made
// WithoutSession, the lease is standalone: it has its own TTL and is
// renewed by its own keepalive, as described below. If the server does not
// support sessions, leases are standalone with the session's TTL.
//
// Without Wait it tries once: a held lock is refused with *fence.BusyError
// (holder, its token and remaining TTL). With Wait(d) the request queues
// FIFO on the server and is granted in arrival order, or refused with a
// *fence.BusyError whose Waited is set when d runs out.
//
// All attempts of one call carry the same request_id, so when a reply is
// lost and the call retries, the server returns the lease it already granted
// instead of a second one (G5). Attempts resend the same request, including
// the full Wait. If a retry learns that the lease granted to an earlier
// attempt has already ended (a wait cancelled when its connection dropped,
// or a lease that expired meanwhile), the caller never held it, and the
// call asks again with a fresh request_id — unless the request_id is the
// caller's own (RequestID), in which case that certain answer is returned. A lease obtained with Wait is renewed once before it is
// returned, so that its deadline counts from a fresh send time.
//
// Shared takes the lock beside other shared holders; Permits(n) takes one
// of its n permits (AcquireSet takes several locks at once).
func (c *Client) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return c.acquire(ctx, name, nil, opts)
}

// AcquireSet takes every lock of locks at once, or none, under one Lease
// with one token (the set's lease): in any order, each name once, at most
// fence.MaxSetLocks; each LockSpec says its lock's mode and permits (the
// Shared and Permits options are for Acquire's one lock and are refused
// here, naming mode or permits). With Wait the set queues FIFO on every
// lock it names and keeps its place on each until all are granted
// together. The Lease's Name is the first lock by name (Locks is every
// lock, sorted by name); renewing or releasing it renews or releases them
// all, and losing it loses them all. Hand a guard protecting one lock's
// resource that lock's proof (Lease.ProofFor). A set of one lock is that
// lock. Everything else is as Acquire.
//
// A method of its own rather than an option of Acquire: Acquire's name is
// one lock, and a set has none; fence.AcquireRequest.Locks is the same
// choice in the request.
func (c *Client) AcquireSet(ctx context.Context, locks []fence.LockSpec, opts ...AcquireOption) (*Lease, error) {
	if len(locks) == 0 {
		return nil, fence.Invalid("locks", "at least one lock", "none")
	}
	return c.acquire(ctx, "", append([]fence.LockSpec(nil), locks...), opts)
}

func (c *Client) acquire(ctx context.Context, name string, locks []fence.LockSpec, opts []AcquireOption) (*Lease, error) {
	cfg := acquireConfig{req: fence.AcquireRequest{TTL: DefaultTTL, Owner: defaultOwner()}}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.req.Name, cfg.req.Locks = name, locks
	if name == "" && len(locks) > 0 {
		name = fence.SortLocks(locks)[0].Name
	}
	ownID := cfg.req.RequestID == ""
	if ownID {
		cfg.req.RequestID = newID()
	}
	// Judged as a standalone acquire (the TTL is the lease's, or the
	// session's when the server has none), by the server's bounds but the
	// largest TTL, which the server knows.
	if err := cfg.req.Validate(fence.Limits{}); err != nil {
		return nil, err
	}
	if c.sess != nil && !cfg.own {
		l, err := c.sess.acquire(ctx, name, cfg, ownID)
		if !useUnary(err) {
			return l, err
		}
		// The server has no sessions: a standalone lease with the
		// session's TTL.
		cfg.req.TTL = c.cfg.sessionTTL
	}
	req := acquireToProto(cfg.req)
	var granted fence.Lease
	var sent time.Time
	err := c.withRetry(ctx, "acquire", cfg.req.Wait, func(ctx context.Context, ep *endpoint, n int) error {
		sent = time.Now()
		resp, err := ep.locks.Acquire(ctx, connect.NewRequest(req))
		if err != nil {
			if n > 0 && ownID && grantEnded(err) {
				// An earlier attempt of this call was granted and that
				// lease has ended since (its wait was cancelled when the
				// connection dropped, or it expired while we retried). We
				// never saw it, so we never held it: ask again, as a new
				// request.
				req.RequestId = newID()
				return errAskAgain
			}
			return err
		}
		granted = leaseFromProto(resp.Msg.GetLease())
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := newLease(c, granted, sent, cfg.keepAlive)
	if cfg.req.Wait > 0 {
		if err := l.Renew(ctx); err != nil {
			// The grant is of no use to a caller that cannot know its
			// deadline; free it for the next waiter if still held.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = c.Release(rctx, granted.Name, granted.Token)
			cancel()
			return nil, err
		}
	}
	if err := c.track(l); err != nil {
		l.stop(err)
		return nil, err
	}
	l.start()
	return l, nil
}

// grantEnded reports a retried acquire told that the lease its request_id
// was granted has ended.
func grantEnded(err error) bool {
	typed := apierr.FromConnect(err)
	return errors.Is(typed, fence.ErrNotHolder) || errors.Is(typed, fence.ErrLeaseExpired)
}
