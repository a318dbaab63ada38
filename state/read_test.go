package state

import (
	"testing"
	"time"
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
