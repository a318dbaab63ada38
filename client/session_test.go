package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

// A lease acquired without TTL is bound to the Client's session: it has
// the session's TTL, others are refused while it is held, writes under its
// token go through, and a release frees the lock at once.
func TestSessionAcquireWriteRelease(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t, client.WithSessionTTL(3*time.Second))
	if id := c.SessionID(); id != 0 {
		t.Fatalf("session %d open before any session-bound call; want it opened lazily", id)
	}
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionID() == 0 {
		t.Fatal("no session after a session-bound acquire")
	}
	if l.TTL() != 3*time.Second {
		t.Errorf("TTL = %v, want the session's 3s", l.TTL())
	}
	if d := time.Until(l.Deadline()); d <= 0 || d > 3*time.Second {
		t.Errorf("deadline in %v, want within the session's TTL", d)
	}
	other := newClient(t, client.WithoutSession())
	var busy *fence.BusyError
	if _, err := other.Acquire(ctx, name); !errors.As(err, &busy) || busy.Token != l.Token() {
		t.Fatalf("other acquire = %v, want busy with holder token %d", err, l.Token())
	}
	res := name + "/value"
	if _, err := c.Write(ctx, res, l.Token(), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Add(ctx, res+"-n", l.Token(), 5); err != nil || r.Int != 5 {
		t.Fatalf("add = %+v, %v", r, err)
	}
	if r, err := other.Read(ctx, res); err != nil || string(r.Value) != "v1" || r.LastToken != l.Token() {
		t.Fatalf("read = %+v, %v; want v1 written with token %d", r, err, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, l)
	if !errors.Is(l.Err(), client.ErrReleased) || !errors.Is(leaseCause(l), client.ErrReleased) {
		t.Fatalf("Err = %v, cause %v; want ErrReleased", l.Err(), leaseCause(l))
	}
	l2, err := other.Acquire(ctx, name)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	defer l2.Release(ctx)
	if _, err := other.Write(ctx, res, l2.Token(), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	// The old token is refused over the stream, as a typed error.
	var stale *fence.StaleTokenError
	if _, err := c.Write(ctx, res, l.Token(), []byte("old")); !errors.As(err, &stale) || stale.LastAccepted != l2.Token() {
		t.Fatalf("stale write = %v, want *fence.StaleTokenError with last accepted %d", err, l2.Token())
	}
}

// A waiting acquire on the stream does not hold back the other calls of
// the session, and is granted when the holder releases.
func TestSessionWaitDoesNotBlockOtherCalls(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	holder := newClient(t, client.WithoutSession())
	h, err := holder.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	first, err := c.Acquire(ctx, name+"-other")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var waited *client.Lease
	go func() {
		var err error
		waited, err = c.Acquire(ctx, name, client.Wait(20*time.Second))
		got <- err
	}()
	// While it waits, other calls on the same stream are answered.
	for i := range 5 {
		if _, err := c.Add(ctx, name+"/n", first.Token(), 1); err != nil {
			t.Fatalf("add %d while an acquire waits: %v", i, err)
		}
	}
	select {
	case err := <-got:
		t.Fatalf("waiting acquire returned %v before the lock was released", err)
	default:
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if waited.Token() <= h.Token() {
		t.Fatalf("granted token %d, want newer than %d", waited.Token(), h.Token())
	}
}

// The TCP connection under the stream is cut while an Add's reply is lost:
// the client reconnects, re-attaches the same session, resends the Add
// with the same seq, and it is applied once. No lease is lost.
func TestSessionReconnectResendsOnce(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	proxy, url := newTCPProxy(t, serverURL)
	c := newClientFor(t, url, client.WithSessionTTL(5*time.Second), client.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	res := name + "/counter"
	if r, err := c.Add(ctx, res, l.Token(), 1); err != nil || r.Int != 1 {
		t.Fatalf("first add = %+v, %v", r, err)
	}

	direct := newClient(t, client.WithoutSession())
	proxy.setDropReplies(true)
	added := make(chan error, 1)
	var r client.Resource
	go func() {
		var err error
		r, err = c.Add(ctx, res, l.Token(), 1)
		added <- err
	}()
	// Wait until the server has applied it; its reply is being thrown away.
	for {
		cur, err := direct.Read(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		if string(cur.Value) == "2" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the add never reached the server: %s", cur.Value)
		case <-time.After(10 * time.Millisecond):
		}
	}
	before := proxy.connections()
	proxy.setDropReplies(false)
	proxy.cut()
	if err := <-added; err != nil {
		t.Fatalf("add across the reconnect: %v", err)
	}
	if r.Int != 2 {
		t.Fatalf("add after resend returned %d, want 2 (the saved result of its seq)", r.Int)
	}
	cur, err := direct.Read(ctx, res)
	if err != nil || string(cur.Value) != "2" {
		t.Fatalf("value %q, %v; want 2: the resent add must not apply twice", cur.Value, err)
	}
	if proxy.connections() <= before {
		t.Fatal("no new connection: the stream did not reconnect")
	}
	if c.SessionID() != id {
		t.Fatalf("session %d after reconnect, want the same session %d", c.SessionID(), id)
	}
	if l.Err() != nil {
		t.Fatalf("lease ended across the reconnect: %v", l.Err())
	}
	info, err := direct.Get(ctx, name)
	if err != nil || info.Lease == nil || info.Lease.Token != l.Token() {
		t.Fatalf("lock %+v, %v; want still held with token %d", info, err, l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// When the server ends the session (here: closed by another client),
// every lease of it ends with an error that matches both ErrLeaseLost and
// fence.ErrSessionExpired, and the next acquire opens a new session.
func TestSessionExpiredEndsEveryLease(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t, client.WithSessionTTL(time.Second))
	var leases []*client.Lease
	for i := range 3 {
		l, err := c.Acquire(ctx, fmt.Sprintf("%s-%d", name, i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	id := c.SessionID()
	sessions := fencev1connect.NewSessionServiceClient(http.DefaultClient, serverURL)
	if _, err := sessions.Close(ctx, connect.NewRequest(&fencev1.CloseSessionRequest{Session: id})); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		waitDone(t, ctx, l)
		var expired *fence.SessionExpiredError
		if !errors.Is(l.Err(), client.ErrLeaseLost) || !errors.Is(l.Err(), fence.ErrSessionExpired) || !errors.As(l.Err(), &expired) || expired.Session != id {
			t.Fatalf("Err = %v, want a loss matching ErrLeaseLost and SESSION_EXPIRED of session %d", l.Err(), id)
		}
		if !errors.Is(leaseCause(l), fence.ErrSessionExpired) {
			t.Fatalf("context cause %v, want SESSION_EXPIRED", leaseCause(l))
		}
	}
	l, err := c.Acquire(ctx, name+"-0")
	if err != nil {
		t.Fatalf("acquire after the session expired: %v", err)
	}
	if c.SessionID() == id || c.SessionID() == 0 {
		t.Fatalf("session %d after expiry, want a new one (old %d)", c.SessionID(), id)
	}
	l.Release(ctx)
}

// When the network goes silent, the leases end at the session's safe
// deadline — before the server expires the session: the lock is still
// held on the server when Done fires, and freed later.
func TestSessionSilentNetworkLosesBeforeServerExpiry(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	ctx, name := ctxFor(t), uniq(t)
	proxy, url := newTCPProxy(t, serverURL)
	// Drift 0.5: the safe deadline is half the remaining TTL early, a
	// margin that leaves the Get below ample time.
	c := newClientFor(t, url, client.WithSessionTTL(2*time.Second), client.WithDrift(0.5))
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	direct := newClient(t, client.WithoutSession())
	proxy.setPaused(true)
	waitDone(t, ctx, l)
	info, err := direct.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || info.Lease.Token != l.Token() {
		t.Fatalf("when the lease ended locally the server had %+v; want it still held (the safe deadline comes first)", info.Lease)
	}
	if !errors.Is(l.Err(), client.ErrLeaseLost) || !errors.Is(l.Err(), client.ErrDeadlinePassed) {
		t.Fatalf("Err = %v, want a loss by the safe deadline", l.Err())
	}
	if now := time.Now(); now.Before(l.Deadline()) {
		t.Errorf("ended at %v, before its deadline %v", now, l.Deadline())
	}
	// The server expires it by its TTL: a waiter gets the lock.
	next, err := direct.Acquire(ctx, name, client.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("acquire after the silent session: %v", err)
	}
	next.Release(ctx)
}

// 10,000 leases held on one Client cost no goroutine each.
func TestSessionManyLeasesBoundedGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 acquires")
	}
	// Hang guards, each phase its own: 10,000 acquires under -race on a
	// loaded machine, then what Close must do. (One context for both once
	// left the last wait only what the acquires had not used.)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := uniq(t)
	baseline := runtime.NumGoroutine()
	// A TTL far beyond the test's waits: only Close can free the locks.
	c, err := client.New(serverURL, client.WithSessionTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const n, workers = 10000, 32
	leases := make([]*client.Lease, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				l, err := c.Acquire(ctx, fmt.Sprintf("%s/%d", name, i))
				if err != nil {
					errs <- err
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	extra := runtime.NumGoroutine() - baseline
	if extra >= 50 {
		t.Errorf("%d goroutines above the baseline with %d leases held; want fewer than 50", extra, n)
	}
	t.Logf("%d leases held: %d goroutines above the baseline", n, extra)
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease %s ended: %v", l.Name(), l.Err())
		}
	}
	c.Close()
	after, cancelAfter := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAfter()
	for _, l := range leases {
		waitDone(t, after, l)
	}
	// Close returned once its close call had ended: the session is closed
	// on the server and its locks are free now (the server's own proof: a
	// blocking acquire granted; the session's hour is far longer).
	other := newClient(t, client.WithoutSession())
	l, err := other.Acquire(after, fmt.Sprintf("%s/%d", name, n-1), client.Wait(time.Minute))
	if err != nil {
		t.Fatalf("acquire after the session closed: %v", err)
	}
	l.Release(after)
}

// An acquire whose caller stops waiting is not left held: if it is
// granted later, the client releases it.
func TestSessionAbandonedAcquireIsReleased(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	holder := newClient(t, client.WithoutSession())
	h, err := holder.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	if _, err := c.Acquire(ctx, name+"-open"); err != nil { // opens the session
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, name, client.Wait(20*time.Second))
		got <- err
	}()
	waitWaiters(t, ctx, holder, name, 1)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned acquire = %v, want context.Canceled", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Whether the server withdrew the wait or granted it (and the client
	// released the grant), the lock ends up free for a third party.
	l, err := holder.Acquire(ctx, name, client.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("lock not free after the abandoned acquire: %v", err)
	}
	l.Release(ctx)
}

// Close ends the session's goroutines (the stream's loop and reader) and
// its leases, and closes the session on the server: the lock is free at
// once, with no TTL to wait for.
func TestSessionCloseStopsGoroutinesAndFreesLocks(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	ignore := goleak.IgnoreCurrent()
	c, err := client.New(serverURL, client.WithSessionTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitDone(t, ctx, l)
	if !errors.Is(l.Err(), client.ErrClientClosed) {
		t.Fatalf("Err = %v, want ErrClientClosed", l.Err())
	}
	goleak.VerifyNone(t, ignore)
	other := newClient(t, client.WithoutSession())
	next, err := other.Acquire(ctx, name) // a try: no wait
	if err != nil {
		t.Fatalf("lock not freed by Close (TTL 1m): %v", err)
	}
	next.Release(ctx)
}

// A waiting acquire whose stream is cut is resent on the new stream with
// the same seq and granted once: the caller gets the lease that holds the
// lock, and nothing else of the session holds or waits for it.
func TestSessionReconnectDuringWait(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	holder := newClient(t, client.WithoutSession())
	h, err := holder.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy, url := newTCPProxy(t, serverURL)
	c := newClientFor(t, url, client.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	if _, err := c.Acquire(ctx, name+"-open"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var l *client.Lease
	go func() {
		var err error
		l, err = c.Acquire(ctx, name, client.Wait(20*time.Second))
		got <- err
	}()
	waitWaiters(t, ctx, holder, name, 1)
	before := proxy.connections()
	proxy.cut()
	for proxy.connections() == before {
		select {
		case <-ctx.Done():
			t.Fatal("the client did not reconnect")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting acquire across the reconnect: %v", err)
	}
	info, err := holder.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Lease == nil || info.Lease.Token != l.Token() || info.Waiters != 0 || l.Err() != nil {
		t.Fatalf("lock %+v (lease %+v), lease err %v; want held by the returned lease %d and no waiter left", info, info.Lease, l.Err(), l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitWaiters waits until lock name has n queued acquirers.
func waitWaiters(t *testing.T, ctx context.Context, c *client.Client, name string, n int) {
	t.Helper()
	for {
		info, err := c.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lock %s has %d waiters, want %d", name, info.Waiters, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
