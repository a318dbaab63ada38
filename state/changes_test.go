package state

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// changeLine is c as "kind name token owner rid holders/waiters".
func changeLine(c Change) string {
	return fmt.Sprintf("%s %s t%d %s %q h%d w%d", c.Kind, c.Name, c.Token, c.Owner, c.RequestID, c.Holders, c.Waiters)
}

func changeLines(r Result) string {
	var b []string
	for _, c := range r.Changes {
		b = append(b, changeLine(c))
	}
	return strings.Join(b, "; ")
}

// Every change of a lock is in the Result of the command that made it, in
// the order it was made, with the lock's holders and queue after it: what
// the node hands to watchers.
func TestResultChangesFollowTheLock(t *testing.T) {
	m := New()
	steps := []struct {
		cmd  Command
		want string
	}{
		{acq(at(0), "a", "A", time.Second), `granted a t1 A "" h1 w0`},
		{waitAcq(at(0.1), "a", "B", time.Second, 5*time.Second, "rb"), `queued a t0 B "rb" h1 w1`},
		{waitAcq(at(0.2), "a", "C", time.Second, 500*time.Millisecond, "rc"), `queued a t0 C "rc" h1 w2`},
		{rel(at(0.3), "a", 1), `released a t1 A "" h0 w2; granted a t2 B "rb" h1 w1`},
		{tick(at(0.8)), `left_queue a t0 C "rc" h1 w0`},
		{tick(at(1.4)), `expired a t2 B "rb" h0 w0`},
		{acq(at(2), "a", "D", time.Second), `granted a t3 D "" h1 w0`},
		{waitAcq(at(2.1), "a", "E", time.Second, time.Minute, "re"), `queued a t0 E "re" h1 w1`},
		{Command{Op: OpCancelWait, Now: at(2.2), Name: "a", RequestID: "re"}, `left_queue a t0 E "re" h1 w0`},
		{renew(at(2.3), "a", 3, time.Second), ``},
		{acq(at(2.4), "a", "F", time.Second), ``}, // busy: nothing changes
	}
	for i, s := range steps {
		if got := changeLines(m.Apply(s.cmd)); got != s.want {
			t.Fatalf("step %d %+v:\n got %s\nwant %s", i, s.cmd, got, s.want)
		}
	}
}

// The built-in store's changes: an accepted write (with the version it
// made) and a write refused for a stale token (with the token it lost
// to) — the paused worker's late write, as a watcher of the resource sees
// it.
func TestResultChangesOfTheStore(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "A", time.Second), 1)
	r := m.Apply(write(0, "stock/a", 1, "5", ""))
	if len(r.Changes) != 1 || r.Changes[0].Kind != ChangeWritten || r.Changes[0].Name != "stock/a" || r.Changes[0].Token != 1 || r.Changes[0].Version != 1 {
		t.Fatalf("write: changes %+v", r.Changes)
	}
	mustOK(t, m, tick(at(2)))
	mustGrant(t, m, acq(at(2), "a", "B", time.Second), 2)
	mustOK(t, m, add(at(2), "stock/a", 2, -1, ""))
	r = m.Apply(write(at(2.1), "stock/a", 1, "4", ""))
	if len(r.Changes) != 1 || r.Changes[0].Kind != ChangeRefused || r.Changes[0].Token != 1 || r.Changes[0].LastAccepted != 2 {
		t.Fatalf("stale write: changes %+v (err %v)", r.Changes, r.Err)
	}
}
