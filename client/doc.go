// Package client is the Go SDK of Fence: leases with fencing tokens, kept
// alive in the background, and fenced writes to the server's built-in store.
//
// A worker takes a lease, sends its token with every protected write, and
// stops when the lease is lost:
//
//	c, err := client.New("http://127.0.0.1:7420")
//	lease, err := c.Acquire(ctx, "sku-42", client.TTL(5*time.Second))
//	defer lease.Release(context.Background())
//	_, err = c.Write(lease.Context(), "stock/sku-42", lease.Token(), []byte("8"))
//	if errors.Is(err, fence.ErrStaleToken) { /* a newer owner wrote first */ }
//
// # Leases
//
// [Client.Acquire] tries once, or with [Wait] queues FIFO on the server.
// The returned [Lease] is renewed in the background about every TTL/3. Its
// [Lease.Deadline] is a local safe deadline on the monotonic clock:
// send_time + remaining × (1 − drift) for the last successful grant or renew
// (see fence.SafeDeadline). [Lease.Done] and [Lease.Context] are closed when
// the lease is lost — a renew was refused, or the safe deadline passed
// without a successful renew — and then the lease is never renewed again
// (guarantee G8). [Lease.Err] says why.
//
// A lease obtained after a wait is renewed once before Acquire returns it,
// so its deadline counts from a fresh send time. A renew that reports a
// shorter remaining TTL than before (the TTL was shortened on the server)
// pulls the deadline in. [Lease.RenewErr] reports background renewals that
// are failing, before the lease is lost.
//
// A call made under a lease's context after the lease ended fails with an
// error that matches both context.Canceled and the reason the lease ended
// (errors.Is(err, ErrLeaseLost) for a lost lease).
//
// # Retries
//
// Every call is retried with backoff, within its context, when the server
// cannot be reached or answers Unavailable, or when one attempt gets no
// answer within its own bound: [WithAttemptTimeout] (default 10s), plus the
// wait of a waiting acquire; a background renewal gets TTL/3. A limit
// (RESOURCE_EXHAUSTED) or BUSY is returned, never retried. [WithFailFast]
// makes a call whose first attempt cannot connect at all fail at once with
// an [UnreachableError] (the CLI uses it). Retries are made safe by ids:
// an Acquire carries one request_id (fresh per call unless [RequestID] is
// given) across all its attempts, so a retry after a lost reply returns the
// same lease, never a second one (G5); Write and Add carry one op_id (fresh
// per call unless [OpID] is given), so a retry does not apply twice — the
// result then reports Replayed.
//
// # Errors
//
// Refusals are the typed errors of package fence and work with errors.Is
// and errors.As: fence.ErrBusy / *fence.BusyError (holder, remaining TTL),
// fence.ErrStaleToken / *fence.StaleTokenError (both tokens),
// fence.ErrNotHolder, fence.ErrLeaseExpired, fence.ErrUnknownToken,
// fence.ErrOpConflict and fence.ErrInvalid / *fence.InvalidError (field and
// bound). Bad input is refused locally with *fence.InvalidError before any
// request is sent, where the bound is known to the client.
package client
