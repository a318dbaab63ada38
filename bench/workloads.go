package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// OpsResult is one run of the uncontended workloads (1: acquire → release;
// 2: acquire → fenced write → release) for one system.
type OpsResult struct {
	System    string
	Round     int
	Clients   int
	Ops       int // completed cycles in the timed window
	Errors    int
	FirstErr  string
	Elapsed   time.Duration
	OpsPerSec float64
	P50       time.Duration // acquire latency
	P99       time.Duration
	P999      time.Duration
	CPUPer10k float64 // server CPU-seconds per 10,000 cycles
	// LeaderCPUPer10k: the leader's share of CPUPer10k (clusters);
	// ClientCPUPer10k: the runner process's (the clients').
	LeaderCPUPer10k float64
	ClientCPUPer10k float64
}

// runOps runs clients workers, each on its own lock (distinct from every
// other worker's), for dur after a short warm-up, and measures cycles/s,
// acquire latency and the server's CPU.
//
// profile, if set, is called as the timed window starts with the leader's
// pid, in a goroutine of its own.
func runOps(ctx context.Context, sys System, srv target, round, clients int, dur time.Duration, write bool, profile func(pid int, dur time.Duration)) (res OpsResult, err error) {
	res = OpsResult{System: sys.Name(), Round: round, Clients: clients}
	cl, err := sys.Open(ctx, srv.addr(), clients)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := closeBounded(cl); err != nil {
			res.Errors++
			if res.FirstErr == "" {
				res.FirstErr = err.Error()
			}
		}
	}()
	ws := make([]Worker, clients)
	for i := range ws {
		if ws[i], err = cl.Worker(ctx, i); err != nil {
			return res, err
		}
	}
	tag := "w1"
	if write {
		tag = "w2"
	}
	val := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	cycle := func(w Worker, name, key string) (time.Duration, error) {
		t := time.Now()
		h, err := w.Acquire(ctx, name, AcquireOpts{TTL: 10 * time.Second})
		lat := time.Since(t)
		if err != nil {
			return 0, err
		}
		if write {
			if err := h.Write(ctx, key, val); err != nil {
				_ = h.Release(ctx)
				return 0, err
			}
		}
		return lat, h.Release(ctx)
	}
	var (
		start   = make(chan struct{})
		stop    atomic.Bool
		ready   sync.WaitGroup
		done    sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		ops     int
		e       errs
		lastEnd time.Time
	)
	for i, w := range ws {
		name := fmt.Sprintf("%s/r%d/%s/c%d", tag, round, sys.Name(), i)
		key := fmt.Sprintf("%s/r%d/%s/k%d", tag, round, sys.Name(), i)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			for range 3 { // warm-up: connections, sessions, first allocations
				if _, err := cycle(w, name, key); err != nil {
					e.add(err)
				}
			}
			ready.Done()
			<-start
			var my []time.Duration
			for !stop.Load() {
				lat, err := cycle(w, name, key)
				if err != nil {
					e.add(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				my = append(my, lat)
			}
			end := time.Now()
			mu.Lock()
			lats = append(lats, my...)
			ops += len(my)
			if end.After(lastEnd) {
				lastEnd = end
			}
			mu.Unlock()
		}()
	}
	ready.Wait()
	cpu0, lcpu0, ccpu0 := srv.cpu(), srv.leaderCPU(), selfCPU()
	t0 := time.Now()
	close(start)
	if profile != nil {
		go profile(srv.leaderPid(), dur)
	}
	time.Sleep(dur)
	stop.Store(true)
	done.Wait()
	cpu1, lcpu1, ccpu1 := srv.cpu(), srv.leaderCPU(), selfCPU()
	res.Elapsed = lastEnd.Sub(t0)
	res.Ops = ops
	res.Errors, res.FirstErr = int(e.n.Load()), e.first
	if res.Elapsed > 0 {
		res.OpsPerSec = float64(ops) / res.Elapsed.Seconds()
	}
	if ops > 0 {
		res.CPUPer10k = (cpu1 - cpu0) / float64(ops) * 10000
		res.LeaderCPUPer10k = (lcpu1 - lcpu0) / float64(ops) * 10000
		res.ClientCPUPer10k = (ccpu1 - ccpu0) / float64(ops) * 10000
	}
	sortDurations(lats)
	res.P50, res.P99, res.P999 = percentile(lats, 0.5), percentile(lats, 0.99), percentile(lats, 0.999)
	return res, nil
}

