package state

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"pgregory.net/rapid"
)

// Fault 4 (G5 under ordinary load): an add whose reply was lost is retried
// one minute later, after 120,000 other writes with op_ids. With the rules a
// node proposes (DefaultConfig) it is remembered: Replayed, applied once.
func TestRetryAfter120000WritesIsAppliedOnce(t *testing.T) {
	m := configured(t)
	mustGrant(t, m, acq(0, "x", "A", time.Hour), 1)
	mustOK(t, m, add(0, "counter", 1, 1, "first"))
	const n = 120_000
	for i := range n {
		now := int64(i) * int64(time.Minute) / n
		mustOK(t, m, write(now, "other", 1, "v", fmt.Sprint("op-", i)))
	}
	r := mustOK(t, m, add(at(60), "counter", 1, 1, "first"))
	if !r.Replayed || r.AddValue != 1 {
		t.Fatalf("retry after %d writes: %+v", n, r)
	}
	if rs := m.Resource("counter"); string(rs.Value) != "1" || rs.Version != 1 {
		t.Fatalf("counter %+v, want applied once", rs)
	}
	if age := m.OldestIDAge(at(60)); age != time.Minute {
		t.Fatalf("oldest id age %v, want 1m", age)
	}
}

// When the memory is full of ids younger than MinIDRetention, a new id is
// refused (not applied) and no young id is forgotten; ids older than it may
// be forgotten by count; IDRetention still forgets everything.
func TestIDMemoryNeverForgetsAYoungID(t *testing.T) {
	small := func(c *Config) { c.MaxOps, c.MaxRequests = 100, 2 }
	t.Run("op_ids", func(t *testing.T) {
		m := withConfig(t, small)
		mustGrant(t, m, acq(0, "x", "A", 24*time.Hour), 1)
		for i := range 100 { // exactly the bound: all accepted
			mustOK(t, m, add(int64(i)*int64(time.Second)/2, "n", 1, 1, fmt.Sprint("op-", i)))
		}
		wantExhausted(t, m, add(at(50), "n", 1, 1, "op-100"), "remembered op_ids (config.max_ops)", "at most 100 younger than 3m0s")
		wantExhausted(t, m, write(at(50), "other", 1, "v", "w"), "config.max_ops", "at most 100 younger than 3m0s")
		wantExhausted(t, m, del(at(50), "n", 1, "d"), "config.max_ops", "at most 100 younger than 3m0s")
		if r := mustOK(t, m, add(at(60), "n", 1, 1, "op-0")); !r.Replayed || r.AddValue != 1 {
			t.Fatalf("first op retried at 1m: %+v", r)
		}
		if r := mustOK(t, m, add(at(60), "n", 1, 1, "")); r.AddValue != 101 {
			t.Fatalf("an op without op_id is not refused: %+v", r)
		}
		// At 3m the oldest (op-0, remembered at 0s) may go: the new id is
		// taken and op-0 is forgotten by count, op-1 (0.5s) is not.
		if r := mustOK(t, m, add(at(180), "n", 1, 1, "op-100")); r.AddValue != 102 {
			t.Fatalf("op-100 at 3m: %+v", r)
		}
		wantExhausted(t, m, add(at(180), "n", 1, 1, "op-101"), "config.max_ops", "at most 100 younger than 3m0s")
		if r := mustOK(t, m, add(at(180), "n", 1, 1, "op-1")); !r.Replayed {
			t.Fatalf("op-1 (2m59.5s old) forgotten: %+v", r)
		}
		// op-0 (3m old, beyond the count) is forgotten: its retry is a new
		// id, and the memory is full of young ones.
		if _, ok := m.ops.get(opKeyOf("n", "op-0")); ok {
			t.Fatal("op-0 still remembered")
		}
		wantExhausted(t, m, add(at(180), "n", 1, 1, "op-0"), "config.max_ops", "at most 100 younger than 3m0s")
		// IDRetention (24h) forgets them all.
		mustOK(t, m, tick(at(24*3600+180)))
		if m.ops.len() != 0 || m.OldestIDAge(at(24*3600+180)) != 0 {
			t.Fatalf("%d op_ids remembered after 24h", m.ops.len())
		}
	})
	t.Run("request_ids", func(t *testing.T) {
		m := withConfig(t, small)
		for i, rid := range []string{"r0", "r1"} {
			c := Command{Op: OpAcquire, Now: at(float64(i)), Name: rid, Owner: "A", TTL: time.Second, RequestID: rid}
			mustGrant(t, m, c, fence.Token(i+1))
			mustOK(t, m, rel(at(float64(i)), rid, fence.Token(i+1)))
		}
		mustGrant(t, m, acq(at(2), "h", "A", time.Hour), 3)
		grant := Command{Op: OpAcquire, Now: at(2), Name: "y", Owner: "A", TTL: time.Second, RequestID: "r2"}
		wantExhausted(t, m, grant, "remembered request_ids (config.max_requests)", "at most 2 younger than 3m0s")
		wantExhausted(t, m, waitAcq(at(2), "h", "B", time.Second, time.Minute, "r2"), "config.max_requests", "at most 2 younger than 3m0s")
		mustGrant(t, m, acq(at(2), "y", "A", time.Second), 4)                            // no request_id: nothing to remember
		errAs[*fence.BusyError](t, m.Apply(Command{Op: OpAcquire, Now: at(2), Name: "h", // a refused try-acquire is not remembered
			Owner: "B", TTL: time.Second, RequestID: "r2"}).Err)
		r := m.Apply(Command{Op: OpAcquire, Now: at(3), Name: "r0", Owner: "A", TTL: time.Second, RequestID: "r0"})
		if !r.Replayed {
			t.Fatalf("r0 forgotten: %+v", r)
		}
		grant.Now = at(180)
		mustGrant(t, m, grant, 5)
	})
}

