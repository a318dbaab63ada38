package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// queued sets up lock x held by A (token 1, ttl 5s, lockDelay d) with
// waiters B and C (requests rb, rc) waiting wb and wc.
func queued(t *testing.T, d, wb, wc time.Duration) *Machine {
	t.Helper()
	m := New()
	mustOK(t, m, Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: 5 * time.Second, LockDelay: d})
	for _, c := range []Command{waitAcq(0, "x", "B", 3*time.Second, wb, "rb"), waitAcq(0, "x", "C", 3*time.Second, wc, "rc")} {
		if r := mustOK(t, m, c); !r.Queued {
			t.Fatalf("%+v not queued", c)
		}
	}
	return m
}

func wantGrantEvent(t *testing.T, ev Event, rid string, tok fence.Token, ttl time.Duration) {
	t.Helper()
	if ev.RequestID != rid || ev.Err != nil || ev.Lease == nil || ev.Lease.Token != tok || ev.Lease.Remaining != ttl || ev.Lease.Name != "x" {
		t.Fatalf("event %+v (lease %+v), want grant to %s of token %d with %s", ev, ev.Lease, rid, tok, ttl)
	}
}

func wantWaitedEvent(t *testing.T, ev Event, rid string) *fence.BusyError {
	t.Helper()
	if ev.RequestID != rid || ev.Lease != nil {
		t.Fatalf("event %+v, want %s's wait to run out", ev, rid)
	}
	b := errAs[*fence.BusyError](t, ev.Err)
	if !b.Waited {
		t.Fatalf("%+v: Waited not set", b)
	}
	return b
}

func TestWaitersFIFO(t *testing.T) {
	t.Run("release hands on to the first waiter in the same apply", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		r := mustOK(t, m, rel(at(1), "x", 1))
		if len(r.Events) != 1 {
			t.Fatalf("events %+v", r.Events)
		}
		wantGrantEvent(t, r.Events[0], "rb", 2, 3*time.Second)
		r = mustOK(t, m, rel(at(2), "x", 2))
		wantGrantEvent(t, r.Events[0], "rc", 3, 3*time.Second)
	})
	t.Run("tick at expiry hands on", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		if d, ok := m.NextDeadline(); !ok || d != at(5) {
			t.Fatalf("next deadline %d %v, want 5s", d, ok)
		}
		r := mustOK(t, m, tick(at(5)))
		if len(r.Events) != 1 {
			t.Fatalf("events %+v", r.Events)
		}
		wantGrantEvent(t, r.Events[0], "rb", 2, 3*time.Second)
		if d, _ := m.NextDeadline(); d != at(8) {
			t.Fatalf("next deadline %d, want 8s (B's lease)", d)
		}
	})
	t.Run("a later command on the lock notices the expiry and hands on", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		r := m.Apply(acq(at(6), "x", "D", time.Second))
		wantBusy("B", 2, 3*time.Second, false)(t, m, r)
		wantGrantEvent(t, r.Events[0], "rb", 2, 3*time.Second)
	})
	t.Run("the granted waiter's lease runs a full TTL from the apply", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		mustOK(t, m, tick(at(7)))
		info := m.Lock("x", at(7))
		if info.Lease == nil || info.Lease.Owner != "B" || info.Lease.Remaining != 3*time.Second {
			t.Fatalf("lease %+v", info.Lease)
		}
	})
	t.Run("a wait that runs out is an event in the tick", func(t *testing.T) {
		m := queued(t, 0, 2*time.Second, time.Minute)
		if d, _ := m.NextDeadline(); d != at(2) {
			t.Fatalf("next deadline %d, want 2s", d)
		}
		r := mustOK(t, m, tick(at(2)))
		if len(r.Events) != 1 {
			t.Fatalf("events %+v", r.Events)
		}
		b := wantWaitedEvent(t, r.Events[0], "rb")
		if b.Holder != "A" || b.Token != 1 || b.Remaining != 3*time.Second {
			t.Fatalf("%+v", b)
		}
		r = mustOK(t, m, tick(at(5)))
		wantGrantEvent(t, r.Events[0], "rc", 2, 3*time.Second)
	})
	t.Run("a late tick still grants a waiter whose wait covered the release instant", func(t *testing.T) {
		m := queued(t, 0, 6*time.Second, time.Minute)
		r := mustOK(t, m, tick(at(9)))
		if len(r.Events) != 1 {
			t.Fatalf("events %+v", r.Events)
		}
		wantGrantEvent(t, r.Events[0], "rb", 2, 3*time.Second)
	})
	t.Run("a wait ending exactly at expiry has run out; the next waiter gets it", func(t *testing.T) {
		m := queued(t, 0, 5*time.Second, time.Minute)
		r := mustOK(t, m, tick(at(5)))
		if len(r.Events) != 2 {
			t.Fatalf("events %+v", r.Events)
		}
		wantWaitedEvent(t, r.Events[0], "rb")
		wantGrantEvent(t, r.Events[1], "rc", 2, 3*time.Second)
	})
	t.Run("waiters respect the lock-delay after expiry", func(t *testing.T) {
		m := queued(t, 2*time.Second, time.Minute, time.Minute)
		if r := mustOK(t, m, tick(at(5))); len(r.Events) != 0 {
			t.Fatalf("granted during lock-delay: %+v", r.Events)
		}
		if info := m.Lock("x", at(5)); info.LockDelayRemaining != 2*time.Second || info.Waiters != 2 {
			t.Fatalf("%+v", info)
		}
		if d, _ := m.NextDeadline(); d != at(7) {
			t.Fatalf("next deadline %d, want 7s", d)
		}
		r := mustOK(t, m, tick(at(7)))
		wantGrantEvent(t, r.Events[0], "rb", 2, 3*time.Second)
	})
	t.Run("events of one tick across locks come in deadline order", func(t *testing.T) {
		m := New()
		mustOK(t, m, acq(0, "b", "A", 2*time.Second))
		mustOK(t, m, acq(0, "a", "A", 3*time.Second))
		mustOK(t, m, waitAcq(0, "a", "W", time.Second, time.Minute, "wa"))
		mustOK(t, m, waitAcq(0, "b", "W", time.Second, time.Minute, "wb"))
		r := mustOK(t, m, tick(at(3)))
		if len(r.Events) != 2 || r.Events[0].RequestID != "wb" || r.Events[1].RequestID != "wa" {
			t.Fatalf("events %+v", r.Events)
		}
	})
	t.Run("wait > 0 needs a request_id", func(t *testing.T) {
		m := New()
		e := errAs[*fence.InvalidError](t, m.Apply(waitAcq(0, "x", "A", time.Second, time.Second, "")).Err)
		if e.Field != "request_id" || e.Bound != "not empty when wait > 0" {
			t.Fatalf("%+v", e)
		}
	})
}

