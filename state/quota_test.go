package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// quotaConfig allows each principal 2 sessions and 2 waiters, far below
// the global caps.
func quotaConfig() Config {
	c := DefaultConfig()
	c.MaxSessionsPerPrincipal, c.MaxWaitersPerPrincipal = 2, 2
	return c
}

// exhaustedQuota applies c and fails unless it is refused
// RESOURCE_EXHAUSTED naming limit, at most 2, got 2, changing nothing but
// server time.
func exhaustedQuota(t *testing.T, m *Machine, c Command, limit string) {
	t.Helper()
	m.Apply(Command{Op: OpTick, Now: c.Now})
	before := snapBytes(t, m)
	e := errAs[*fence.ResourceExhaustedError](t, m.Apply(c).Err)
	if e.Limit != limit || e.Bound != "at most 2" || e.Got != "2" {
		t.Fatalf("%+v: refusal %+v, want %s at most 2, got 2", c, e, limit)
	}
	if !bytes.Equal(before, snapBytes(t, m)) {
		t.Fatalf("%+v: a refused command changed the state", c)
	}
}

func openAs(now int64, p string) Command {
	return Command{Op: OpSessionOpen, Now: now, TTL: time.Minute, Principal: p}
}

func waitAs(now int64, name, rid, p string) Command {
	c := waitAcq(now, name, "o", time.Minute, time.Minute, rid)
	c.Principal = p
	return c
}

// restored is a machine restored from m's snapshot.
func restored(t *testing.T, m *Machine) *Machine {
	t.Helper()
	n := New()
	if err := n.Restore(bytes.NewReader(snapBytes(t, m))); err != nil {
		t.Fatal(err)
	}
	return n
}

// Principal A at its session quota is refused naming the quota while B
// (and the unauthenticated principal "", which no quota binds) still open
// sessions; a session A closes gives it room again. A restored machine and
// one replaying the log count the same (the counts are not in the
// snapshot: a restore that did not recount would let A past its quota).
func TestSessionQuotaRefusesOnePrincipalAndServesOthers(t *testing.T) {
	log := []Command{
		{Op: OpConfig, Now: at(0), Config: quotaConfig()},
		openAs(at(1), "token:a"), // session 1
		openAs(at(1), "token:a"), // session 2
		openAs(at(1), "token:b"), // session 3
	}
	m := New()
	for _, c := range log {
		mustOK(t, m, c)
	}
	const limit = `sessions of principal "token:a" (config.max_sessions_per_principal or its roles' quota)`
	exhaustedQuota(t, m, openAs(at(2), "token:a"), limit)
	mustOK(t, m, openAs(at(2), "token:b"))
	for range 3 {
		mustOK(t, m, openAs(at(2), ""))
	}
	// After a restore, and after a replay of the same log, A is still at
	// its quota and B is at its own.
	replay := New()
	for _, c := range append(log, openAs(at(2), "token:b"), openAs(at(2), ""), openAs(at(2), ""), openAs(at(2), "")) {
		mustOK(t, replay, c)
	}
	for name, n := range map[string]*Machine{"restored": restored(t, m), "replayed": replay} {
		t.Run(name, func(t *testing.T) {
			exhaustedQuota(t, n, openAs(at(3), "token:a"), limit)
			exhaustedQuota(t, n, openAs(at(3), "token:b"), `sessions of principal "token:b" (config.max_sessions_per_principal or its roles' quota)`)
			mustOK(t, n, Command{Op: OpSessionClose, Now: at(3), Session: 1, Principal: "token:a"})
			mustOK(t, n, openAs(at(3), "token:a"))
			exhaustedQuota(t, n, openAs(at(3), "token:a"), limit)
			// Sessions that expire give their room back.
			mustOK(t, n, tick(at(3)+int64(time.Minute)))
			mustOK(t, n, openAs(at(3)+int64(time.Minute), "token:a"))
		})
	}
}