// closeBounded closes cl, giving up after 10s: a Close that hangs is an
// error of the run, not a hung benchmark.
func closeBounded(cl Client) error {
	done := make(chan error, 1)
	go func() { done <- cl.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("client Close did not return within 10s")
	}
}

// HandoffResult is one run of workload 3: clients hand one lock around.
type HandoffResult struct {
	System       string
	Round        int
	Clients      int
	Grants       int
	GrantsPerSec float64
	MaxWait      time.Duration
	P50Wait      time.Duration
	Fairness     float64 // min / max grants per client
	PerClient    []int
	Errors       int
	FirstErr     string
	CPUPer10k    float64
}

// runHandoff: every worker loops acquire (waiting) → release on one lock
// for dur. Grants after dur are not counted; each worker finishes its
// pending acquire (the others stop, so it is granted) and releases.
func runHandoff(ctx context.Context, sys System, srv target, round, clients int, dur time.Duration) (res HandoffResult, err error) {
	res = HandoffResult{System: sys.Name(), Round: round, Clients: clients, PerClient: make([]int, clients)}
	cl, err := sys.Open(ctx, srv.addr(), clients)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := closeBounded(cl); err != nil {
			res.Errors++
			if res.FirstErr == "" {
				res.FirstErr = err.Error()
			}
		}
	}()
	ws := make([]Worker, clients)
	for i := range ws {
		if ws[i], err = cl.Worker(ctx, i); err != nil {
			return res, err
		}
	}
	name := "w3/r" + strconv.Itoa(round) + "/" + sys.Name() + "/hot"
	o := AcquireOpts{TTL: 10 * time.Second, Wait: time.Minute}
	// Warm-up: every worker once, in turn.
	for _, w := range ws {
		h, err := w.Acquire(ctx, name, o)
		if err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if err := h.Release(ctx); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	var (
		start = make(chan struct{})
		stop  atomic.Bool
		done  sync.WaitGroup
		mu    sync.Mutex
		waits []time.Duration
		e     errs
	)
	for i, w := range ws {
		done.Add(1)
		go func() {
			defer done.Done()
			<-start
			for !stop.Load() {
				t := time.Now()
				h, err := w.Acquire(ctx, name, o)
				wait := time.Since(t)
				if err != nil {
					e.add(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				counted := !stop.Load()
				if err := h.Release(ctx); err != nil {
					e.add(err)
				}
				if counted {
					mu.Lock()
					res.PerClient[i]++
					waits = append(waits, wait)
					mu.Unlock()
				}
			}
		}()
	}
	cpu0 := srv.cpu()
	t0 := time.Now()
	close(start)
	time.Sleep(dur)
	stop.Store(true)
	elapsed := time.Since(t0)
	cpu1 := srv.cpu() // before the stragglers' last cycles
	done.Wait()
	res.Errors, res.FirstErr = int(e.n.Load()), e.first
	mn, mx := -1, 0
	for _, g := range res.PerClient {
		res.Grants += g
		if mn < 0 || g < mn {
			mn = g
		}
		mx = max(mx, g)
	}
	if mx > 0 {
		res.Fairness = float64(mn) / float64(mx)
	}
	res.GrantsPerSec = float64(res.Grants) / elapsed.Seconds()
	if res.Grants > 0 {
		res.CPUPer10k = (cpu1 - cpu0) / float64(res.Grants) * 10000
	}
	sortDurations(waits)
	if len(waits) > 0 {
		res.MaxWait = waits[len(waits)-1]
		res.P50Wait = percentile(waits, 0.5)
	}
	return res, nil
}

// HeldResult is one run of workload 4: N leases held at once.
type HeldResult struct {
	System          string
	Round           int
	N               int
	Held            int
	Errors          int
	FirstErr        string
	Grant           time.Duration
	GrantsPerSec    float64
	ServerRSSBefore int64
	ServerRSS       int64 // with the N leases held
	ClientRSS       int64 // the holder process
	ClientPeak      int64
	CPUPer10k       float64
}

// StormResult is one run of workload 5: the expiry storm.
type StormResult struct {
	System     string
	Round      int
	N          int
	Held       int
	Granted    int
	Errors     int
	FirstErr   string
	Setup      time.Duration
	Overran    bool
	LastLag    time.Duration // TTL end → every waiter holds
	P50Lag     time.Duration
	P99Lag     time.Duration
	ServerPeak int64
	ClientPeak int64
}
