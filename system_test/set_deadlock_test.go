//go:build e2e

package system_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// No two waiting sets deadlock (issue 23): 16 clients, each on its own
// session stream, for a minute acquire random overlapping sets of 2–8 of
// 12 names, listed in random orders, each with a wait of its own. Every
// request is granted or refused busy once its wait ran out — none is
// stuck: each call returns within its wait and a grace — and every client
// is granted some. While it holds a set, each client writes every lock's
// resource with the set's token: a write refused STALE_TOKEN would mean
// two clients held one lock at once (the leases' 30 s TTL is far longer
// than any hold). At the end nothing is held or queued.
func TestWaitingSetsNeverDeadlock(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	const (
		clients  = 16
		names    = 12
		duration = time.Minute
		grace    = 10 * time.Second // for a loaded 2-core box; a stuck request would wait its whole run
	)
	ctx, cancel := context.WithTimeout(context.Background(), duration+2*hangGuard)
	defer cancel()
	var granted, timedOut [clients]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	stop := time.Now().Add(duration)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.New(srv.URL())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 23))
			for time.Now().Before(stop) {
				var locks []fence.LockSpec
				for _, k := range rng.Perm(names)[:2+rng.IntN(7)] {
					locks = append(locks, fence.LockSpec{Name: fmt.Sprintf("deadlock/%02d", k)})
				}
				wait := time.Duration(200+rng.IntN(2800)) * time.Millisecond
				start := time.Now()
				l, err := c.AcquireSet(ctx, locks, client.Wait(wait), client.Owner(fmt.Sprint("client-", i)))
				took := time.Since(start)
				if took > wait+grace {
					errs <- fmt.Errorf("client %d: a request with a %s wait took %s", i, wait, took)
					return
				}
				var busy *fence.BusyError
				switch {
				case errors.As(err, &busy) && busy.Waited:
					timedOut[i].Add(1)
					continue
				case err != nil:
					errs <- fmt.Errorf("client %d: %v", i, err)
					return
				}
				granted[i].Add(1)
				for _, s := range locks {
					if _, err := c.Write(ctx, s.Name, l.Token(), []byte(fmt.Sprint(i))); err != nil {
						errs <- fmt.Errorf("client %d: write %s with token %d of a set it holds: %v", i, s.Name, l.Token(), err)
						return
					}
				}
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("client %d: release: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := int64(0)
	for i := range clients {
		if granted[i].Load() == 0 {
			t.Errorf("client %d was never granted a set (%d waits ran out)", i, timedOut[i].Load())
		}
		total += granted[i].Load()
	}
	c, err := client.New(srv.URL(), client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	left, err := c.List(ctx, "deadlock/")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Errorf("after the run, lock %s has %d holders and %d waiters", l.Name, len(l.Holders), l.Waiters)
	}
	t.Logf("%d sets granted, %d waits ran out, over %s", total, func() (n int64) {
		for i := range clients {
			n += timedOut[i].Load()
		}
		return n
	}(), duration)
}
