package state

import (
	"bytes"
	"testing"
	"time"
)

// holdersScan counts the locks with a holder, the slow way.
func holdersScan(m *Machine) int {
	n := 0
	for _, l := range allLocks(m) {
		if l.only() != nil {
			n++
		}
	}
	return n
}

// Holders and LeaseEnds follow every way a lease starts and ends —
// acquire, a queued acquire granted on release, release, expiry on a tick,
// a session's leases released by its close and expired with it — and a
// restore from a snapshot counts the holders it loads (its lease ends start
// at zero).
func TestStatsFollowLeases(t *testing.T) {
	m := New()
	now := int64(0)
	step := func(what string, cmd Command) Result {
		t.Helper()
		now += int64(time.Millisecond)
		cmd.Now = now
		r := m.Apply(cmd)
		if got, want := m.Holders(), holdersScan(m); got != want {
			t.Fatalf("after %s: Holders() = %d, holders in the machine %d", what, got, want)
		}
		return r
	}
	a := step("acquire a", Command{Op: OpAcquire, Name: "a", TTL: time.Hour})
	step("acquire b (short)", Command{Op: OpAcquire, Name: "b", TTL: 10 * time.Millisecond})
	step("queue on a", Command{Op: OpAcquire, Name: "a", TTL: time.Hour, Wait: time.Hour, RequestID: "w"})
	step("release a: the waiter gets it", Command{Op: OpRelease, Name: "a", Token: a.Lease.Token})
	now += int64(time.Second)
	step("tick: b expires", Command{Op: OpTick})
	s := step("open a session", Command{Op: OpSessionOpen, TTL: time.Second})
	step("bound acquire c", Command{Op: OpAcquire, Name: "c", Session: s.Session.ID})
	step("bound acquire d", Command{Op: OpAcquire, Name: "d", Session: s.Session.ID})
	step("close the session", Command{Op: OpSessionClose, Session: s.Session.ID})
	s = step("open another session", Command{Op: OpSessionOpen, TTL: time.Second})
	step("bound acquire e", Command{Op: OpAcquire, Name: "e", Session: s.Session.ID})
	now += int64(2 * time.Second)
	step("tick: the session expires", Command{Op: OpTick})
	if rel, exp := m.LeaseEnds(); rel != 3 || exp != 2 || m.Holders() != 1 {
		t.Fatalf("LeaseEnds = %d released, %d expired, Holders %d; want 3 (a, c, d), 2 (b, e), 1 (a's waiter)", rel, exp, m.Holders())
	}
	step("acquire f", Command{Op: OpAcquire, Name: "f", TTL: time.Hour})

	var buf bytes.Buffer
	if err := m.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Holders(), holdersScan(r); got != 2 || want != 2 {
		t.Fatalf("restored: Holders() = %d, holders %d; want 2", got, want)
	}
	if rel, exp := r.LeaseEnds(); rel != 0 || exp != 0 {
		t.Fatalf("restored: LeaseEnds = %d, %d; want 0, 0 (statistics are not state)", rel, exp)
	}
}

// What LeaseEnds counts as released, exactly (fence_releases_total's
// help): a release by the holder, a cancelled wait whose grant had come
// through, the leases of a closed session. Not: a refused release, the
// cancel of a wait still queued, a grant that only expires.
func TestLeaseEndsReleasedExactly(t *testing.T) {
	m := New()
	now := int64(0)
	step := func(cmd Command) Result {
		now += int64(time.Millisecond)
		cmd.Now = now
		return m.Apply(cmd)
	}
	a := step(Command{Op: OpAcquire, Name: "a", TTL: time.Hour})
	step(Command{Op: OpAcquire, Name: "a", TTL: time.Hour, Wait: time.Hour, RequestID: "w1"})
	step(Command{Op: OpAcquire, Name: "a", TTL: time.Hour, Wait: time.Hour, RequestID: "w2"})
	step(Command{Op: OpCancelWait, Name: "a", RequestID: "w2"}) // still queued: nothing granted, nothing released
	if r := step(Command{Op: OpRelease, Name: "a", Token: a.Lease.Token + 100}); r.Err == nil {
		t.Fatal("a release with a token never issued was accepted")
	}
	if rel, _ := m.LeaseEnds(); rel != 0 {
		t.Fatalf("released %d after a refused release and a queued wait's cancel, want 0", rel)
	}
	r := step(Command{Op: OpRelease, Name: "a", Token: a.Lease.Token}) // 1: hands a on to w1
	if len(r.Events) != 1 || r.Events[0].RequestID != "w1" || r.Events[0].Lease == nil {
		t.Fatalf("release of a: events %+v, want the lock granted to w1", r.Events)
	}
	step(Command{Op: OpCancelWait, Name: "a", RequestID: "w1"}) // 2: its client gave up after the grant
	if m.Holders() != 0 {
		t.Fatalf("holders %d after w1's granted wait was cancelled, want 0", m.Holders())
	}
	s := step(Command{Op: OpSessionOpen, TTL: time.Second})
	step(Command{Op: OpAcquire, Name: "c", Session: s.Session.ID})
	step(Command{Op: OpSessionClose, Session: s.Session.ID}) // 3
	step(Command{Op: OpAcquire, Name: "e", TTL: 10 * time.Millisecond})
	now += int64(time.Second)
	step(Command{Op: OpTick}) // e expires
	if rel, exp := m.LeaseEnds(); rel != 3 || exp != 1 {
		t.Fatalf("LeaseEnds = %d released, %d expired; want 3 (a, w1's grant cancelled, the session's c), 1 (e)", rel, exp)
	}
}
