package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): limits at their exact edges, and across a restore.

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The id memory holds at most MaxOps ids younger than MinIDRetention: with
// two remembered, a third new op_id is refused, not remembered as one over.
// (Kills memory.full's "m.n < max" → "<=".)
func TestMutantOpMemoryFullAtExactlyMaxOps(t *testing.T) {
	m := NewWithConfig(Config{MaxOps: 2, MinIDRetention: time.Minute, IDRetention: time.Hour})
	mustGrant(t, m, acq(0, "l", "A", time.Hour), 1)
	mustOK(t, m, write(0, "r", 1, "1", "op1"))
	mustOK(t, m, write(0, "r", 1, "2", "op2"))
	if err := m.Apply(write(0, "r", 1, "3", "op3")).Err; !errors.Is(err, fence.ErrResourceExhausted) {
		t.Fatalf("a third op_id with MaxOps 2, all younger than MinIDRetention: %v, want RESOURCE_EXHAUSTED", err)
	}
	// Once the oldest is MinIDRetention old it may go, and op3 fits.
	mustOK(t, m, write(at(60), "r", 1, "3", "op3"))
}

// Every bound of Config.Validate is inclusive. (Kills "v > hi" → ">=".)
func TestMutantConfigBoundsInclusive(t *testing.T) {
	c := DefaultConfig()
	c.MaxTTL = fence.LongestMaxTTL
	c.MaxOps, c.MaxRequests = MaxIDMemory, MaxIDMemory
	c.IDRetention = LongestRetention
	c.MinIDRetention = c.IDRetention
	if err := c.Validate(); err != nil {
		t.Fatalf("config at its upper bounds: %v", err)
	}
	c.MaxOps = MaxIDMemory + 1
	if err := c.Validate(); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("max_ops over its bound: %v", err)
	}
}

// The waiter count is part of what a restore rebuilds: the MaxWaiters cap
// holds on a restored replica as on the original. (Kills restore's
// "m.waiting++" → "m.waiting--".)
func TestMutantWaiterCapHoldsAfterRestore(t *testing.T) {
	a := NewWithConfig(Config{MaxWaiters: 1})
	mustGrant(t, a, acq(0, "a", "A", time.Minute), 1)
	if r := mustOK(t, a, waitAcq(0, "a", "B", time.Minute, time.Minute, "w1")); !r.Queued {
		t.Fatalf("w1 not queued: %s", describe(r))
	}
	var snap bytes.Buffer
	if err := a.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	b := New()
	if err := b.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(waitAcq(0, "a", "C", time.Minute, time.Minute, "w2")).Err; !errors.Is(err, fence.ErrResourceExhausted) {
		t.Fatalf("second waiter on the restored machine: %v, want RESOURCE_EXHAUSTED (MaxWaiters 1)", err)
	}
}
