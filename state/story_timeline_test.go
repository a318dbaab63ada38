package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// TestStoryTimeline plays the paused-worker story (1 story second = 1 s of server
// time): A's lease expires while it is paused, B takes over with token 2 and
// writes, and A's late write with token 1 is refused at the store.
func TestStoryTimeline(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(at(0), "sku-42", "A", 5*time.Second), 1)

	busy := errAs[*fence.BusyError](t, m.Apply(acq(at(4), "sku-42", "B", 5*time.Second)).Err)
	if busy.Holder != "A" || busy.Token != 1 || busy.Remaining != time.Second {
		t.Fatalf("busy at t=4: %+v, want holder A token 1 with 1s left", busy)
	}

	mustOK(t, m, tick(at(5)))
	if info := m.Lock("sku-42", at(5)); info.Lease != nil {
		t.Fatalf("at t=5 the lease should be gone: %+v", info.Lease)
	}
	mustGrant(t, m, acq(at(6), "sku-42", "B", 5*time.Second), 2)

	if r := mustOK(t, m, write(at(6), "stock", 2, "8", "")); string(r.Resource.Value) != "8" {
		t.Fatalf("B's write: %+v", r.Resource)
	}
	stale := errAs[*fence.StaleTokenError](t, m.Apply(write(at(7), "stock", 1, "5", "")).Err)
	if stale.Token != 1 || stale.LastAccepted != 2 || stale.Resource != "stock" {
		t.Fatalf("A's late write: %+v", stale)
	}
	if got, want := stale.Error(), "token 1 is older than accepted token 2"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	mustOK(t, m, write(at(7), "stock", 2, "9", ""))

	st := m.Resource("stock")
	if string(st.Value) != "9" || st.LastToken != 2 || st.Version != 2 {
		t.Fatalf("final stock %+v, want value 9, last token 2, version 2", st)
	}
}
