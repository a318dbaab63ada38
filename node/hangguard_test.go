package node

import (
	"runtime"
	"testing"
	"time"
)

// hangGuard bounds a wait that has no bound of its own: a node's close
// (raft's shutdown waits for every raft goroutine), a proposal (raft never
// answers one still queued when it shuts down). It is far beyond any
// healthy run — a close takes well under a second — and it is a hang
// guard, not a performance bound: a hang fails the test that hung, names
// what hung and shows every goroutine, instead of eating the package's
// go test -timeout with a dump nobody can tie to a test.
const hangGuard = 60 * time.Second

// within runs fn and waits at most hangGuard for it. On a hang it reports
// (t.Errorf) what hung, with every goroutine's stack, and returns false;
// fn is left running. fn must not call t.Fatal (it runs on a goroutine of
// its own).
func within(t testing.TB, what string, fn func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		t.Errorf("%s: still not done after %s (hang guard); every goroutine:\n%s", what, hangGuard, allStacks())
		return false
	}
}

// allStacks is every goroutine's stack.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
