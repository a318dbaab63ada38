package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	"github.com/fenceworks/fence/client"
)

// TestServiceRefusalsAreTyped: the remote Service returns the server's
// refusals as the typed errors, with their facts, and passing one on with
// apierr.ToConnect sends what the server sent.
func TestServiceRefusalsAreTyped(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	svc := client.NewService(serverURL)
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "a", TTL: 10 * time.Second, RequestID: "r1"})
	if err != nil || g.Lease.Token == 0 || g.Lease.Name != name || g.Lease.Owner != "a" || g.Lease.TTL != 10*time.Second {
		t.Fatalf("acquire = %+v, %v", g, err)
	}
	again, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "a", TTL: 10 * time.Second, RequestID: "r1"})
	if err != nil || again.Lease.Token != g.Lease.Token {
		t.Fatalf("retried acquire = %+v, %v; want the same lease %d", again, err, g.Lease.Token)
	}

	_, err = svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "b", TTL: time.Second})
	var busy *fence.BusyError
	if !errors.As(err, &busy) || busy.Name != name || busy.Holder != "a" || busy.Token != g.Lease.Token || busy.Remaining <= 0 {
		t.Fatalf("second acquire = %v, want *fence.BusyError naming holder a, token %d", err, g.Lease.Token)
	}
	if errors.Is(err, fence.ErrUnavailable) {
		t.Fatalf("a refusal must not match ErrUnavailable: %v", err)
	}
	ce := apierr.ToConnect(err)
	if ce.Code() != connect.CodeResourceExhausted || apierr.Detail(err).GetReason() != "BUSY" || ce.Message() != busy.Error() {
		t.Fatalf("passed on as %v (detail %v)", ce, apierr.Detail(err))
	}

	res := name + "/res"
	if _, err := svc.Write(ctx, fence.WriteRequest{Resource: res, Token: g.Lease.Token, Value: []byte("x"), OpID: "w1"}); err != nil {
		t.Fatal(err)
	}
	w, err := svc.Write(ctx, fence.WriteRequest{Resource: res, Token: g.Lease.Token, Value: []byte("x"), OpID: "w1"})
	if err != nil || !w.Replayed || w.State.Version != 1 || string(w.State.Value) != "x" || w.State.LastToken != g.Lease.Token {
		t.Fatalf("replayed write = %+v, %v", w, err)
	}
	_, err = svc.Write(ctx, fence.WriteRequest{Resource: res, Token: g.Lease.Token - 1, Value: []byte("y")})
	var stale *fence.StaleTokenError
	if g.Lease.Token > 1 && (!errors.As(err, &stale) || *stale != (fence.StaleTokenError{Resource: res, Token: g.Lease.Token - 1, LastAccepted: g.Lease.Token})) {
		t.Fatalf("stale write = %v (%+v)", err, stale)
	}
	_, err = svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "a", TTL: time.Nanosecond})
	var invalid *fence.InvalidError
	if !errors.As(err, &invalid) || invalid.Field != "ttl" || invalid.Bound == "" {
		t.Fatalf("bad ttl = %v, want *fence.InvalidError for ttl", err)
	}
	if _, err := svc.Release(ctx, fence.ReleaseRequest{Name: name, Token: g.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Renew(ctx, fence.RenewRequest{Name: name, Token: g.Lease.Token})
	if !errors.Is(err, fence.ErrNotHolder) && !errors.Is(err, fence.ErrLeaseExpired) {
		t.Fatalf("renew after release = %v", err)
	}
}

// TestServiceUnavailable: failures that are not refusals — nothing
// listens, the server answers Unavailable — match fence.ErrUnavailable
// and no refusal; a URL that is not one http URL is an InvalidError.
func TestServiceUnavailable(t *testing.T) {
	ctx := ctxFor(t)
	door := &unavailableDoor{}
	for _, url := range []string{deadURL(t), serveLoopback(t, door)} {
		_, err := client.NewService(url).Get(ctx, "x")
		if !errors.Is(err, fence.ErrUnavailable) || fence.ReasonOf(err) != "" || connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("get via %s = %v, want unavailable", url, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:1", serverURL + "," + serverURL, ""} {
		_, err := client.NewService(bad).Read(ctx, "x")
		var invalid *fence.InvalidError
		if !errors.As(err, &invalid) || invalid.Field != "url" {
			t.Fatalf("NewService(%q) call = %v, want *fence.InvalidError for url", bad, err)
		}
	}
}

// TestServiceDialerAndHeader: WithDialer opens the connections (here the
// URL's host does not even resolve), WithHeader marks every request, and
// the Service speaks HTTP/2 without TLS.
func TestServiceDialerAndHeader(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	var seen atomic.Value
	var proto atomic.Value
	rec := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Fence-Forwarded"))
		proto.Store(r.Proto)
		http.Error(w, "recorded", http.StatusServiceUnavailable)
	})}
	rec.Protocols = new(http.Protocols)
	rec.Protocols.SetUnencryptedHTTP2(true)
	ln := listenLoopback(t)
	go rec.Serve(ln)
	t.Cleanup(func() { rec.Close() })

	var dials atomic.Int32
	dialTo := func(addr string) func(context.Context, string, string) (net.Conn, error) {
		return func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	}
	svc := client.NewService("http://leader.invalid:7", client.WithDialer(dialTo(ln.Addr().String())), client.WithHeader("Fence-Forwarded", "1"))
	if _, err := svc.Get(ctx, name); !errors.Is(err, fence.ErrUnavailable) {
		t.Fatalf("get = %v", err)
	}
	if seen.Load() != "1" || proto.Load() != "HTTP/2.0" || dials.Load() != 1 {
		t.Fatalf("header %v, protocol %v, dials %d; want 1, HTTP/2.0, 1", seen.Load(), proto.Load(), dials.Load())
	}

	real := client.NewService("http://leader.invalid:7", client.WithDialer(dialTo(strings.TrimPrefix(serverURL, "http://"))))
	defer real.(interface{ Close() error }).Close()
	if _, err := real.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "d", TTL: time.Second}); err != nil {
		t.Fatalf("acquire through the dialer: %v", err)
	}
}