// Principal A with 2 acquires queued is refused a third, naming the quota,
// while B still queues and still acquires a free lock; a wait that ends
// (granted, run out, cancelled, or its session ended) gives A room again.
// Restored and replayed machines count the same.
func TestWaiterQuotaRefusesOnePrincipalAndServesOthers(t *testing.T) {
	hold := acq(at(1), "held", "h", time.Hour)
	log := []Command{
		{Op: OpConfig, Now: at(0), Config: quotaConfig()},
		hold,
		waitAs(at(1), "held", "a1", "token:a"),
		waitAs(at(1), "held", "a2", "token:a"),
		waitAs(at(1), "held", "b1", "token:b"),
	}
	m := New()
	for _, c := range log {
		if r := mustOK(t, m, c); c.Wait > 0 && !r.Queued {
			t.Fatalf("%+v: %s, want queued", c, describe(r))
		}
	}
	const limit = `waiters of principal "token:a" (config.max_waiters_per_principal or its roles' quota)`
	exhaustedQuota(t, m, waitAs(at(2), "held", "a3", "token:a"), limit)
	if r := m.Apply(waitAs(at(2), "free", "a4", "token:a")); r.Err != nil || r.Lease == nil {
		t.Fatalf("A acquiring a free lock at its waiter quota: %s, want granted", describe(r))
	}
	if r := mustOK(t, m, waitAs(at(2), "held", "b2", "token:b")); !r.Queued {
		t.Fatalf("B's second wait: %s, want queued", describe(r))
	}
	replay := New()
	for _, c := range append(log, waitAs(at(2), "free", "a4", "token:a"), waitAs(at(2), "held", "b2", "token:b")) {
		mustOK(t, replay, c)
	}
	for name, n := range map[string]*Machine{"restored": restored(t, m), "replayed": replay} {
		t.Run(name, func(t *testing.T) {
			exhaustedQuota(t, n, waitAs(at(3), "held", "a5", "token:a"), limit)
			exhaustedQuota(t, n, waitAs(at(3), "held", "b3", "token:b"), `waiters of principal "token:b" (config.max_waiters_per_principal or its roles' quota)`)
			// A cancelled wait gives A room.
			mustOK(t, n, Command{Op: OpCancelWait, Now: at(3), Name: "held", RequestID: "a1", Principal: "token:a"})
			if r := mustOK(t, n, waitAs(at(3), "held", "a5", "token:a")); !r.Queued {
				t.Fatalf("A after a cancel: %s, want queued", describe(r))
			}
			exhaustedQuota(t, n, waitAs(at(3), "held", "a6", "token:a"), limit)
			// The lock handed on to a2 (A's first in line) gives A room.
			mustOK(t, n, rel(at(4), "held", 1))
			if r := mustOK(t, n, waitAs(at(4), "held", "a6", "token:a")); !r.Queued {
				t.Fatalf("A after a grant: %s, want queued", describe(r))
			}
			// Waits that run out give A room.
			later := at(5) + int64(time.Minute)
			mustOK(t, n, tick(later))
			mustOK(t, n, acq(later, "held2", "h", time.Hour))
			for _, rid := range []string{"a7", "a8"} {
				if r := mustOK(t, n, waitAs(later, "held2", rid, "token:a")); !r.Queued {
					t.Fatalf("A after its waits ran out: %s, want queued", describe(r))
				}
			}
			exhaustedQuota(t, n, waitAs(later, "held2", "a9", "token:a"), limit)
			// Waits that run out behind a held lock give A room.
			later += int64(time.Minute)
			mustOK(t, n, tick(later))
			for _, rid := range []string{"a9", "a10"} {
				if r := mustOK(t, n, waitAs(later, "held2", rid, "token:a")); !r.Queued {
					t.Fatalf("A after its waits ran out behind a held lock: %s, want queued", describe(r))
				}
			}
		})
	}
}

// A zero quota (the machine's first rules; a log from before the fields)
// binds nobody, and the unauthenticated principal "" is never bound.
func TestZeroQuotaBindsNobody(t *testing.T) {
	m := New(DefaultConfig())
	mustOK(t, m, acq(at(1), "held", "h", time.Hour))
	for i := range 5 {
		mustOK(t, m, openAs(at(1), "token:a"))
		if r := mustOK(t, m, waitAs(at(1), "held", "a"+utoa(i), "token:a")); !r.Queued {
			t.Fatalf("wait %d: %s", i, describe(r))
		}
	}
	mustOK(t, m, Command{Op: OpConfig, Now: at(2), Config: quotaConfig()})
	for i := range 5 {
		mustOK(t, m, openAs(at(2), ""))
		if r := mustOK(t, m, waitAs(at(2), "held", "anon"+utoa(i), "")); !r.Queued {
			t.Fatalf("anonymous wait %d: %s", i, describe(r))
		}
	}
	// A, above the quota lowered under it, keeps what it has and gets no more.
	e := errAs[*fence.ResourceExhaustedError](t, m.Apply(openAs(at(3), "token:a")).Err)
	if e.Got != "5" {
		t.Fatalf("refusal %+v, want got 5", e)
	}
}

// Waits bound to a session count against their principal's quota, and the
// session's end (closed here) ends them and gives the room back.
func TestWaiterQuotaCountsSessionWaits(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: quotaConfig()})
	mustOK(t, m, acq(at(1), "held", "h", time.Hour))
	s := mustOK(t, m, openAs(at(1), "token:a")).Session.ID
	for seq := uint64(1); seq <= 2; seq++ {
		c := Command{Op: OpAcquire, Now: at(1), Name: "held", Owner: "a", Wait: time.Minute, Session: s, Seq: seq, Principal: "token:a"}
		if r := mustOK(t, m, c); !r.Queued {
			t.Fatalf("session wait %d: %s", seq, describe(r))
		}
	}
	const limit = `waiters of principal "token:a" (config.max_waiters_per_principal or its roles' quota)`
	exhaustedQuota(t, m, waitAs(at(2), "held", "a3", "token:a"), limit)
	mustOK(t, m, Command{Op: OpSessionClose, Now: at(2), Session: s, Principal: "token:a"})
	for _, rid := range []string{"a3", "a4"} {
		if r := mustOK(t, m, waitAs(at(2), "held", rid, "token:a")); !r.Queued {
			t.Fatalf("A after its session closed: %s, want queued", describe(r))
		}
	}
}

// A retried open (its request_id) of a session A already has is answered
// with that session at the quota, not refused: the retry adds nothing.
func TestSessionQuotaAnswersARetriedOpen(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: quotaConfig()})
	open := openAs(at(1), "token:a")
	open.RequestID = "open-1"
	first := mustOK(t, m, open)
	mustOK(t, m, openAs(at(1), "token:a"))
	if r := mustOK(t, m, open); !r.Replayed || r.Session.ID != first.Session.ID {
		t.Fatalf("retried open at the quota: %s, want session %d replayed", describe(r), first.Session.ID)
	}
}
