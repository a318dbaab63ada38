package state

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fenceworks/fence"
)

// TestBoundariesInTime: random sets, shared and permit acquires with short
// TTLs and waits, sessions that end, releases, cancels and ticks, with
// server time moving on. After every command: no exclusive holder beside
// another, no more holders than permits, a set's lease on all its locks,
// every grant's token above every earlier one, a wait ends as ran out
// only once its deadline has passed, and the Changes of the command,
// applied to the previous view of the locks, give the machine's holders
// and queue lengths. At the end, with time far on, nothing is held or
// queued and every waiter got exactly one outcome (none stuck). A second
// machine fed the same commands (restored from a snapshot midway) gives
// the same results byte for byte (R1).
func TestBoundariesInTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := New()
		var log []Command
		var results []string
		view := map[string][]fence.Token{} // holders by lock, from Changes
		waiters := map[string]int{}        // queue length by lock, from Changes
		deadline := map[string]int64{}     // queued request -> its deadline
		outcomes := map[string]int{}       // request -> outcomes seen
		var last fence.Token
		now := int64(0)
		var sessions []uint64
		apply := func(step int, c Command) Result {
			log = append(log, c)
			r := m.Apply(c)
			results = append(results, describe(r))
			for _, ch := range r.Changes {
				switch ch.Kind {
				case ChangeGranted:
					view[ch.Name] = append(view[ch.Name], ch.Token)
				case ChangeReleased, ChangeExpired:
					view[ch.Name] = slices.DeleteFunc(view[ch.Name], func(x fence.Token) bool { return x == ch.Token })
				}
				if ch.Holders != len(view[ch.Name]) {
					t.Fatalf("step %d: change %+v says %d holders, the changes so far %d", step, ch, ch.Holders, len(view[ch.Name]))
				}
				waiters[ch.Name] = ch.Waiters
			}
			grants := []*fence.Lease{} // the waiters settled first, then the command's own grant
			if r.Queued {
				deadline[c.RequestID] = c.Now + int64(c.Wait)
			}
			for _, e := range r.Events {
				outcomes[e.RequestID]++
				if e.Lease != nil {
					grants = append(grants, e.Lease)
				} else if d, ok := deadline[e.RequestID]; ok && errorsIsBusy(e.Err) && m.impl.expiryTime() < d {
					t.Fatalf("step %d: wait %s ran out at %d, before its deadline %d", step, e.RequestID, m.impl.expiryTime(), d)
				}
			}
			if r.Lease != nil && c.Op == OpAcquire && !r.Replayed {
				grants = append(grants, r.Lease)
			}
			for _, g := range grants {
				if g.Token <= last {
					t.Fatalf("step %d: token %d not above %d", step, g.Token, last)
				}
				last = g.Token
			}
			checkTimedInvariants(t, step, m, view, waiters)
			return r
		}
		for step := range 60 {
			now += int64(rapid.SampledFrom([]time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond, time.Second}).Draw(t, "dt"))
			c := Command{Op: OpTick, Now: now}
			switch op := rapid.IntRange(0, 11).Draw(t, "op"); {
			case op < 6:
				specs := drawSpecs(t)
				c = Command{Op: OpAcquire, Now: now, Owner: "o", TTL: rapid.SampledFrom([]time.Duration{200 * time.Millisecond, time.Second}).Draw(t, "ttl"),
					RequestID: fmt.Sprintf("r%d", step)}
				if len(specs) == 1 {
					c.Name, c.Mode, c.Permits = specs[0].Name, specs[0].Mode, specs[0].Permits
				} else {
					c.Locks = specs
				}
				c.Wait = rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, 2 * time.Second}).Draw(t, "wait")
				if len(sessions) > 0 && rapid.Bool().Draw(t, "bound") {
					c.Session, c.TTL = rapid.SampledFrom(sessions).Draw(t, "session"), 0
				}
				c.LockDelay = rapid.SampledFrom([]time.Duration{0, 0, 150 * time.Millisecond}).Draw(t, "lock_delay")
			case op == 6:
				c = Command{Op: OpSessionOpen, Now: now, TTL: rapid.SampledFrom([]time.Duration{500 * time.Millisecond, 2 * time.Second}).Draw(t, "sttl")}
			case op == 7 && len(sessions) > 0:
				c = Command{Op: OpSessionClose, Now: now, Session: rapid.SampledFrom(sessions).Draw(t, "close")}
			case op == 8 || op == 9:
				var held []*fence.Lease
				for _, n := range []string{"a", "b", "c", "d"} {
					for _, h := range m.Lock(n, now).Holders {
						held = append(held, &h)
					}
				}
				if len(held) > 0 {
					h := rapid.SampledFrom(held).Draw(t, "lease")
					c = rel(now, h.Name, h.Token)
					if op == 9 {
						c = renew(now, h.Name, h.Token, 0)
					}
				}
			case op == 10:
				var queued []QueuedRequest
				queued = append(queued, m.Queued()...)
				if len(queued) > 0 {
					q := rapid.SampledFrom(queued).Draw(t, "cancel")
					c = Command{Op: OpCancelWait, Now: now, Name: q.Name, RequestID: q.RequestID}
				}
			}
			r := apply(step, c)
			if c.Op == OpSessionOpen && r.Session != nil {
				sessions = append(sessions, r.Session.ID)
			}
		}
		// A waiter handed a lock by the first tick holds it a full TTL from
		// then (doc.go, Locks); the second ends it.
		now += int64(time.Hour)
		apply(60, Command{Op: OpTick, Now: now})
		now += int64(time.Hour)
		apply(61, Command{Op: OpTick, Now: now})
		for _, n := range []string{"a", "b", "c", "d"} {
			if l := m.impl.names.get(n); l != nil && (len(l.holders) > 0 || len(l.queue) > 0) {
				t.Fatalf("an hour on, lock %s still has %d holders and %d waiters", n, len(l.holders), len(l.queue))
			}
		}
		for id := range deadline {
			if outcomes[id] > 1 {
				t.Fatalf("waiter %s: %d outcomes", id, outcomes[id])
			}
		}
		// R1: the same commands on a machine restored from a snapshot of a
		// prefix of them decide the rest alike.
		cut := rapid.IntRange(0, len(log)).Draw(t, "cut")
		a := New()
		for _, c := range log[:cut] {
			a.Apply(c)
		}
		var b bytes.Buffer
		if err := a.Snapshot(&b); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		n := New()
		if err := n.Restore(&b); err != nil {
			t.Fatalf("restore: %v", err)
		}
		for i, c := range log[cut:] {
			if got := describe(n.Apply(c)); got != results[cut+i] {
				t.Fatalf("command %d after a restore at %d: %s, want %s", cut+i, cut, got, results[cut+i])
			}
		}
		var x, y bytes.Buffer
		if m.Snapshot(&x) != nil || n.Snapshot(&y) != nil || !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Fatal("the restored machine ends in another state")
		}
	})
}

// checkTimedInvariants holds the machine's locks to the invariants of lock
// boundaries and to the view the Changes built.
func checkTimedInvariants(t *rapid.T, step int, m *Machine, view map[string][]fence.Token, waiters map[string]int) {
	for _, n := range []string{"a", "b", "c", "d"} {
		l := m.impl.names.get(n)
		var toks []fence.Token
		var queue int
		if l != nil {
			shared := 0
			for _, g := range l.holders {
				toks = append(toks, g.token)
				if g.modeOn(l) == fence.Shared {
					shared++
				}
				for _, p := range g.parts() {
					if p.l.holderWith(g.token) != g {
						t.Fatalf("step %d: lease %d not on its lock %s", step, g.token, p.l.name)
					}
				}
			}
			if err := checkHolderModes(l); err != nil {
				t.Fatalf("step %d: lock %s: %v", step, n, err)
			}
			queue = len(l.queue)
		}
		if !slices.Equal(toks, view[n]) {
			t.Fatalf("step %d: lock %s held by %v, the changes say %v", step, n, toks, view[n])
		}
		if queue != waiters[n] {
			t.Fatalf("step %d: lock %s has %d waiters, the changes say %d", step, n, queue, waiters[n])
		}
	}
}
