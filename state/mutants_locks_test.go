package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): orders and ages the other tests never pinned.

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// Locks due at the same decision time are settled in name order, so a
// tick's events come out the same on every replica whatever order the locks
// were created in. (Kills deadlineHeap.Less's name tie-break negated.)
func TestMutantTickSettlesEqualDeadlinesByName(t *testing.T) {
	m := New()
	for i, name := range []string{"b", "a", "c"} {
		mustGrant(t, m, acq(0, name, "holder", time.Second), fence.Token(i+1))
		if r := mustOK(t, m, waitAcq(0, name, "next", time.Second, time.Minute, "w"+name)); !r.Queued {
			t.Fatalf("w%s not queued: %s", name, describe(r))
		}
	}
	r := mustOK(t, m, tick(at(1)))
	var order string
	for _, e := range r.Events {
		order += e.RequestID + " "
	}
	if order != "wa wb wc " {
		t.Fatalf("tick handed on %q, want wa wb wc (name order at equal deadlines): %s", order, describe(r))
	}
}

// An idle lock's tombstone is kept for IDRetention counted from when it
// became idle, so a late release with an older token still learns it is
// stale. The lock here went idle at 20h; at 21h it is one hour old.
// (Kills idleLocks.forget's "now - idleSince" → "now + idleSince".)
func TestMutantTombstoneAgeCountsFromIdleSince(t *testing.T) {
	m := New()
	t20 := int64(20 * time.Hour)
	mustGrant(t, m, acq(t20, "a", "A", time.Second), 1)
	mustOK(t, m, rel(t20, "a", 1))
	mustGrant(t, m, acq(t20, "a", "B", time.Second), 2)
	mustOK(t, m, rel(t20, "a", 2))
	err := m.Apply(rel(int64(21*time.Hour), "a", 1)).Err
	stale := errAs[*fence.StaleTokenError](t, err)
	if stale.LastAccepted != 2 {
		t.Fatalf("stale %+v, want last accepted 2", stale)
	}
	// And it is forgotten once IDRetention (24h) has passed since 20h.
	if err := m.Apply(rel(int64(44*time.Hour), "a", 1)).Err; !errors.Is(err, fence.ErrNotHolder) {
		t.Fatalf("release at 44h: %v, want NotHolder (tombstone forgotten)", err)
	}
}
