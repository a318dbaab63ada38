package server

import (
	"context"
	"sync/atomic"
)

// A session stream runs each request on a goroutine of its own (stream.go,
// dispatch). A new goroutine starts with a small stack, and a request's
// path through the server, the node and a grant's signature outgrows it:
// the runtime then copies the stack, walking every frame, once or twice
// per request — on the session benchmark more CPU than all of the server's
// own code (docs/benchmarks.md). So a request runs on a worker that
// outlives it: one that has finished waits for the next request, with the
// stack it grew, and a request finding no worker idle starts one. A
// request never waits for a busy worker (a blocking acquire holds only
// its own), so the concurrency is as before.

// maxIdleWorkers bounds the workers that wait for a request; one that
// finishes beyond it ends. Each holds a parked goroutine (its stack, which
// the garbage collector shrinks while it idles).
const maxIdleWorkers = 256

// streamWorkers runs the requests of every session stream of a server.
type streamWorkers struct {
	work chan func() // unbuffered: a send succeeds only to an idle worker
	idle atomic.Int64
	done <-chan struct{} // closed: idle workers end, no new one waits
}

func newStreamWorkers(ctx context.Context) *streamWorkers {
	return &streamWorkers{work: make(chan func()), done: ctx.Done()}
}

// run runs f on an idle worker, or on a new one.
func (w *streamWorkers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

// loop runs f, then waits for more while fewer than maxIdleWorkers wait.
func (w *streamWorkers) loop(f func()) {
	for {
		f()
		f = nil // nothing it held is kept while idle
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.work:
			w.idle.Add(-1)
		case <-w.done:
			w.idle.Add(-1)
			return
		}
	}
}
