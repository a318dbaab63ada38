package server

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

// TestStreamWorkersAreReused: requests run one after another take the
// worker the first one started (its grown stack), not a new goroutine
// each; a request that finds every worker busy (one blocked) runs at once
// on a new one; once the server's context ends, idle workers end.
func TestStreamWorkersAreReused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := newStreamWorkers(ctx)
	// waitIdle waits until at least n workers wait (0: none does).
	waitIdle := func(n int64) {
		for n > 0 && w.idle.Load() < n || n == 0 && w.idle.Load() != 0 {
			runtime.Gosched()
		}
	}
	var started sync.Map // the goroutines requests ran on (their stacks' ids)
	for range 50 {
		done := make(chan struct{})
		w.run(func() {
			started.Store(goroutineID(), true)
			close(done)
		})
		<-done
		waitIdle(1)
	}
	n := 0
	started.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("50 requests one after another ran on %d goroutines, want 1 (the worker reused)", n)
	}

	// A busy worker holds back no request.
	release, ran := make(chan struct{}), make(chan struct{})
	w.run(func() { <-release })
	w.run(func() { close(ran) })
	<-ran // a request queued behind the blocked one would never run
	close(release)
	waitIdle(2)

	cancel()
	waitIdle(0)
}

// goroutineID is the running goroutine's id, from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]:..."
	for i := len("goroutine "); i < len(buf); i++ {
		if buf[i] == ' ' {
			return string(buf[len("goroutine "):i])
		}
	}
	return string(buf)
}
