package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestLocksListing(t *testing.T) {
	m := New()
	mustOK(t, m, acq(0, "job/b", "A", 10*time.Second))
	mustOK(t, m, acq(0, "job/a", "A", 10*time.Second))
	mustOK(t, m, waitAcq(0, "job/a", "B", time.Second, time.Minute, "w"))
	mustOK(t, m, Command{Op: OpAcquire, Name: "job/delayed", Owner: "A", TTL: time.Second, LockDelay: time.Minute})
	mustOK(t, m, acq(0, "job/released", "A", time.Second))
	mustOK(t, m, rel(0, "job/released", 4))
	mustOK(t, m, acq(at(2), "other", "A", 10*time.Second)) // decision time 2s

	got := m.Locks("job/", at(2))
	var names []string
	for _, l := range got {
		names = append(names, l.Name)
	}
	if want := []string{"job/a", "job/b", "job/delayed"}; len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Fatalf("listed %v, want %v", names, want)
	}
	a := got[0]
	if a.Lease == nil || a.Lease.Owner != "A" || a.Lease.Remaining != 8*time.Second || a.Waiters != 1 || a.LastToken != 2 {
		t.Fatalf("job/a: %+v lease %+v", a, a.Lease)
	}
	// The delayed lock's lease expired at 1s, before the decision time: reads see the delay without a tick.
	if d := got[2]; d.Lease != nil || d.LockDelayRemaining != 59*time.Second || d.LastToken != 3 {
		t.Fatalf("job/delayed: %+v", d)
	}
	if n := len(m.Locks("", at(2))); n != 4 {
		t.Fatalf("%d locks listed without prefix, want 4", n)
	}
	if info := m.Lock("job/released", at(2)); info.Lease != nil || info.LastToken != 4 {
		t.Fatalf("released: %+v", info)
	}
	if info := m.Lock("never", 0); info.Name != "never" || info.Lease != nil || info.LastToken != 0 {
		t.Fatalf("unknown lock: %+v", info)
	}
	if m.idle.len() != 1 {
		t.Fatalf("%d idle locks, want 1 (job/released)", m.idle.len())
	}
}

// Reads judge at the machine's decision time, as Apply does: a lock is
// shown free iff an acquire applied now would be granted. The old reads
// judged expiry at the caller's clock and listed a lock as free while an
// acquire (whose decision time lags by the commit slack) was told BUSY.
func TestReadsAgreeWithApply(t *testing.T) {
	t.Run("a lease past its end at the clock but not at the decision time", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", time.Second), 1)
		mustOK(t, m, withSlack(tick(at(2)), 1500*time.Millisecond)) // decision time 0.5s
		li := m.Lock("x", at(2))
		if li.Free || li.Lease == nil || li.Lease.Token != 1 || li.Lease.Remaining != 0 {
			t.Fatalf("read %+v (lease %+v), want held by token 1", li, li.Lease)
		}
		if ls := m.Locks("", at(2)); len(ls) != 1 || ls[0].Name != "x" || ls[0].Lease == nil {
			t.Fatalf("listed %+v", ls)
		}
		errAs[*fence.BusyError](t, m.Apply(withSlack(acq(at(2), "x", "B", time.Second), 1500*time.Millisecond)).Err)
		// Once the decision time passes the lease's end, both agree it is free.
		mustOK(t, m, acq(at(2), "other", "A", time.Second))
		if li := m.Lock("x", at(2)); !li.Free || li.Lease != nil {
			t.Fatalf("read %+v after the decision time passed", li)
		}
		mustGrant(t, m, acq(at(2), "x", "B", time.Second), 3)
	})
	t.Run("a waiter about to be handed the lock", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", time.Second), 1)
		mustOK(t, m, waitAcq(0, "x", "B", time.Second, 10*time.Second, "b"))
		mustOK(t, m, acq(at(2), "other", "A", time.Second)) // decision time 2s; x not settled
		li := m.Lock("x", at(2))
		if li.Free || li.Lease != nil || li.Waiters != 1 {
			t.Fatalf("read %+v, want not free: b is handed the lock by the next command", li)
		}
		r := m.Apply(acq(at(2), "x", "C", time.Second))
		errAs[*fence.BusyError](t, r.Err)
		if len(r.Events) != 1 || r.Events[0].RequestID != "b" || r.Events[0].Lease == nil {
			t.Fatalf("events %+v", r.Events)
		}
	})
	t.Run("a waiter whose wait ran out before the lock was free", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
		mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Second, "b"))
		mustOK(t, m, acq(at(6), "other", "A", time.Second))
		if li := m.Lock("x", at(6)); !li.Free || li.Waiters != 0 {
			t.Fatalf("read %+v, want free", li)
		}
		mustGrant(t, m, acq(at(6), "x", "C", time.Second), 3)
	})
	t.Run("lock-delay as of the decision time", func(t *testing.T) {
		m := configured(t)
		mustOK(t, m, Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Second, LockDelay: 2 * time.Second})
		mustOK(t, m, withSlack(acq(at(4), "other", "A", time.Second), 2*time.Second)) // decision time 2s
		li := m.Lock("x", at(4))
		if li.Free || li.LockDelayRemaining != 0 || li.Lease != nil {
			t.Fatalf("read %+v, want delayed until 3s (decision time), 0 left at the clock", li)
		}
		wantBusy("", 0, 0, true)(t, m, m.Apply(withSlack(acq(at(4), "x", "B", time.Second), 2*time.Second)))
	})
}

func TestLocksPage(t *testing.T) {
	m := configured(t)
	for i, n := range []string{"a/1", "a/2", "a/3", "a/4", "b/1"} {
		mustGrant(t, m, acq(0, n, "A", time.Minute), fence.Token(i+1))
	}
	mustOK(t, m, rel(0, "a/3", 3)) // free: not listed
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		page, next := m.LocksPage("a/", after, 2, 0)
		for _, l := range page {
			names = append(names, l.Name)
		}
		if next == "" {
			break
		}
		if len(page) != 2 || next != page[1].Name || pages > 3 {
			t.Fatalf("page %+v next %q", page, next)
		}
		after = next
	}
	if fmt.Sprint(names) != "[a/1 a/2 a/4]" {
		t.Fatalf("paged %v", names)
	}
	if all, next := m.LocksPage("", "", 0, 0); len(all) != 4 || next != "" {
		t.Fatalf("no limit: %d locks, next %q", len(all), next)
	}
	if page, next := m.LocksPage("", "", 4, 0); len(page) != 4 || next != "" {
		t.Fatalf("exact page: %d locks, next %q", len(page), next)
	}
}
