package client_test

import (
	"runtime"
	"strconv"
	"testing"
)

// TestSessionLeasesStartNoGoroutine: a lease bound to the session is an
// entry of the session's map, kept alive by the session's one keepalive —
// no goroutine of its own (issue 24: a million held leases). Acquiring
// 2,000 on one session leaves the process's goroutines (client and the
// embedded server) about where they were: fewer than one more per four
// leases. Seen failing with a goroutine planted per session lease in
// session.acquire (a wait on the session's closing).
func TestSessionLeasesStartNoGoroutine(t *testing.T) {
	const n = 2_000
	ctx := ctxFor(t)
	c := newClient(t)
	name := uniq(t)
	if _, err := c.Acquire(ctx, name+"/first"); err != nil { // opens the session and its stream
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for i := range n {
		if _, err := c.Acquire(ctx, name+"/"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/4 {
		t.Fatalf("%d goroutines more after %d session leases (before: %d): a goroutine per lease", grew, n, before)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