// TestServiceListPages: List speaks lock names (After, Next), not the
// API's page tokens.
func TestServiceListPages(t *testing.T) {
	ctx, prefix := ctxFor(t), uniq(t)+"/"
	svc := client.NewService(serverURL)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := svc.Acquire(ctx, fence.AcquireRequest{Name: prefix + n, Owner: "o", TTL: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := svc.List(ctx, fence.ListRequest{Prefix: prefix, Limit: 2})
	if err != nil || len(p1.Locks) != 2 || p1.Locks[0].Name != prefix+"a" || p1.Next != prefix+"b" || p1.Locks[0].Lease == nil {
		t.Fatalf("page 1 = %+v, %v", p1, err)
	}
	p2, err := svc.List(ctx, fence.ListRequest{Prefix: prefix, After: p1.Next, Limit: 2})
	if err != nil || len(p2.Locks) != 1 || p2.Locks[0].Name != prefix+"c" || p2.Next != "" {
		t.Fatalf("page 2 = %+v, %v", p2, err)
	}
	_, err = svc.List(ctx, fence.ListRequest{Prefix: prefix})
	var invalid *fence.InvalidError
	if !errors.As(err, &invalid) || invalid.Field != "limit" {
		t.Fatalf("list without a limit = %v, want *fence.InvalidError for limit (as the node says)", err)
	}
	info, err := svc.Get(ctx, prefix+"c")
	if err != nil || info.Lease == nil || info.Lease.Owner != "o" || info.LastToken != info.Lease.Token {
		t.Fatalf("get = %+v, %v", info, err)
	}
}

// TestServiceSessions: a session opened, a sequenced acquire and its
// retry (the same lease), a keepalive, a close, and then SESSION_EXPIRED.
func TestServiceSessions(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	svc := client.NewService(serverURL)
	s, err := svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: 5 * time.Second, RequestID: "open-" + name[len(name)-8:]})
	if err != nil || s.Session.ID == 0 || s.Session.TTL != 5*time.Second || s.Session.Remaining <= 0 {
		t.Fatalf("open = %+v, %v", s, err)
	}
	ref := fence.SessionRef{ID: s.Session.ID, Seq: 1, Ack: 1}
	g1, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "s", Session: ref})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "s", Session: ref})
	if err != nil || g2.Lease.Token != g1.Lease.Token {
		t.Fatalf("retry of seq 1 = %+v, %v; want token %d", g2, err, g1.Lease.Token)
	}
	ka, err := svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: s.Session.ID})
	if err != nil || ka.Session.ID != s.Session.ID {
		t.Fatalf("keepalive = %+v, %v", ka, err)
	}
	if _, err := svc.CloseSession(ctx, fence.CloseSessionRequest{ID: s.Session.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.KeepAlive(ctx, fence.KeepAliveRequest{ID: s.Session.ID})
	var expired *fence.SessionExpiredError
	if !errors.As(err, &expired) || expired.Session != s.Session.ID {
		t.Fatalf("keepalive after close = %v, want *fence.SessionExpiredError", err)
	}
	if info, err := svc.Get(ctx, name); err != nil || info.Lease != nil {
		t.Fatalf("lock after the session closed: %+v, %v; want free", info, err)
	}
}

// TestServiceWaitCancelled: a waiting acquire whose context ends returns
// unavailable, and its wait is withdrawn on the server.
func TestServiceWaitCancelled(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	svc := client.NewService(serverURL)
	if _, err := svc.Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "h", TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := svc.Acquire(wctx, fence.AcquireRequest{Name: name, Owner: "w", TTL: time.Second, Wait: 20 * time.Second})
		done <- err
	}()
	svcWaitWaiters(t, ctx, svc, name, 1)
	cancel()
	if err := <-done; !errors.Is(err, fence.ErrUnavailable) || fence.ReasonOf(err) != "" {
		t.Fatalf("cancelled wait = %v, want unavailable (outcome unknown to the caller)", err)
	}
	svcWaitWaiters(t, ctx, svc, name, 0)
}

func svcWaitWaiters(t *testing.T, ctx context.Context, svc fence.Service, name string, n int) {
	t.Helper()
	for {
		info, err := svc.Get(ctx, name)
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
