package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// OnChanges hands each applied command's changes to the hook, in log
// order with their entry's index, before the proposer gets its result
// (so what a client was answered is in the operator view already); with
// the hook removed nothing more is handed.
func TestOnChangesSeesEachCommandsChangesBeforeItsAnswer(t *testing.T) {
	n := openNode(t, t.TempDir())
	var mu sync.Mutex
	var seen []string
	var last uint64
	n.OnChanges(func(index uint64, cs []state.Change) {
		mu.Lock()
		defer mu.Unlock()
		if index < last {
			seen = append(seen, fmt.Sprintf("index went back: %d after %d", index, last))
		}
		last = index
		for _, c := range cs {
			seen = append(seen, fmt.Sprintf("%s %s %d", c.Kind, c.Name, c.Token))
		}
	})
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	res := mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "a", Owner: "o", TTL: time.Minute})
	if g := got(); len(g) == 0 || g[len(g)-1] != fmt.Sprintf("granted a %d", res.Lease.Token) {
		t.Fatalf("after the acquire was answered the hook saw %q", g)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "a", Token: res.Lease.Token})
	if g := got(); g[len(g)-1] != fmt.Sprintf("released a %d", res.Lease.Token) {
		t.Fatalf("after the release was answered the hook saw %q", g)
	}
	n.OnChanges(nil)
	before := len(got())
	mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "b", Owner: "o", TTL: time.Minute})
	if g := got(); len(g) != before {
		t.Fatalf("a removed hook was still handed %q", g[before:])
	}
}
