package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The largest lock-delay is a rule in the log (Config.MaxLockDelay): an
// acquire above it is refused naming lock_delay and the bound, one at it is
// granted; 0 means the format's bound, fence.MaxLockDelay, so a rule
// recorded before the field existed (and a machine's first rules) keeps
// allowing what it allowed. A lease granted under a higher bound keeps its
// lock-delay, and the bound survives a snapshot.
func TestLockDelayBoundIsARule(t *testing.T) {
	m := New()
	day := acq(at(1), "old", "A", time.Minute)
	day.LockDelay = fence.MaxLockDelay
	mustOK(t, m, day) // DefaultConfig: MaxLockDelay 0, the format's bound
	over := acq(at(1), "over", "A", time.Minute)
	over.LockDelay = fence.MaxLockDelay + 1
	if e := errAs[*fence.InvalidError](t, m.Apply(over).Err); e.Field != "lock_delay" || e.Bound != "at most 24h0m0s" {
		t.Fatalf("above the format's bound: %+v", e)
	}

	c := DefaultConfig()
	c.MaxLockDelay = time.Minute
	mustOK(t, m, Command{Op: OpConfig, Now: at(2), Config: c})
	at60 := acq(at(3), "a", "A", time.Minute)
	at60.LockDelay = time.Minute
	mustOK(t, m, at60)
	at61 := acq(at(3), "b", "B", time.Minute)
	at61.LockDelay = time.Minute + time.Nanosecond
	before := snapshotBytes(t, m)
	e := errAs[*fence.InvalidError](t, m.Apply(at61).Err)
	if e.Field != "lock_delay" || e.Bound != "at most 1m0s (the server's max_lock_delay)" || e.Value != "1m0.000000001s" {
		t.Fatalf("above the rule: %+v", e)
	}
	if !bytes.Equal(before, snapshotBytes(t, m)) {
		t.Fatal("a refused acquire changed the machine")
	}
	// The day-long lock-delay granted before the rule stays: expired at
	// 61 s, "old" is delayed for a day from then.
	mustOK(t, m, tick(at(61)))
	if li := m.Lock("old", at(62)); li.LockDelayRemaining != fence.MaxLockDelay-time.Second {
		t.Fatalf("the lock-delay granted before the rule: %+v", li)
	}

	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	n := New()
	if err := n.Restore(&b); err != nil {
		t.Fatal(err)
	}
	if n.Config().MaxLockDelay != time.Minute {
		t.Fatalf("restored rule %v, want 1m", n.Config().MaxLockDelay)
	}
	at61.Now = at(6)
	if e := errAs[*fence.InvalidError](t, n.Apply(at61).Err); e.Field != "lock_delay" {
		t.Fatalf("after a restore: %+v", e)
	}
}

// A request is judged by the same bound before it is proposed
// (fence.Limits, which the node and the server take from the rules).
func TestLimitsOfConfig(t *testing.T) {
	c := Config{MaxTTL: time.Hour, MaxLockDelay: time.Minute}
	if l := c.Limits(); l != (fence.Limits{MaxTTL: time.Hour, MaxLockDelay: time.Minute}) {
		t.Fatalf("Limits = %+v", l)
	}
	req := fence.AcquireRequest{Name: "x", TTL: time.Second, LockDelay: 2 * time.Minute}
	if e := errAs[*fence.InvalidError](t, req.Validate(c.Limits())); e.Field != "lock_delay" {
		t.Fatalf("Validate: %+v, want lock_delay refused", e)
	}
	req.LockDelay = time.Minute
	if err := req.Validate(c.Limits()); err != nil {
		t.Fatal(err)
	}
}
