package node

import (
	"context"
	"testing"
	"time"
)

// groupWakes is how often the hub woke the watchers of w's name or
// prefix.
func groupWakes(n *Node, w *Watch) uint64 {
	n.fsm.hub.mu.Lock()
	defer n.fsm.hub.mu.Unlock()
	return w.g.wakes
}

// An apply wakes only the watchers whose name or prefix one of its changes
// covers: watchers of "b/" and of lock "a/x" are not woken by grants under
// "a/" of other locks; a grant of a/x wakes the watchers of a/x and of
// "a/" and "" (every lock), not those of "b/".
func TestWatchWakesOnlyTheWatchersAChangeCovers(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watch := func(r WatchRequest) *Watch {
		w, err := n.Watch(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		return w
	}
	b, b2, ax, a, all := watch(WatchRequest{Prefix: "b/"}), watch(WatchRequest{Prefix: "b/"}), watch(WatchRequest{Name: "a/x"}), watch(WatchRequest{Prefix: "a/"}), watch(WatchRequest{})
	for _, name := range []string{"a/1", "a/2", "a/xy", "c"} {
		mustApply(t, n, acquire(name, time.Hour))
	}
	if got := groupWakes(n, b); got != 0 {
		t.Fatalf("the watchers of b/ were woken %d times by changes under a/ and of c", got)
	}
	if got := groupWakes(n, ax); got != 0 {
		t.Fatalf("the watchers of a/x were woken %d times by changes of other locks", got)
	}
	if got := groupWakes(n, a); got != 3 {
		t.Fatalf("the watchers of a/ were woken %d times by 3 applies under a/", got)
	}
	mustApply(t, n, acquire("a/x", time.Hour))
	if groupWakes(n, ax) != 1 || groupWakes(n, a) != 4 || groupWakes(n, all) != 5 || groupWakes(n, b) != 0 {
		t.Fatalf("after a grant of a/x: wakes of a/x %d, a/ %d, every lock %d, b/ %d; want 1, 4, 5, 0",
			groupWakes(n, ax), groupWakes(n, a), groupWakes(n, all), groupWakes(n, b))
	}
	if b.g != b2.g {
		t.Fatal("two watchers of b/ are not one group")
	}
	mustApply(t, n, acquire("b/1", time.Hour))
	for _, w := range []*Watch{b, b2} {
		evs, err := w.Next(ctx, nil)
		if err != nil || len(evs) != 1 || evs[0].State == nil {
			t.Fatalf("state: %v %v", evs, err)
		}
		if evs, err = w.Next(ctx, nil); err != nil || len(evs) != 1 || evs[0].Change.Name != "b/1" {
			t.Fatalf("the change of b/1: %v %v", evs, err)
		}
	}
}
