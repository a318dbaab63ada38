package server

import (
	"testing"
	"time"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// A watch's state must be written within the write timeout plus
// watchStatePage a page of its first page: a page written later than
// that average rate gets the state's bound as its deadline (a cut there
// counts reason "state"); the last page ends the bound, and the changes
// after it get the write timeout alone.
func TestWatchStateHasABoundForAllItsPages(t *testing.T) {
	page := func(n uint32, more bool) []*fencev1.WatchEvent {
		return []*fencev1.WatchEvent{{Event: &fencev1.WatchEvent_State{State: &fencev1.WatchState{Page: n, More: more}}}}
	}
	const timeout = time.Hour
	d := &watchDeadline{timeout: timeout}
	if _, ofState := d.before(page(0, true)); ofState {
		t.Fatal("the first page's deadline is the state's bound; want the write timeout's")
	}
	d.after(page(0, true))
	// The state began long ago: its bound (start + timeout + 2 pages) is
	// before the write timeout from now.
	d.start = d.start.Add(-timeout)
	at, ofState := d.before(page(1, true))
	if want := d.start.Add(timeout + 2*watchStatePage); !ofState || !at.Equal(want) {
		t.Fatalf("page 1 of a state begun a write timeout ago: deadline %v (state's bound %v); want the state's bound %v", at, ofState, want)
	}
	d.after(page(1, true))
	d.before(page(2, false))
	d.after(page(2, false))
	change := []*fencev1.WatchEvent{{Event: &fencev1.WatchEvent_Change{Change: &fencev1.LockChange{}}}}
	if _, ofState := d.before(change); ofState {
		t.Fatal("a change after the last page has the state's bound; want the write timeout's")
	}
}
