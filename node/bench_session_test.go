package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// BenchmarkSessionEnd ends (closes) a session holding FENCE_SESSION_SCALE
// (default 2,000; run it with 100000) session-bound leases, each lock with
// one waiter registered on this node, and reports how long the close took
// from proposal to answer (one apply: every lease released, every lock
// handed on, every Event delivered) and how long until every waiter had
// its grant. Run: go test -run '^$' -bench SessionEnd -benchtime 1x ./node/
func BenchmarkSessionEnd(b *testing.B) {
	k := scaleN(b)
	for range b.N {
		b.StopTimer()
		n, err := Open(Config{DataDir: b.TempDir(), Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		s := openSession(b, n, time.Hour)
		ctx := context.Background()
		parallel(b, k, func(i int) (state.Result, error) {
			return n.Apply(ctx, state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("l-%d", i), Owner: "s", Session: s})
		})
		// Waiters registered as acquireWaiting does, without a goroutine
		// each: their acquires are proposed and queued.
		chans := make([]chan state.Event, k)
		for i := range chans {
			chans[i] = n.wait.add(fmt.Sprintf("w-%d", i))
		}
		parallel(b, k, func(i int) (state.Result, error) {
			return n.propose(ctx, &state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("l-%d", i), Owner: "w", TTL: time.Hour,
				Wait: time.Hour, RequestID: fmt.Sprintf("w-%d", i)})
		})
		commands0 := n.props.commands.Load()
		b.StartTimer()
		start := time.Now()
		res, err := n.Apply(ctx, state.Command{Op: state.OpSessionClose, Session: s})
		closed := time.Since(start)
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
		for i, ch := range chans {
			if ev := <-ch; ev.Lease == nil {
				b.Fatalf("waiter %d: %+v, want its grant", i, ev)
			}
		}
		all := time.Since(start)
		b.StopTimer()
		if got := n.props.commands.Load() - commands0; got != 1 {
			b.Fatalf("%d commands proposed to end the session, want 1", got)
		}
		b.ReportMetric(float64(closed.Microseconds())/1000, "close-ms")
		b.ReportMetric(float64(all.Microseconds())/1000, "all-granted-ms")
		b.ReportMetric(float64(len(res.Events)), "events")
		n.Close()
		b.StartTimer()
	}
}

// parallel runs fn(0..k-1) on 64 goroutines and fails on any error or
// refusal.
func parallel(b *testing.B, k int, fn func(i int) (state.Result, error)) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	next := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := fn(i)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range k {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
