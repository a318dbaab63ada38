package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// LockInfo describes one lock as the server sees it.
type LockInfo struct {
	Name               string
	Lease              *fence.Lease  // nil when free; else the first of Holders
	Holders            []fence.Lease // every lease holding it (shared or permit holders), in grant order
	Permits            uint32        // the lock's permit count while held or waited for (0: not a semaphore)
	Waiters            int           // queued acquirers
	LockDelayRemaining time.Duration
	LastToken          fence.Token // token of the last grant of this lock
}

// Renew extends the lease of lock name held by token, with ttl (0: the
// lease's current TTL). It returns the renewed lease; a token that does not
// hold the lock is refused (fence.ErrNotHolder, fence.ErrLeaseExpired).
// Most callers use Lease.Renew or the automatic keepalive instead.
func (c *Client) Renew(ctx context.Context, name string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	l, _, err := c.renew(ctx, name, token, ttl)
	return l, err
}

// renew also returns the send time of the attempt whose reply carried the
// lease, the base of its safe deadline.
func (c *Client) renew(ctx context.Context, name string, token fence.Token, ttl time.Duration) (fence.Lease, time.Time, error) {
	if err := (fence.RenewRequest{Name: name, Token: token, TTL: ttl}).Validate(fence.Limits{}); err != nil {
		return fence.Lease{}, time.Time{}, err
	}
	var out fence.Lease
	var sent time.Time
	err := c.withRetry(ctx, "renew", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		sent = time.Now()
		var err error
		out, err = c.renewAttempt(ctx, ep, name, token, ttl)
		return err
	})
	return out, sent, err
}

// renewAttempt sends one Renew and returns the raw API error.
func (c *Client) renewAttempt(ctx context.Context, ep *endpoint, name string, token fence.Token, ttl time.Duration) (fence.Lease, error) {
	req := renewToProto(fence.RenewRequest{Name: name, Token: token, TTL: ttl})
	resp, err := ep.locks.Renew(ctx, connect.NewRequest(req))
	if err != nil {
		return fence.Lease{}, err
	}
	return leaseFromProto(resp.Msg.GetLease()), nil
}

// Release frees lock name held by token. When a retry follows an attempt
// whose outcome is unknown and the server then answers that token does not
// hold the lock, Release returns nil: the token holds the lock no longer,
// either because the first attempt released it or because the lease expired
// meanwhile (and the lock may have a new owner); the client cannot tell which.
// While the Client's session is open it goes over the session's stream
// (exactly once by seq), and a lease of this Client's session with that
// token ends with ErrReleased.
func (c *Client) Release(ctx context.Context, name string, token fence.Token) error {
	if err := (fence.ReleaseRequest{Name: name, Token: token}).Validate(fence.Limits{}); err != nil {
		return err
	}
	if c.sess.isOpen() {
		err := c.sess.release(ctx, name, token)
		if !useUnary(err) {
			if l := c.sess.leaseOf(token); err == nil && l != nil && l.name == name {
				l.stop(ErrReleased)
			}
			return err
		}
	}
	return c.releaseUnary(ctx, name, token)
}

// releaseUnary is Release as one unary call with retries.
func (c *Client) releaseUnary(ctx context.Context, name string, token fence.Token) error {
	req := releaseToProto(fence.ReleaseRequest{Name: name, Token: token})
	return c.withRetry(ctx, "release", 0, func(ctx context.Context, ep *endpoint, n int) error {
		_, err := ep.locks.Release(ctx, connect.NewRequest(req))
		if n > 0 && err != nil && errors.Is(toError("release", err), fence.ErrNotHolder) {
			return nil
		}
		return err
	})
}

// Get describes lock name.
func (c *Client) Get(ctx context.Context, name string) (LockInfo, error) {
	if err := fence.ValidateName("name", name); err != nil {
		return LockInfo{}, err
	}
	var out LockInfo
	err := c.withRetry(ctx, "get", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: name}))
		if err != nil {
			return err
		}
		out = lockFromProto(resp.Msg.GetLock())
		if out.Name == "" {
			out.Name = name
		}
		return nil
	})
	return out, err
}

// List describes the locks whose names start with prefix ("" for all),
// sorted by name. Free locks without waiters or lock-delay are not listed.
// It reads every page (ListPage) and returns them all; each page is one
// call with its own retries, so a list taken while locks change is not one
// snapshot: a lock may appear as it was when its page was read.
func (c *Client) List(ctx context.Context, prefix string) ([]LockInfo, error) {
	var out []LockInfo
	token := ""
	for {
		page, next, err := c.ListPage(ctx, prefix, token, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// ListPage reads one page of List: at most size locks (0: the server's
// default, 1000; at most 10,000) after the page that returned pageToken
// ("" for the first page). next is the token of the following page, "" on
// the last one.
func (c *Client) ListPage(ctx context.Context, prefix, pageToken string, size int) (locks []LockInfo, next string, err error) {
	if size < 0 || size > math.MaxUint32 {
		return nil, "", fence.Invalid("page_size", "0 or more", fmt.Sprint(size))
	}
	req := &fencev1.ListRequest{Prefix: prefix, PageToken: pageToken, PageSize: uint32(size)}
	err = c.withRetry(ctx, "list", 0, func(ctx context.Context, ep *endpoint, _ int) error {
		resp, err := ep.locks.List(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		locks = locks[:0]
		for _, l := range resp.Msg.GetLocks() {
			locks = append(locks, lockFromProto(l))
		}
		next = resp.Msg.GetNextPageToken()
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return locks, next, nil
}

// maxDuration leaves the upper TTL bound to the server, whose maximum is
// configurable.
const maxDuration = time.Duration(1<<63 - 1)
