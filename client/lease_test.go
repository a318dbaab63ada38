package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestKeepAliveHoldsLeasePastTTL: a kept lease outlives 2.5 TTLs, and
// another client is refused BUSY naming its token meanwhile.
//
// Renewals go out every TTL/3; a machine loaded enough to starve the
// client for two thirds of a TTL loses the lease at its safe deadline
// (ErrDeadlinePassed: no renew succeeded in time). That says nothing of
// the keepalive, so such a play is played again with the TTL doubled; a
// lease refused by the server, or one never renewed, fails every play.
func TestKeepAliveHoldsLeasePastTTL(t *testing.T) {
	t.Parallel() // waits out 2.5 TTLs on a lock of its own
	for ttl := 2 * time.Second; ; ttl *= 2 {
		lost := keepAliveHoldsLeasePastTTL(t, ttl)
		if lost == nil {
			return
		}
		if ttl >= 8*time.Second {
			t.Fatalf("lease ended after 2.5×TTL despite keepalive, with TTLs 2s to %s: %v", ttl, lost)
		}
		t.Logf("TTL %s: the lease was lost at its safe deadline, no renew in time (the box too slow?): %v; again with TTL %s", ttl, lost, 2*ttl)
	}
}

// keepAliveHoldsLeasePastTTL plays TestKeepAliveHoldsLeasePastTTL once
// with a lease of ttl. It returns the lease's error when the lease was lost
// at its safe deadline (no renew succeeded in time), and fails t for any
// other outcome but success.
func keepAliveHoldsLeasePastTTL(t *testing.T, ttl time.Duration) error {
	t.Helper()
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	l, err := c.Acquire(ctx, name, client.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	time.Sleep(5 * ttl / 2)
	_, err = newClient(t).Acquire(ctx, name, client.TTL(ttl))
	held := l.Err() == nil // read after the other acquire: if it was granted, we must know
	var busy *fence.BusyError
	switch {
	case err == nil && held:
		t.Fatalf("another client was granted the lock while the lease still believed it held it (G8)")
	case !held && errors.Is(l.Err(), client.ErrDeadlinePassed):
		return l.Err()
	case !held:
		t.Fatalf("lease ended after 2.5×TTL despite keepalive: %v (other acquire: %v)", l.Err(), err)
	case !errors.As(err, &busy) || busy.Token != l.Token():
		t.Fatalf("another acquire after 2.5×TTL: got %v, want busy with holder token %d", err, l.Token())
	}
	if !l.Deadline().After(first) {
		t.Errorf("deadline did not move: %v then %v", first, l.Deadline())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, l)
	if !errors.Is(l.Err(), client.ErrReleased) {
		t.Errorf("Err after Release = %v, want ErrReleased", l.Err())
	}
	return nil
}

func TestLeaseDoneWhenServerStops(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	url, stop := testServer(t)
	c := newClientFor(t, url, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	l, err := c.Acquire(ctx, name, client.TTL(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	waitDone(t, ctx, l) // closes by the safe deadline: no renew can succeed now
	if !errors.Is(l.Err(), client.ErrLeaseLost) || !errors.Is(l.Err(), client.ErrDeadlinePassed) {
		t.Fatalf("Err = %v, want a LostError caused by ErrDeadlinePassed", l.Err())
	}
	if !strings.Contains(l.Err().Error(), "last renew error") {
		t.Errorf("Err = %v, want it to name the last renew error (renewals failed: the server is gone)", l.Err())
	}
	if now := time.Now(); now.Before(l.Deadline()) {
		t.Errorf("reported lost at %v, before its safe deadline %v although only the deadline can end it", now, l.Deadline())
	}
	if !errors.Is(leaseCause(l), l.Err()) {
		t.Errorf("context cause %v, want %v", leaseCause(l), l.Err())
	}
}

func TestLeaseDoneWhenRenewRefused(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	// Someone with the token releases it behind the lease's back: the next
	// background renew is refused.
	l := lostBehindItsBack(t, ctx, newClient(t), name)
	var lost *client.LostError
	if !errors.As(l.Err(), &lost) || lost.Token != l.Token() {
		t.Fatalf("Err = %v, want *client.LostError for token %d", l.Err(), l.Token())
	}
	if r := fence.ReasonOf(l.Err()); r != fence.ReasonNotHolder && r != fence.ReasonLeaseExpired {
		t.Fatalf("Err reason %q (%v), want NOT_HOLDER or LEASE_EXPIRED from the refused renew", r, l.Err())
	}
	if err := l.Renew(ctx); !errors.Is(err, client.ErrLeaseLost) {
		t.Errorf("Renew after loss = %v, want ErrLeaseLost (a lost lease is never renewed)", err)
	}
}

func TestLeaseManualRenewRefusedEndsLease(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	l, err := c.Acquire(ctx, name, client.TTL(10*time.Second), client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("renew of a held lease: %v", err)
	}
	if err := c.Release(ctx, name, l.Token()); err != nil {
		t.Fatal(err)
	}
	err = l.Renew(ctx)
	if !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("renew after release by token = %v, want ErrLeaseLost", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after a refused renew")
	}
}

func TestClientCloseEndsLeases(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c, err := client.New(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitDone(t, ctx, l)
	if !errors.Is(l.Err(), client.ErrClientClosed) {
		t.Fatalf("Err = %v, want ErrClientClosed", l.Err())
	}
	if _, err := c.Acquire(ctx, name+"-2"); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClientClosed", err)
	}
}

func TestReleaseStopsKeepAliveGoroutines(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	ignore := goleak.IgnoreCurrent()
	c, err := client.New(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(ctx, name, client.TTL(time.Second), client.KeepAlive(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a few background renewals
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release = %v, want nil", err)
	}
	c.Close()
	goleak.VerifyNone(t, ignore)
}
