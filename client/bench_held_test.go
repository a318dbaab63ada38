package client_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// BenchmarkHeldSessionLeases: heap per held session-bound lease, client
// and server in one process (issue 24: 1,000,000 of them): one Client,
// one session (TTL 1 min), 64 goroutines acquiring "held/<i>". bytes/lease is the
// process's whole live heap after GC (the client's leases and the embedded
// server's locks), per lease held. FENCE_HELD=N holds N (default 100,000);
// FENCE_HEAP_PROFILE=path writes the live heap's profile then (read it with
// go tool pprof -sample_index=inuse_space; -focus client. splits off the
// client's part).
func BenchmarkHeldSessionLeases(b *testing.B) {
	n := 100_000
	if v := os.Getenv("FENCE_HELD"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	const workers = 64
	heap := func() uint64 {
		runtime.GC()
		var s runtime.MemStats
		runtime.ReadMemStats(&s)
		return s.HeapAlloc
	}
	for range b.N {
		url, stop, err := startServer(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		// A session TTL of a minute: on a loaded machine a 10 s session's
		// keepalive can miss its TTL/3 while a million acquires run.
		c, err := client.New(url, client.WithSessionTTL(time.Minute))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		// held/0 opens the session: N leases in all, so N = 1,000,000
		// fits the embedded server's max_locks.
		leases := make([]*client.Lease, n)
		if leases[0], err = c.Acquire(ctx, "held/0"); err != nil {
			b.Fatal(err)
		}
		before := heap()
		var wg sync.WaitGroup
		var once sync.Once
		var first error
		for w := range workers {
			wg.Go(func() {
				for i := 1 + w; i < n; i += workers {
					l, err := c.Acquire(ctx, "held/"+strconv.Itoa(i))
					if err != nil {
						once.Do(func() { first = err })
						return
					}
					leases[i] = l
				}
			})
		}
		wg.Wait()
		if first != nil {
			b.Fatal(first)
		}
		after := heap()
		lost := 0
		for _, l := range leases {
			if l.Err() != nil {
				lost++
			}
		}
		if lost > 0 {
			// The session was lost (a loaded machine): its leases are gone
			// from both sides and the heap says nothing about n.
			b.Fatalf("%d of %d leases lost before the heap was read", lost, n)
		}
		b.ReportMetric(float64(int64(after)-int64(before))/float64(n-1), "bytes/lease")
		if p := os.Getenv("FENCE_HEAP_PROFILE"); p != "" {
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		runtime.KeepAlive(leases)
		c.Close()
		stop()
	}
}
