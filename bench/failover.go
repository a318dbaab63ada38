package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// probeEvery is how often a failover run sends a new acquire after the
// kill.
const probeEvery = 10 * time.Millisecond

// FailoverResult is one failover run: a fresh cluster, a warm client with
// every node as an endpoint, the leader killed with SIGKILL, and the time
// from the kill to the first successful grant through that client.
type FailoverResult struct {
	System string
	Run    int
	Killed string // the killed leader's id
	// Grant: kill → the first acquire that succeeded (every attempt
	// started after the kill).
	Grant time.Duration
	// Elected: kill → a surviving node first reported itself the leader
	// (polled every 20 ms; 0 if the poll did not see it before the grant
	// ended the run).
	Elected time.Duration
	// Attempts: the granted probe's number (1 = the first, sent at the
	// kill); Started: when it was sent, since the kill; Launched: probes
	// sent in all.
	Attempts int
	Started  time.Duration
	Launched int
	FirstErr string
	OK       bool // a grant came within Config.FailoverTimeout
}

// runFailover: a fresh cluster of s's server kind; a client of s with
// every node as an endpoint, leader first (the client sticks to the first
// endpoint that works, so it is talking to the node that dies; etcd's
// client balances over all of them); a few acquire → release cycles to
// warm it; then kill -9 of the leader and, from that instant, acquire
// probes: an acquire (try, no wait) on a fresh lock name every probeEvery,
// each left to finish on its own, until one is granted.
func (c *Config) runFailover(ctx context.Context, s System, run int) (res FailoverResult, err error) {
	res = FailoverResult{System: s.Name(), Run: run}
	cl, err := c.startCluster(s.Server())
	if err != nil {
		return res, err
	}
	defer cl.Stop()
	leader := cl.leader
	res.Killed = cl.IDs[leader]
	client, err := s.Open(ctx, cl.addrFrom(leader), 1)
	if err != nil {
		return res, err
	}
	defer func() { _ = closeBounded(client) }()
	w, err := client.Worker(ctx, 0)
	if err != nil {
		return res, err
	}
	for i := range 5 {
		h, err := w.Acquire(ctx, fmt.Sprintf("failover/%s/%d/warm%d", s.Name(), run, i), AcquireOpts{TTL: 10 * time.Second})
		if err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if err := h.Release(ctx); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}

	t0, err := cl.Kill(leader)
	if err != nil {
		return res, err
	}
	// Watch for the new leader while the client tries.
	elected := make(chan time.Duration, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		if _, err := cl.Leader(wctx); err == nil {
			elected <- time.Since(t0)
		}
		close(elected)
	}()
	// Probes: a new acquire every probeEvery, each on a fresh lock name,
	// none waiting for the one before (a call stuck on a node without a
	// leader would otherwise decide the result by its own timeout).
	type probe struct {
		i        int
		at, done time.Duration // started, ended, since the kill
		err      error
	}
	pctx, stopProbes := context.WithDeadline(ctx, t0.Add(c.FailoverTimeout))
	defer stopProbes()
	results := make(chan probe, 1024)
	var wg sync.WaitGroup
	launch := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Since(t0)
			h, err := w.Acquire(pctx, fmt.Sprintf("failover/%s/%d/after%d", s.Name(), run, i), AcquireOpts{TTL: 10 * time.Second})
			done := time.Since(t0)
			select {
			case results <- probe{i: i, at: at, done: done, err: err}:
			default:
			}
			if err == nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = h.Release(rctx)
				cancel()
			}
		}()
	}
	launch(0)
	tick := time.NewTicker(probeEvery)
	n := 1
wait:
	for {
		select {
		case pr := <-results:
			if pr.err == nil {
				res.Grant, res.OK = pr.done, true
				res.Attempts, res.Started = pr.i+1, pr.at
				break wait
			}
			if res.FirstErr == "" {
				res.FirstErr = pr.err.Error()
			}
		case <-tick.C:
			launch(n)
			n++
		case <-pctx.Done():
			break wait
		}
	}
	tick.Stop()
	res.Launched = n
	stopProbes()
	wg.Wait()
	// Give the watcher a moment to report an election it saw just before
	// the grant.
	select {
	case d, ok := <-elected:
		if ok {
			res.Elected = d
		}
	case <-time.After(100 * time.Millisecond):
	}
	if !res.OK {
		return res, fmt.Errorf("no grant within %v of the kill (%d probes; first error: %s)", c.FailoverTimeout, res.Launched, res.FirstErr)
	}
	return res, nil
}
