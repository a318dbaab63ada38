// Package client is the Go SDK of Fence: leases with fencing tokens, kept
// alive in the background, and fenced writes to the server's built-in store.
//
// A worker takes a lease, sends its token with every protected write, and
// stops when the lease is lost:
//
//	c, err := client.New("http://127.0.0.1:7420")
//	lease, err := c.Acquire(ctx, "sku-42")
//	defer lease.Release(context.Background())
//	_, err = c.Write(lease.Context(), "stock/sku-42", lease.Token(), []byte("8"))
//	if errors.Is(err, fence.ErrStaleToken) { /* a newer owner wrote first */ }
//
// # Sessions
//
// A Client has one session on the server (unless made [WithoutSession]):
// one TTL ([WithSessionTTL], default [DefaultSessionTTL], 10s) and one
// keepalive, every TTL/3, for all the leases acquired on it. It opens on
// the first [Client.Acquire] without [TTL] or [KeepAlive]; [Client.SessionID]
// tells which it is. Its requests, replies and keepalives travel over one
// long-lived HTTP/2 stream (SessionService.Stream; h2c for http://), so a
// waiting acquire holds back no other call, and held leases cost no
// goroutine, timer or connection each (a Lease value and two map entries):
// the whole session runs on two goroutines, one keepalive and one deadline
// timer.
//
// A lease of the session has no TTL of its own: [Lease.TTL] is the
// session's, [Lease.Deadline] the session's safe deadline — the send time
// of its last successful keepalive plus the remaining TTL it reported, less
// the drift margin (fence.SafeDeadline). [Lease.Done] fires when that
// deadline passes without a successful keepalive (Err: a *LostError caused
// by ErrDeadlinePassed), when the server says the session ended (Err
// matches ErrLeaseLost and fence.ErrSessionExpired, for every lease of the
// session at once), when a [Lease.Renew] of it is refused (it was released
// with its token elsewhere: only a renew notices that), when it is
// released, or when the Client is closed. A session that lost its leases
// is closed on the server (best effort) and the next call opens a new one.
//
// Every mutating request on the session (Acquire, Release, Renew, and
// Write, Add, Delete while the session is open) carries the session's next
// seq and the lowest seq whose reply has not come (ack). If the stream
// breaks, the Client reconnects with backoff, re-attaches the same session
// and resends every unanswered request with its seq: the server applies each
// seq once and answers a resend with the saved result. A keepalive without a
// reply for TTL/3 counts as a broken stream (its connection is cut, unless
// the HTTP client is the caller's own, [WithHTTPClient]). An
// Acquire whose caller stops waiting (its context ends) stays queued on the
// server, and a grant it gets later is released by the Client.
//
// [Client.Close] closes the session on the server, which frees all its
// locks at once. Against a server without sessions, leases are standalone
// with the session's TTL.
//
// # Standalone leases
//
// With [TTL] or [KeepAlive], or on a Client made [WithoutSession], a lease
// is standalone: it has its own TTL and its own keepalive goroutine, and
// outlives a failure of the session. [Client.Acquire] tries once, or with
// [Wait] queues FIFO on the server.
// A standalone [Lease] is renewed in the background about every TTL/3. Its
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
// Calls on the session's stream are resent after a reconnect, as above.
// Every other call is retried with backoff, within its context, when the server
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
// # Several endpoints
//
// A Client of a cluster is given its nodes: client.New("http://n1:7420,
// http://n2:7420,http://n3:7420"), or [WithEndpoints]. Any node serves
// every call (a follower passes it on to its leader), so the Client uses
// one endpoint at a time and stays on it while it works. It starts at the
// leader: before its first call, and after its session's stream broke, it
// asks every endpoint's NodeStatus and uses the one that leads (a session
// on a follower costs the cluster about twice the CPU per request); when
// none says so, Clients start spread over the endpoints.
// [WithEndpointsInOrder] keeps the order given instead. A node that stops
// answering is left within the session's margin: the stream's connection
// is pinged after a tenth of the TTL without a frame, and a keepalive
// unanswered for TTL/3 ends the stream. When it cannot be
// reached, answers Unavailable (no leader yet, shutting down) or gives no
// answer within an attempt's bound, the Client moves to the next endpoint:
// the retry of a unary call goes there at once while the call has not yet
// tried every endpoint, with backoff after that (pauses stop growing at
// 250ms once a node answered Unavailable: it is up and waiting for a
// leader, which an election brings within about a second), and carries the same
// request_id or op_id as before — a retry on another node is as exact as
// one on the same, because the ids live in the replicated state. A
// standalone lease's keepalive moves on the same way. The session's stream,
// when it breaks, reconnects on the next endpoint, re-attaches the same
// session and resends every unanswered request with its seq — at once on
// a node not yet tried, then with the same backoff: a request
// the old node passed on before it died is answered from its saved result,
// not applied again. [WithFailFast] fails a call only when no endpoint can
// be reached. [Client.Endpoint] is the endpoint in use.
//
// [NewService] is something else: fence.Service over one URL, one attempt
// per call, for a node that passes calls on to its leader.
//
// # TLS
//
// A server started with --cert-file speaks TLS: give the Client https://
// URLs and [WithTLS] with a *tls.Config whose RootCAs hold the CA that
// signed the server's certificate and, for a server with
// --client-cert-auth, whose Certificates hold the client's. The session's
// stream and gRPC negotiate HTTP/2 by ALPN. A handshake no retry can fix
// (an untrusted or expired certificate, a wrong host name, a refused
// client certificate, TLS against plain HTTP) fails the call at once with
// a [*TLSError] naming the cause.
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
