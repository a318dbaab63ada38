package state

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// withConfig is a configured machine with DefaultConfig changed by f.
func withConfig(t *testing.T, f func(*Config)) *Machine {
	t.Helper()
	c := DefaultConfig()
	f(&c)
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Config: c})
	return m
}

// wantExhausted applies c and fails unless it is refused naming limit
// (a substring of Limit) with bound, leaving the machine unchanged (beyond
// what a tick at c's time does, which any command does first).
func wantExhausted(t *testing.T, m *Machine, c Command, limit, bound string) {
	t.Helper()
	mustOK(t, m, Command{Op: OpTick, Now: c.Now, Slack: c.Slack}) // what any command at c.Now does first
	before := snapshotBytes(t, m)
	r := m.Apply(c)
	if !errors.Is(r.Err, fence.ErrResourceExhausted) || fence.ReasonOf(r.Err) != fence.ReasonResourceExhausted {
		t.Fatalf("%+v: %v, want resource exhausted", c, r.Err)
	}
	e := errAs[*fence.ResourceExhaustedError](t, r.Err)
	if !strings.Contains(e.Limit, limit) || e.Bound != bound {
		t.Fatalf("%+v: limit %q bound %q, want %q %q", c, e.Limit, e.Bound, limit, bound)
	}
	if r.Queued || r.Lease != nil || r.Resource != nil || r.Replayed {
		t.Fatalf("refused and yet %+v", r)
	}
	if after := snapshotBytes(t, m); !bytes.Equal(before, after) {
		t.Fatalf("a refused %+v changed the state (snapshot of %d bytes, then %d)", c, len(before), len(after))
	}
}

func TestWaiterCaps(t *testing.T) {
	t.Run("per lock", func(t *testing.T) {
		m := withConfig(t, func(c *Config) { c.MaxWaitersPerLock = 2 })
		mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
		mustGrant(t, m, acq(0, "y", "A", time.Minute), 2)
		for i := range 2 {
			if r := mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Minute, fmt.Sprint("w", i))); !r.Queued {
				t.Fatalf("waiter %d not queued", i)
			}
		}
		wantExhausted(t, m, waitAcq(0, "x", "B", time.Second, time.Minute, "w2"), `waiters on lock "x" (config.max_waiters_per_lock)`, "at most 2")
		mustOK(t, m, waitAcq(0, "y", "B", time.Second, time.Minute, "y0")) // another lock has room
		// A retry of a queued request is not a new waiter.
		if r := mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Minute, "w1")); !r.Replayed {
			t.Fatalf("retry %+v", r)
		}
		// A try-acquire is not a waiter: it is refused as busy.
		errAs[*fence.BusyError](t, m.Apply(acq(0, "x", "C", time.Second)).Err)
		// Once a waiter leaves there is room again.
		mustOK(t, m, cancel(0, "x", "w0", 0))
		mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Minute, "w2"))
	})
	t.Run("in all", func(t *testing.T) {
		m := withConfig(t, func(c *Config) { c.MaxWaiters = 3 })
		for i, n := range []string{"a", "b", "c"} {
			mustGrant(t, m, acq(0, n, "A", time.Hour), fence.Token(i+1))
		}
		mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Minute, "1"))
		mustOK(t, m, waitAcq(0, "b", "B", time.Second, time.Minute, "2"))
		mustOK(t, m, waitAcq(0, "b", "B", time.Second, time.Minute, "3"))
		wantExhausted(t, m, waitAcq(0, "c", "B", time.Second, time.Minute, "4"), "waiters on all locks (config.max_waiters)", "at most 3")
		// A wait that runs out frees its place.
		mustOK(t, m, tick(at(60)))
		mustOK(t, m, waitAcq(at(60), "c", "B", time.Second, time.Minute, "4"))
		if m.waiting != 1 {
			t.Fatalf("%d waiting, want 1", m.waiting)
		}
	})
}

func TestResourceCaps(t *testing.T) {
	t.Run("count, tombstones included", func(t *testing.T) {
		m := withConfig(t, func(c *Config) { c.MaxResources = 2 })
		mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
		mustOK(t, m, write(0, "r1", 1, "v", ""))
		mustOK(t, m, add(0, "r2", 1, 1, ""))
		wantExhausted(t, m, write(0, "r3", 1, "v", ""), "fenced resources (config.max_resources)", "at most 2")
		wantExhausted(t, m, add(0, "r3", 1, 1, ""), "fenced resources (config.max_resources)", "at most 2")
		wantExhausted(t, m, del(0, "r3", 1, ""), "fenced resources (config.max_resources)", "at most 2")
		mustOK(t, m, write(0, "r1", 1, "w", "")) // existing ones still change
		mustOK(t, m, del(0, "r1", 1, ""))
		wantExhausted(t, m, write(0, "r3", 1, "v", ""), "fenced resources (config.max_resources)", "at most 2")
	})
	t.Run("bytes", func(t *testing.T) {
		m := withConfig(t, func(c *Config) { c.MaxResourceBytes = 10 })
		mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
		mustOK(t, m, write(0, "a", 1, "12345", ""))
		mustOK(t, m, write(0, "b", 1, "1234", ""))
		mustOK(t, m, add(0, "c", 1, 1, "")) // "1": exactly 10 bytes
		wantExhausted(t, m, write(0, "d", 1, "x", ""), "config.max_resource_bytes", "at most 10")
		wantExhausted(t, m, write(0, "a", 1, "123456", ""), "config.max_resource_bytes", "at most 10")
		wantExhausted(t, m, add(0, "c", 1, 9, ""), "config.max_resource_bytes", "at most 10") // "10"
		mustOK(t, m, write(0, "a", 1, "abcde", ""))                                           // same size
		mustOK(t, m, write(0, "a", 1, "ab", ""))                                              // smaller
		mustOK(t, m, write(0, "d", 1, "xyz", ""))
		mustOK(t, m, del(0, "b", 1, ""))
		mustOK(t, m, write(0, "e", 1, "1234", ""))
		if m.resourceBytes != 10 {
			t.Fatalf("%d bytes, want 10", m.resourceBytes)
		}
		n := New()
		if err := n.Restore(bytes.NewReader(snapshotBytes(t, m))); err != nil || n.resourceBytes != 10 {
			t.Fatalf("restored %d bytes (%v)", n.resourceBytes, err)
		}
	})
	t.Run("a stale token is refused as stale, not as exhausted", func(t *testing.T) {
		m := withConfig(t, func(c *Config) { c.MaxResourceBytes = 1 })
		mustGrant(t, m, acq(0, "x", "A", time.Minute), 1)
		mustOK(t, m, rel(0, "x", 1))
		mustGrant(t, m, acq(0, "x", "A", time.Minute), 2)
		mustOK(t, m, write(0, "a", 2, "1", ""))
		errAs[*fence.StaleTokenError](t, m.Apply(write(0, "a", 1, "12", "")).Err)
	})
}
