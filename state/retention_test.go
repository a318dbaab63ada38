package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestRetention(t *testing.T) {
	t.Run("op_ids beyond MaxOps are forgotten oldest first", func(t *testing.T) {
		m := NewWithConfig(Config{MaxOps: 2})
		mustOK(t, m, acq(0, "x", "A", time.Second))
		for i := range 3 {
			mustOK(t, m, add(0, "s", 1, 1, fmt.Sprint("op", i)))
		}
		mustOK(t, m, tick(0)) // forgetting runs at the start of an apply
		if n := m.ops.len(); n != 2 {
			t.Fatalf("%d op_ids remembered, want 2", n)
		}
		if r := mustOK(t, m, add(0, "s", 1, 1, "op0")); r.Replayed {
			t.Fatal("op0 should be forgotten")
		}
		if r := mustOK(t, m, add(0, "s", 1, 1, "op2")); !r.Replayed {
			t.Fatal("op2 should be remembered")
		}
	})
	t.Run("op_ids older than IDRetention are forgotten", func(t *testing.T) {
		m := NewWithConfig(Config{IDRetention: time.Minute})
		mustOK(t, m, acq(0, "x", "A", time.Second))
		mustOK(t, m, add(0, "s", 1, 1, "op"))
		if r := mustOK(t, m, add(at(59), "s", 1, 1, "op")); !r.Replayed {
			t.Fatal("forgotten too early")
		}
		if r := mustOK(t, m, add(at(60), "s", 1, 1, "op")); r.Replayed {
			t.Fatal("remembered past retention")
		}
	})
	t.Run("request_ids are forgotten after their outcome is old", func(t *testing.T) {
		m := NewWithConfig(Config{IDRetention: time.Minute})
		c := Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Hour, RequestID: "r"}
		mustGrant(t, m, c, 1)
		mustOK(t, m, rel(at(61), "x", 1)) // held for longer than the retention: still known
		c.Now = at(120)
		errAs[*fence.NotHolderError](t, m.Apply(c).Err)
		c.Now = at(121)
		mustGrant(t, m, c, 2) // forgotten: a new request
	})
	t.Run("request_ids beyond MaxRequests are forgotten; held ones are not", func(t *testing.T) {
		m := NewWithConfig(Config{MaxRequests: 1})
		held := Command{Op: OpAcquire, Name: "h", Owner: "A", TTL: time.Hour, RequestID: "held"}
		mustGrant(t, m, held, 1)
		for i := range 3 {
			name := fmt.Sprint("l", i)
			mustOK(t, m, Command{Op: OpAcquire, Name: name, Owner: "A", TTL: time.Second, RequestID: name})
			mustOK(t, m, rel(0, name, fence.Token(i+2)))
		}
		mustOK(t, m, tick(0))
		if m.requests.len() != 1 {
			t.Fatalf("%d outcomes remembered", m.requests.len())
		}
		if r := m.Apply(held); r.Err != nil || !r.Replayed || r.Lease.Token != 1 {
			t.Fatalf("held request forgotten: %+v", r)
		}
	})
	t.Run("idle locks are tombstones, then forgotten", func(t *testing.T) {
		m := NewWithConfig(Config{IDRetention: time.Minute})
		mustGrant(t, m, acq(0, "x", "A", time.Second), 1)
		mustOK(t, m, tick(at(1)))
		errAs[*fence.LeaseExpiredError](t, m.Apply(rel(at(30), "x", 1)).Err)
		errAs[*fence.NotHolderError](t, m.Apply(rel(at(61), "x", 1)).Err)
		if m.names.len() != 0 {
			t.Fatalf("%d lock entries left", m.names.len())
		}
	})
	t.Run("lock entries do not leak", func(t *testing.T) {
		m := NewWithConfig(Config{MaxRequests: 10})
		for i := range 1000 {
			name := fmt.Sprint("lock-", i)
			mustOK(t, m, acq(int64(i), name, "A", time.Second))
			mustOK(t, m, rel(int64(i), name, fence.Token(i+1)))
		}
		mustOK(t, m, tick(at(2000)))
		if m.names.len() > 10 || len(m.deadlines) != 0 {
			t.Fatalf("%d lock entries, %d deadlines", m.names.len(), len(m.deadlines))
		}
	})
	t.Run("a delayed lock is kept until its delay ends", func(t *testing.T) {
		m := NewWithConfig(Config{IDRetention: time.Second, MaxRequests: 1})
		mustOK(t, m, Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Second, LockDelay: time.Hour})
		mustOK(t, m, tick(at(10)))
		wantBusy("", 0, time.Hour-9*time.Second, true)(t, m, m.Apply(acq(at(10), "x", "B", time.Second)))
		if d, ok := m.NextDeadline(); !ok || d != at(3601) {
			t.Fatalf("deadline %d %v", d, ok)
		}
		mustOK(t, m, tick(at(3601)))
		mustGrant(t, m, acq(at(3601), "x", "B", time.Second), 2)
	})
}

// Idle-lock tombstones stay bounded by MaxIdleLocks when MaxRequests is
// larger (DefaultConfig: a million).
func TestIdleLocksBounded(t *testing.T) {
	m := configured(t)
	for i := range MaxIdleLocks + 1 {
		name := fmt.Sprint("lock-", i)
		mustGrant(t, m, acq(0, name, "A", time.Second), fence.Token(i+1))
		mustOK(t, m, rel(0, name, fence.Token(i+1)))
	}
	mustOK(t, m, tick(0))
	if n := m.idle.len(); n != MaxIdleLocks {
		t.Fatalf("%d tombstones, want %d", n, MaxIdleLocks)
	}
	errAs[*fence.NotHolderError](t, m.Apply(rel(0, "lock-0", 1)).Err)
	errAs[*fence.StaleTokenError](t, m.Apply(rel(0, "lock-1", 1)).Err)
}
