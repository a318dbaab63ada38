package state

import (
	"testing"
	"time"
)

// A watch's state lists a lock as the machine holds it: a lease whose time
// has run out but whose expiry no command has applied yet (a lock's expiry
// is applied by a tick or a command on it) is still listed, 0 left, so the
// expired change that the tick makes later ends a lease the watcher was
// shown. Read settled (List's view, LocksPage) the lease is already gone,
// and the watcher got an expired change for a lock its state never listed
// (an outside test saw it with 60,000 locks under churn). A waiter whose
// wait ran out stays listed until its left_queue change the same way.
func TestWatchStateListsALeaseUntilItsExpiryIsApplied(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "w/a", "A", time.Second), 1)
	mustGrant(t, m, acq(at(0.1), "w/b", "B", 10*time.Second), 2)
	mustOK(t, m, waitAcq(at(0.2), "w/b", "W", time.Second, time.Second, "wb"))
	// Another lock's command moves the decision time past both ends
	// without touching w/a or w/b.
	mustGrant(t, m, acq(at(2), "x", "X", time.Second), 3)

	if settled, _ := m.LocksPage("w/", "", 0, m.Now()); len(settled) != 1 || settled[0].Name != "w/b" || settled[0].Waiters != 0 {
		t.Fatalf("settled view: %+v, want w/b alone with no waiter (List judges as the next command would)", settled)
	}
	held, next := m.LocksHeldPage("w/", "", 0, m.Now())
	if next != "" || len(held) != 2 || held[0].Name != "w/a" || held[1].Name != "w/b" {
		t.Fatalf("held view: %+v, want w/a and w/b", held)
	}
	if a := held[0]; len(a.Holders) != 1 || a.Holders[0].Token != 1 || a.Holders[0].Remaining != 0 {
		t.Fatalf("w/a as held: %+v, want its lease (token 1) with 0 left", a)
	}
	if b := held[1]; b.Waiters != 1 {
		t.Fatalf("w/b as held: %+v, want W's wait still queued", b)
	}
	if one := m.LockHeld("w/a", m.Now()); one.Free || len(one.Holders) != 1 {
		t.Fatalf("LockHeld(w/a): %+v, want its lease", one)
	}

	// The tick applies the ends: the changes end exactly what was listed.
	r := m.Apply(tick(at(2)))
	var expired, left bool
	for _, c := range r.Changes {
		expired = expired || (c.Kind == ChangeExpired && c.Name == "w/a" && c.Token == 1)
		left = left || (c.Kind == ChangeLeftQueue && c.Name == "w/b")
	}
	if !expired || !left {
		t.Fatalf("tick changes %+v, want w/a's token 1 expired and W leaving w/b's queue", r.Changes)
	}
	if held, _ := m.LocksHeldPage("w/", "", 0, m.Now()); len(held) != 1 || held[0].Name != "w/b" || held[0].Waiters != 0 {
		t.Fatalf("held view after the tick: %+v, want w/b alone", held)
	}
}
