package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing). Each says which planted change it catches.

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// An overwrite is charged only the bytes it adds: a resource of 6 bytes
// rewritten with 8 makes a total of 8, within a cap of 10. (Kills
// admitResource counting the old value twice, "- old" → "+ old".)
func TestMutantResourceBytesOverwriteCountsOnlyTheGrowth(t *testing.T) {
	m := NewWithConfig(Config{MaxResourceBytes: 10})
	mustGrant(t, m, acq(0, "l", "A", time.Minute), 1)
	mustOK(t, m, write(0, "r", 1, "666666", ""))
	mustOK(t, m, write(0, "r", 1, "88888888", ""))
	if got := m.Resource("r").Value; string(got) != "88888888" {
		t.Fatalf("value %q after the overwrite", got)
	}
	// Growing past the cap is still refused, naming the limit.
	err := m.Apply(write(0, "s", 1, "333", "")).Err
	if !errors.Is(err, fence.ErrResourceExhausted) {
		t.Fatalf("8+3 bytes under a cap of 10: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// After a cap is lowered below what is stored, a rewrite of the same size
// (or smaller) is accepted: caps refuse growth, not what a lowered cap
// already exceeds. (Kills "size > old" → "size >= old".)
func TestMutantResourceBytesSameSizeUnderLoweredCap(t *testing.T) {
	m := NewWithConfig(Config{MaxResourceBytes: 10})
	mustGrant(t, m, acq(0, "l", "A", time.Minute), 1)
	mustOK(t, m, write(0, "r", 1, "88888888", ""))
	cfg := m.Config()
	cfg.MaxResourceBytes = 4
	mustOK(t, m, Command{Op: OpConfig, Config: cfg})
	mustOK(t, m, write(0, "r", 1, "77777777", ""))
	mustOK(t, m, write(0, "r", 1, "55", ""))
	if err := m.Apply(write(0, "r", 1, "999999999", "")).Err; !errors.Is(err, fence.ErrResourceExhausted) {
		t.Fatalf("growth over the lowered cap: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// A waiter cancelled while queued gives its place back to the MaxWaiters
// count. (Kills cancelWait's "m.waiting--" → "m.waiting++", and its removal.)
func TestMutantCancelledWaiterFreesItsWaiterSlot(t *testing.T) {
	m := NewWithConfig(Config{MaxWaiters: 1})
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	r := mustOK(t, m, waitAcq(0, "a", "B", time.Minute, time.Minute, "w1"))
	if !r.Queued {
		t.Fatalf("w1 not queued: %s", describe(r))
	}
	if err := m.Apply(waitAcq(0, "a", "C", time.Minute, time.Minute, "w2")).Err; !errors.Is(err, fence.ErrResourceExhausted) {
		t.Fatalf("a second waiter with MaxWaiters 1: %v, want RESOURCE_EXHAUSTED", err)
	}
	mustOK(t, m, Command{Op: OpCancelWait, Name: "a", RequestID: "w1", Attempt: r.Attempt})
	if r := mustOK(t, m, waitAcq(0, "a", "C", time.Minute, time.Minute, "w2")); !r.Queued {
		t.Fatalf("w2 after w1 was cancelled: %s, want queued", describe(r))
	}
}

// Under the MaxLocks cap, an acquire of a lock whose lease has just expired
// (free after its own settle, not yet filed as idle) counts as re-using that
// lock and settles nothing else: the other locks' due outcomes are left to
// their own commands or the next tick, so this result carries no events.
// (Kills existingLocks' "n--" → "n++", which pushes the count to the cap and
// makes the acquire settle every lock first.)
func TestMutantMaxLocksReacquireSettlesOnlyItsLock(t *testing.T) {
	m := NewWithConfig(Config{MaxLocks: 3})
	mustGrant(t, m, acq(0, "a", "A", time.Second), 1)
	mustGrant(t, m, acq(0, "b", "B", time.Second), 2)
	if r := mustOK(t, m, waitAcq(0, "b", "W", time.Second, time.Minute, "wb")); !r.Queued {
		t.Fatalf("wb not queued: %s", describe(r))
	}
	r := mustOK(t, m, acq(at(2), "a", "A2", time.Second))
	if r.Lease == nil || r.Lease.Token != 3 {
		t.Fatalf("re-acquire of expired a: %s, want token 3", describe(r))
	}
	if len(r.Events) != 0 {
		t.Fatalf("acquire of a under the cap decided other locks: %s", describe(r))
	}
	// b's waiter is handed the lock by the tick, not by a's acquire.
	if r := mustOK(t, m, tick(at(2))); len(r.Events) != 1 || r.Events[0].RequestID != "wb" || r.Events[0].Lease == nil {
		t.Fatalf("tick: %s, want wb granted", describe(r))
	}
}

// A waiter handed the lock leaves the MaxWaiters count, so another client
// can queue behind it. (Kills handOn's "m.waiting--" → "m.waiting++".)
func TestMutantGrantedWaiterFreesItsWaiterSlot(t *testing.T) {
	m := NewWithConfig(Config{MaxWaiters: 1})
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	if r := mustOK(t, m, waitAcq(0, "a", "B", time.Minute, time.Minute, "w1")); !r.Queued {
		t.Fatalf("w1 not queued: %s", describe(r))
	}
	r := mustOK(t, m, rel(0, "a", 1))
	if len(r.Events) != 1 || r.Events[0].Lease == nil {
		t.Fatalf("release: %s, want w1 granted", describe(r))
	}
	if r := mustOK(t, m, waitAcq(0, "a", "C", time.Minute, time.Minute, "w2")); !r.Queued {
		t.Fatalf("w2 behind the granted w1: %s, want queued", describe(r))
	}
}
