package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// TestG1MonotonicTokens: every grant's token is greater than all before it,
// across locks, hand-ons, restore from a snapshot, and a restore floor.
func TestG1MonotonicTokens(t *testing.T) {
	m := New()
	var last fence.Token
	check := func(l *fence.Lease) {
		t.Helper()
		if l.Token <= last {
			t.Fatalf("token %d after %d", l.Token, last)
		}
		last = l.Token
	}
	check(mustOK(t, m, acq(0, "a", "A", time.Second)).Lease)
	check(mustOK(t, m, acq(0, "b", "A", time.Second)).Lease)
	mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Minute, "w"))
	check(mustOK(t, m, tick(at(1))).Events[0].Lease)

	var snap bytes.Buffer
	if err := m.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	check(mustOK(t, r, acq(at(1), "b", "C", time.Second)).Lease)
	mustOK(t, r, Command{Op: OpBumpToken, Token: 1000})
	check(mustOK(t, r, acq(at(1), "c", "C", time.Second)).Lease)
	if last != 1000 {
		t.Fatalf("after a floor of 1000 the grant was %d", last)
	}
}

// TestG2Exclusion: while a lease is unexpired nobody else is granted the
// lock — neither a try-acquire, nor a waiter, nor a retried request_id.
func TestG2Exclusion(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
	mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Minute, "w"))
	for _, now := range []int64{0, at(1), at(4.999), at(5) - 1} {
		if r := m.Apply(acq(now, "x", "C", time.Second)); r.Lease != nil {
			t.Fatalf("granted at %d", now)
		}
		if r := m.Apply(tick(now)); len(r.Events) != 0 {
			t.Fatalf("waiter granted at %d", now)
		}
	}
	if r := mustOK(t, m, tick(at(5))); len(r.Events) != 1 || r.Events[0].Lease.Token != 2 {
		t.Fatalf("%+v", r.Events)
	}
}

// TestG3NoEarlyExpiry: a lease lasts its full TTL from the grant or renewal
// in server time, and commands carrying an older time (a leader with a
// slower clock) cannot shorten it.
func TestG3NoEarlyExpiry(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(at(10), "x", "A", 5*time.Second), 1)
	mustOK(t, m, tick(at(3))) // a stale clock: server time stays at 10s
	if d, _ := m.NextDeadline(); d != at(15) {
		t.Fatalf("deadline %d, want 15s", d)
	}
	mustOK(t, m, renew(at(14), "x", 1, 0))
	mustOK(t, m, tick(at(18.999)))
	if m.Lock("x", at(18.999)).Lease == nil {
		t.Fatal("expired before its renewed TTL")
	}
	mustOK(t, m, tick(at(19)))
	if m.Lock("x", at(19)).Lease != nil {
		t.Fatal("not expired at its deadline")
	}
}

// TestG4FencedWrites: a write is accepted only with a token at least the
// last accepted and actually issued; equal tokens are accepted.
func TestG4FencedWrites(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", time.Second), 1)
	mustGrant(t, m, acq(at(1), "x", "B", time.Second), 2)
	mustOK(t, m, write(at(1), "r", 2, "b1", ""))
	mustOK(t, m, write(at(1), "r", 2, "b2", ""))
	errAs[*fence.StaleTokenError](t, m.Apply(write(at(1), "r", 1, "a", "")).Err)
	errAs[*fence.UnknownTokenError](t, m.Apply(write(at(1), "r", 3, "z", "")).Err)
	if st := m.Resource("r"); string(st.Value) != "b2" || st.LastToken != 2 || st.Version != 2 {
		t.Fatalf("%+v", st)
	}
}

// TestG5Idempotency: a repeated op_id is not applied again, and a repeated
// request_id returns the same lease rather than a second grant.
func TestG5Idempotency(t *testing.T) {
	m := New()
	c := Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: 5 * time.Second, RequestID: "req"}
	first := mustGrant(t, m, c, 1)
	c.Now = at(1)
	again := mustOK(t, m, c)
	if !again.Replayed || again.Lease.Token != first.Token || m.LastToken() != 1 {
		t.Fatalf("retry: %+v", again)
	}
	for range 3 {
		mustOK(t, m, add(at(1), "stock", 1, -1, "sale-1"))
	}
	if st := m.Resource("stock"); string(st.Value) != "-1" || st.Version != 1 {
		t.Fatalf("op applied more than once: %+v", st)
	}
}
