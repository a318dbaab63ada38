package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// An acquire or a session open granted under higher bounds, retried with
// its request_id after the rules were lowered (a restart with a lower
// --max-ttl or --max-lock-delay proposes them), is answered with its first
// outcome: the rules judge new requests only. Were the retry refused, its
// client would never learn it holds the lock (or the session) it was
// granted. A new request above the lowered rules is still refused, naming
// the bound, and changes nothing.
func TestRetryAfterLowerRulesGetsItsFirstOutcome(t *testing.T) {
	m := New()
	c := DefaultConfig()
	c.MaxTTL, c.MaxLockDelay = 2*time.Hour, time.Hour
	mustOK(t, m, Command{Op: OpConfig, Now: at(1), Config: c})

	a := acq(at(1), "lk", "A", 90*time.Minute)
	a.RequestID, a.LockDelay = "req-1", 30*time.Minute
	first := mustOK(t, m, a)
	o := Command{Op: OpSessionOpen, Now: at(1), TTL: 90 * time.Minute, RequestID: "open-1"}
	opened := mustOK(t, m, o)

	c.MaxTTL, c.MaxLockDelay = time.Hour, time.Minute
	mustOK(t, m, Command{Op: OpConfig, Now: at(2), Config: c})

	a.Now, o.Now = at(3), at(3)
	again := mustOK(t, m, a)
	if !again.Replayed || again.Lease.Token != first.Lease.Token {
		t.Fatalf("retried acquire: %+v, want the replay of token %d", again, first.Lease.Token)
	}
	reopened := mustOK(t, m, o)
	if !reopened.Replayed || reopened.Session.ID != opened.Session.ID {
		t.Fatalf("retried open: %+v, want the replay of session %d", reopened, opened.Session.ID)
	}

	fresh := a
	fresh.RequestID, fresh.Name = "req-2", "other"
	before := snapshotBytes(t, m)
	if e := errAs[*fence.InvalidError](t, m.Apply(fresh).Err); e.Field != "ttl" || e.Bound != "at most 1h0m0s" {
		t.Fatalf("a new acquire above the lowered max_ttl: %+v", e)
	}
	fresh.TTL = time.Minute
	if e := errAs[*fence.InvalidError](t, m.Apply(fresh).Err); e.Field != "lock_delay" || e.Bound != "at most 1m0s (the server's max_lock_delay)" {
		t.Fatalf("a new acquire above the lowered max_lock_delay: %+v", e)
	}
	o.RequestID = "open-2"
	if e := errAs[*fence.InvalidError](t, m.Apply(o).Err); e.Field != "ttl" || e.Bound != "at most 1h0m0s" {
		t.Fatalf("a new open above the lowered max_ttl: %+v", e)
	}
	if string(before) != string(snapshotBytes(t, m)) {
		t.Fatal("a refused request changed the machine")
	}
}
