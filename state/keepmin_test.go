package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// A restart with a lower --min-id-retention and --max-ids (an OpConfig that
// lowers both) must not forget an op_id accepted under the old minimum
// before the old minimum has passed for it: the retry would apply twice
// (G5; the outside review's double add: 22 unique ops, counter 31).
func TestLoweredMinRetentionKeepsIdsAcceptedUnderTheOld(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxOps = 100
	lower := cfg
	lower.MaxOps, lower.MinIDRetention = 10, time.Second

	m := NewWithConfig(cfg)
	mustGrant(t, m, acq(at(0), "w", "W", time.Hour), 1)
	mustOK(t, m, add(at(1), "ctr", 1, 5, "OP1"))
	for i := range 20 {
		mustOK(t, m, add(at(2), "ctr", 1, 1, fmt.Sprintf("x%d", i)))
	}
	mustOK(t, m, Command{Op: OpConfig, Now: at(4), Config: lower})

	// Across a snapshot too: the old minimum is part of the state.
	var buf bytes.Buffer
	if err := m.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*Machine{"applied": m, "restored": r} {
		// A new id 1s later: the memory is over the new MaxOps and OP1 is
		// older than the new minimum, but younger than the old one.
		res := m.Apply(add(at(5), "ctr", 1, 1, "y1"))
		if res.Err == nil {
			t.Fatalf("%s: a new op_id while every remembered one is younger than the old minimum (3m) was accepted; want RESOURCE_EXHAUSTED", name)
		}
		retry := mustOK(t, m, add(at(6), "ctr", 1, 5, "OP1"))
		if !retry.Replayed || retry.AddValue != 5 {
			t.Fatalf("%s: OP1 retried after the lowered minimum = %+v, want its saved result (replayed, value 5)", name, retry)
		}
		if v := string(m.Resource("ctr").Value); v != "25" {
			t.Fatalf("%s: ctr = %s, want 25 (OP1 once, 20 adds of 1)", name, v)
		}
		// Once the old minimum has passed since the change, the new rules
		// hold: old ids may be forgotten by count and new ids are accepted.
		after := at(4) + int64(3*time.Minute) + int64(time.Second)
		if res := m.Apply(add(after, "ctr", 1, 1, "y2")); res.Err != nil {
			t.Fatalf("%s: new op_id after the old minimum passed: %v", name, res.Err)
		}
		if got := m.OldestIDAge(after); got > 3*time.Minute+5*time.Second {
			t.Fatalf("%s: oldest id %s old after the old minimum passed: the new MaxOps was not applied", name, got)
		}
	}
}
