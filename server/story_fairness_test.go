package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// An outside attack: a principal that may lock only team-b/ pushed every
// team-a/ story out of the book with a churn of its own names, and
// LockStory for a still-held team-a/ lock then answered no events and no
// truncated flag. The book forgets the names of the principal holding the
// most first, so team-a's story stays; and a name that was forgotten is
// answered truncated, kept again or not.
func TestStoryChurnOfOnePrincipalForgetsItsOwnNamesFirst(t *testing.T) {
	b := newStoryBook(time.Now)
	b.record(1, []state.Change{{Kind: state.ChangeGranted, Name: "team-a/x", Token: 1, Owner: "a", Principal: "a"}})
	for i := range storyNames + 64 {
		b.record(uint64(i+2), []state.Change{{Kind: state.ChangeGranted, Name: fmt.Sprint("team-b/", i), Token: fence.Token(i + 2), Owner: "b", Principal: "b"}})
	}
	if len(b.byName) > storyNames {
		t.Fatalf("%d names kept, want at most %d", len(b.byName), storyNames)
	}
	if ev, truncated := b.read("team-a/x"); len(ev) != 1 || ev[0].kind != "grant" || truncated {
		t.Fatalf("team-a/x after team-b's churn: %+v (truncated %t); want its grant, not truncated", ev, truncated)
	}
	if ev, truncated := b.read("team-b/0"); len(ev) != 0 || !truncated {
		t.Fatalf("team-b/0, forgotten: %+v (truncated %t); want no events and truncated", ev, truncated)
	}
	// Forgotten, then touched again: what it had before is missing.
	b.record(10000, []state.Change{{Kind: state.ChangeReleased, Name: "team-b/0", Token: 2, Owner: "b", Principal: "b"}})
	if ev, truncated := b.read("team-b/0"); len(ev) != 1 || !truncated {
		t.Fatalf("team-b/0, forgotten and touched again: %+v (truncated %t); want its release and truncated", ev, truncated)
	}
}

// Refusals of stale tokens have a ring of their own: 70 stale writes after
// a grant keep the grant (an outside test saw 64 refusals and no grant),
// the last storyRefusals refusals, in log order, truncated.
func TestStoryRefusalsDoNotPushTheGrantsOut(t *testing.T) {
	b := newStoryBook(time.Now)
	b.record(1, []state.Change{grantOf("a", 5)})
	for i := range 70 {
		b.record(uint64(i+2), []state.Change{{Kind: state.ChangeRefused, Name: "a", Token: 1, LastAccepted: 5}})
	}
	b.record(100, []state.Change{{Kind: state.ChangeReleased, Name: "a", Token: 5}})
	ev, truncated := b.read("a")
	if len(ev) != 2+storyRefusals || !truncated {
		t.Fatalf("%d events (truncated %t), want %d and truncated", len(ev), truncated, 2+storyRefusals)
	}
	if ev[0].kind != "grant" || ev[len(ev)-1].kind != "release" {
		t.Fatalf("first %q, last %q; want the grant first, the release last", ev[0].kind, ev[len(ev)-1].kind)
	}
	for i := 1; i < len(ev); i++ {
		if ev[i].index <= ev[i-1].index {
			t.Fatalf("event %d at index %d after %d: not in log order", i, ev[i].index, ev[i-1].index)
		}
	}
}
