package state

// Tests written to kill mutants that survived `make mutate` (docs/testing.md,
// Mutation testing): reads agree with Apply at the exact edges of time, and
// the last page of a listing says it is the last.

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// touchOther moves the machine's decision time to now without settling
// anything on the locks under test.
func touchOther(t *testing.T, m *Machine, now int64) {
	t.Helper()
	mustOK(t, m, acq(now, "zz-other", "Z", time.Hour))
}

// A lease whose expiry is exactly the decision time is over for a read as
// for Apply. (Kills info's "expiresAt <= d" → "<".)
func TestMutantReadLeaseOverAtExactlyItsExpiry(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "A", time.Second), 1)
	touchOther(t, m, at(1))
	if li := m.Lock("a", at(1)); li.Lease != nil || !li.Free {
		t.Fatalf("lock a at its expiry: %+v, want free with no lease", li)
	}
	mustGrant(t, m, acq(at(1), "a", "B", time.Second), 3)
}

// A held lock's waiter whose wait has run out (exactly at the decision time,
// or before) is not counted, as Apply would end it. (Kills "w.deadline > d"
// → ">=" and the "g == nil" test of info negated.)
func TestMutantReadWaiterWhoseWaitRanOutIsNotCounted(t *testing.T) {
	for _, now := range []int64{at(1), at(2)} {
		m := New()
		mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
		if r := mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Second, "w")); !r.Queued {
			t.Fatalf("w not queued: %s", describe(r))
		}
		touchOther(t, m, now)
		if li := m.Lock("a", now); li.Waiters != 0 || li.Lease == nil {
			t.Fatalf("at %v: %+v, want held with no waiter (its 1s wait ran out)", time.Duration(now), li)
		}
	}
}

// A waiter whose wait ran out exactly when the lock became free is not
// handed the lock, by a read as by Apply. (Kills "queue[0].deadline <=
// available" → "<" in info.)
func TestMutantReadWaiterRanOutWhenLockFreed(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "A", time.Second), 1)
	if r := mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Second, "w")); !r.Queued {
		t.Fatalf("w not queued: %s", describe(r))
	}
	touchOther(t, m, at(2))
	if li := m.Lock("a", at(2)); !li.Free || li.Waiters != 0 {
		t.Fatalf("lock a: %+v, want free: w's wait ended as the lease did", li)
	}
	r := mustOK(t, m, tick(at(2)))
	if len(r.Events) != 1 || r.Events[0].Err == nil {
		t.Fatalf("tick: %s, want w's wait ran out", describe(r))
	}
}

// A page holding exactly the remaining locks is the last one. (Kills
// locksPage's "len(out) > limit" → ">=".)
func TestMutantLocksPageExactlyFullIsLast(t *testing.T) {
	m := New()
	for i, name := range []string{"p/a", "p/b", "p/c"} {
		mustGrant(t, m, acq(0, name, "A", time.Minute), fence.Token(i+1))
	}
	page, next := m.LocksPage("p/", "", 3, 0)
	if len(page) != 3 || next != "" {
		t.Fatalf("page of 3 with limit 3: %d locks, next %q, want next \"\"", len(page), next)
	}
	page, next = m.LocksPage("p/", "", 2, 0)
	if len(page) != 2 || next != "p/b" {
		t.Fatalf("limit 2: %d locks, next %q, want p/b", len(page), next)
	}
}

// Add accepts a sum of exactly MaxInt64 or MinInt64 and refuses one past
// it. (Kills the overflow checks' ">" → ">=" and "<" → "<=".)
func TestMutantAddUpToTheInt64Edges(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "l", "A", time.Minute), 1)
	mustOK(t, m, write(0, "hi", 1, strconv.FormatInt(math.MaxInt64-1, 10), ""))
	if r := mustOK(t, m, add(0, "hi", 1, 1, "")); r.AddValue != math.MaxInt64 {
		t.Fatalf("MaxInt64-1 + 1 = %d", r.AddValue)
	}
	if err := m.Apply(add(0, "hi", 1, 1, "")).Err; !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("MaxInt64 + 1: %v, want invalid", err)
	}
	mustOK(t, m, write(0, "lo", 1, strconv.FormatInt(math.MinInt64+1, 10), ""))
	if r := mustOK(t, m, add(0, "lo", 1, -1, "")); r.AddValue != math.MinInt64 {
		t.Fatalf("MinInt64+1 - 1 = %d", r.AddValue)
	}
	if err := m.Apply(add(0, "lo", 1, -1, "")).Err; !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("MinInt64 - 1: %v, want invalid", err)
	}
}

// OpBumpToken with a floor above the counter makes the floor itself the
// next token: its outcome is part of the log format, so it must not drift
// between versions (R1). A floor at or below the counter changes nothing.
// (Kills "cmd.Token-1" → "cmd.Token+1" in the test and in the assignment.)
func TestMutantBumpTokenNextGrantIsTheFloor(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	mustOK(t, m, Command{Op: OpBumpToken, Token: 100})
	mustGrant(t, m, acq(0, "b", "B", time.Minute), 100)
	mustOK(t, m, Command{Op: OpBumpToken, Token: 50})
	mustGrant(t, m, acq(0, "c", "C", time.Minute), 101)
	// A floor equal to the last token issued must not lower the counter
	// (which would issue 101 twice, breaking G1).
	mustOK(t, m, Command{Op: OpBumpToken, Token: 101})
	mustGrant(t, m, acq(0, "d", "D", time.Minute), 102)
}

// The oldest remembered time skips an entry made dead by its key being put
// again. (Kills oldest's "m.first + i" → "m.first - i".)
func TestMutantMemoryOldestSkipsDeadEntries(t *testing.T) {
	mem := newMemory[string, tv]()
	mem.put("a", 1, 10, "")
	mem.put("b", 2, 20, "")
	mem.put("a", 3, 30, "")
	if at, ok := mem.oldest(); !ok || at != 20 {
		t.Fatalf("oldest %d %v, want 20 (a's first entry is dead)", at, ok)
	}
}
