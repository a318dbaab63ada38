package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

func grantOf(name string, token fence.Token) state.Change {
	return state.Change{Kind: state.ChangeGranted, Name: name, Token: token, Owner: "o"}
}

// A story keeps the last storyEvents events of its name, oldest first,
// and says that older ones were dropped.
func TestStoryKeepsTheLastEventsOfEachName(t *testing.T) {
	b := newStoryBook(func() time.Time { return time.Unix(1000, 0) })
	const n = storyEvents + 10
	for i := 1; i <= n; i++ {
		b.record(uint64(i), []state.Change{grantOf("a", fence.Token(i))})
	}
	b.record(n+1, []state.Change{grantOf("b", 1)})
	events, dropped := b.read("a")
	if len(events) != storyEvents || !dropped {
		t.Fatalf("%d events (dropped %t), want %d and dropped", len(events), dropped, storyEvents)
	}
	for i, e := range events {
		if want := fence.Token(n - storyEvents + 1 + i); e.token != want || e.index != uint64(want) {
			t.Fatalf("event %d: token %d index %d, want %d (the last %d, oldest first)", i, e.token, e.index, want, storyEvents)
		}
	}
	if events, dropped := b.read("b"); len(events) != 1 || dropped {
		t.Fatalf("b: %d events (dropped %t), want 1, none dropped", len(events), dropped)
	}
}

// At most storyNames names are remembered: the least recently touched is
// forgotten first; reading a story does not keep it.
func TestStoryForgetsTheLeastRecentlyTouchedName(t *testing.T) {
	b := newStoryBook(time.Now)
	for i := range storyNames {
		b.record(uint64(i+1), []state.Change{grantOf(fmt.Sprint("n", i), 1)})
	}
	b.record(storyNames+1, []state.Change{grantOf("n0", 2)}) // n0 touched again: n1 is now the oldest
	b.read("n1")                                             // a read is no touch
	b.record(storyNames+2, []state.Change{grantOf("new", 1)})
	if len(b.byName) != storyNames || b.byPrin[""].Len() != storyNames {
		t.Fatalf("%d names (%d in the LRU), want %d", len(b.byName), b.byPrin[""].Len(), storyNames)
	}
	if ev, _ := b.read("n1"); len(ev) != 0 {
		t.Errorf("n1, the least recently touched, is still remembered: %d events", len(ev))
	}
	for _, name := range []string{"n0", "n2", "new"} {
		if ev, _ := b.read(name); len(ev) == 0 {
			t.Errorf("%s was forgotten", name)
		}
	}
}

// Waiters' queued and left-queue changes are no events (a busy lock's
// queue would push its grants out), and the queued request_ids kept to
// tell a hand-off are bounded too.
func TestStoryKeepsNoQueueEventsAndBoundsTheQueuedIDs(t *testing.T) {
	b := newStoryBook(time.Now)
	for i := range 3 * storyEvents {
		b.record(uint64(i+1), []state.Change{{Kind: state.ChangeQueued, Name: "busy", RequestID: fmt.Sprint("r", i)}})
	}
	b.record(1000, []state.Change{{Kind: state.ChangeLeftQueue, Name: "busy", RequestID: "r0"}})
	if ev, _ := b.read("busy"); len(ev) != 0 {
		t.Fatalf("queue changes made %d events", len(ev))
	}
	if q := len(b.byName["busy"].queued); q > storyEvents {
		t.Fatalf("%d queued ids kept, want at most %d", q, storyEvents)
	}
	b.record(1001, []state.Change{{Kind: state.ChangeGranted, Name: "busy", Token: 5, RequestID: "r1"}})
	if ev, _ := b.read("busy"); len(ev) != 1 || ev[0].kind != "handoff" {
		t.Fatalf("the grant to queued r1: %+v, want one handoff", ev)
	}
}