func TestCancelWait(t *testing.T) {
	cancel := func(now int64, rid string) Command {
		return Command{Op: OpCancelWait, Now: now, Name: "x", RequestID: rid}
	}
	t.Run("a queued waiter is removed without an event", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		r := mustOK(t, m, cancel(at(1), "rb"))
		if len(r.Events) != 0 || m.Lock("x", at(1)).Waiters != 1 {
			t.Fatalf("%+v waiters %d", r, m.Lock("x", at(1)).Waiters)
		}
		r = mustOK(t, m, rel(at(2), "x", 1))
		wantGrantEvent(t, r.Events[0], "rc", 2, 3*time.Second)
	})
	t.Run("a granted waiter still holding is released and the lock passes on", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		mustOK(t, m, rel(at(1), "x", 1)) // B gets token 2
		r := mustOK(t, m, cancel(at(1), "rb"))
		if len(r.Events) != 1 {
			t.Fatalf("events %+v", r.Events)
		}
		wantGrantEvent(t, r.Events[0], "rc", 3, 3*time.Second)
		if e := errAs[*fence.StaleTokenError](t, m.Apply(renew(at(1), "x", 2, 0)).Err); e.LastAccepted != 3 {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("unknown request_id is a no-op", func(t *testing.T) {
		m := queued(t, 0, time.Minute, time.Minute)
		r := mustOK(t, m, cancel(at(1), "nobody"))
		if len(r.Events) != 0 || m.Lock("x", at(1)).Waiters != 2 || m.Lock("x", at(1)).Lease.Token != 1 {
			t.Fatal("state changed")
		}
	})
	t.Run("a lease acquired without waiting is not released by a wrong name", func(t *testing.T) {
		m := New()
		mustOK(t, m, Command{Op: OpAcquire, Name: "y", Owner: "A", TTL: time.Second, RequestID: "ra"})
		mustOK(t, m, cancel(0, "ra")) // names lock x, not y
		if m.Lock("y", 0).Lease == nil {
			t.Fatal("lease of y released")
		}
	})
}

func TestLateTickRespectsLockDelay(t *testing.T) {
	// A's lease ends at 5s, its lock-delay at 7s. B's wait ends at 6s, so
	// B had run out before the lock became available; a tick as late as 8s
	// must still say so and hand the lock to C.
	m := queued(t, 2*time.Second, 6*time.Second, time.Minute)
	r := mustOK(t, m, tick(at(8)))
	if len(r.Events) != 2 {
		t.Fatalf("events %+v", r.Events)
	}
	wantWaitedEvent(t, r.Events[0], "rb")
	wantGrantEvent(t, r.Events[1], "rc", 2, 3*time.Second)
}