// With MinIDRetention 0 ids are forgotten by count at any age: an op_id
// pushed out by MaxOps newer ones applies again.
func TestZeroMinRetentionForgetsByCount(t *testing.T) {
	c := uncapped()
	c.MaxOps = 1000
	m := NewWithConfig(c)
	mustGrant(t, m, acq(0, "x", "A", time.Hour), 1)
	mustOK(t, m, add(0, "n", 1, 1, "first"))
	for i := range c.MaxOps {
		mustOK(t, m, write(0, "other", 1, "v", fmt.Sprint("op-", i)))
	}
	if r := mustOK(t, m, add(0, "n", 1, 1, "first")); r.Replayed || r.AddValue != 2 {
		t.Fatalf("retry after MaxOps newer ids: %+v, want applied again", r)
	}
}

// TestIDMemoryProperty: whatever the load and the (small) limits, an op_id
// accepted less than MinIDRetention ago is never applied again — its retry
// is Replayed — a refused new id changes nothing, and the memory holds at
// most MaxOps ids (one more until the next apply trims the oldest).
func TestIDMemoryProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxOps := rapid.IntRange(1, 8).Draw(t, "max_ops")
		minRet := time.Duration(rapid.IntRange(1, 6).Draw(t, "min_id_retention_s")) * time.Second
		c := DefaultConfig()
		c.MaxOps, c.MinIDRetention, c.IDRetention = maxOps, minRet, minRet+time.Duration(rapid.IntRange(0, 6).Draw(t, "extra_s"))*time.Second
		m := NewWithConfig(uncapped()) // MinIDRetention 0 before the OpConfig
		if r := m.Apply(Command{Op: OpConfig, Config: c}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if r := m.Apply(acq(0, "x", "A", time.Hour)); r.Err != nil {
			t.Fatal(r.Err)
		}
		accepted := map[string]int64{} // op_id -> when it was applied
		var now int64
		value := int64(0)
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now += int64(rapid.IntRange(0, 1500).Draw(t, "dt_ms")) * int64(time.Millisecond)
			id := fmt.Sprint("op-", rapid.IntRange(0, 15).Draw(t, "id"))
			r := m.Apply(add(now, "n", 1, 1, id))
			at, seen := accepted[id]
			switch {
			case r.Err != nil:
				if !errors.Is(r.Err, fence.ErrResourceExhausted) {
					t.Fatalf("%s at %d: %v", id, now, r.Err)
				}
				if seen && now-at < int64(minRet) {
					t.Fatalf("%s accepted at %d refused as new at %d: forgotten within MinIDRetention", id, at, now)
				}
			case r.Replayed:
				if !seen {
					t.Fatalf("%s replayed but never accepted", id)
				}
			default:
				if seen && now-at < int64(minRet) {
					t.Fatalf("%s accepted at %d applied again at %d", id, at, now)
				}
				accepted[id] = now
				value++
			}
			if rs := m.Resource("n"); string(rs.Value) != fmt.Sprint(value) && value > 0 {
				t.Fatalf("value %q, want %d", rs.Value, value)
			}
			if m.ops.len() > maxOps+1 {
				t.Fatalf("%d op_ids remembered, MaxOps %d", m.ops.len(), maxOps)
			}
			if age := m.OldestIDAge(now); age >= c.IDRetention+time.Duration(1500*time.Millisecond) {
				t.Fatalf("oldest id %v old, IDRetention %v", age, c.IDRetention)
			}
		}
	})
}
