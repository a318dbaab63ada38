package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// Workloads 6 and 7 (issue 23, lock boundaries) against etcd's own
// recipes: 6, leader election hand-off (Fence client.Election against
// etcd's concurrency.Election); 7, an order's three SKUs taken at once
// (Fence: one AcquireSet; etcd: one transaction that creates the three
// keys if none exists). Only the systems with a BoundarySystem run them.

// BoundarySystem is a System that runs workloads 6 and 7: its Open
// returns a Client that is also a BoundaryClient.
type BoundarySystem interface {
	System
	Boundaries()
}

// BoundaryClient is the Client of a BoundarySystem.
type BoundaryClient interface {
	// Candidate returns candidate i (0 <= i < workers) of the election
	// named name.
	Candidate(ctx context.Context, i int, name string) (Candidate, error)
	// SetWorker returns the set acquirer of worker i.
	SetWorker(ctx context.Context, i int) (SetWorker, error)
}

// Candidate campaigns in one election.
type Candidate interface {
	// Campaign returns once this candidate leads, its value proclaimed.
	Campaign(ctx context.Context, value string) error
	Resign(ctx context.Context) error
}

// SetWorker takes sets of locks for one worker.
type SetWorker interface {
	// AcquireSet takes every name at once (never some of them) and returns
	// once it holds them: Fence queues the set (FIFO on every lock), etcd
	// retries its transaction every SetRetry–2×SetRetry. tries is the
	// number of transactions (etcd) or acquires (Fence) it took.
	AcquireSet(ctx context.Context, names []string) (release func(context.Context) error, tries int, err error)
}

// SetRetry is etcd's pause between two tries of a set's transaction.
var SetRetry = 2 * time.Millisecond

func (fenceUnary) Boundaries()   {}
func (fenceSession) Boundaries() {}
func (etcdSystem) Boundaries()   {}

// ---- Fence

func (f *fenceClient) Candidate(ctx context.Context, i int, name string) (Candidate, error) {
	return fenceCandidate{e: f.c.Election(name), opts: []client.AcquireOption{client.TTL(10 * time.Second), client.Owner(fmt.Sprint("c", i))}}, nil
}

func (f *fenceClient) SetWorker(ctx context.Context, i int) (SetWorker, error) {
	return fenceSetWorker{c: f.c, opts: []client.AcquireOption{client.TTL(10 * time.Second)}}, nil
}

func (f *fenceSessionClient) Candidate(ctx context.Context, i int, name string) (Candidate, error) {
	w, err := f.Worker(ctx, i)
	if err != nil {
		return nil, err
	}
	c := w.(*fenceSessionWorker).c
	return fenceCandidate{e: c.Election(name), opts: []client.AcquireOption{client.Owner(fmt.Sprint("c", i))}}, nil
}

func (f *fenceSessionClient) SetWorker(ctx context.Context, i int) (SetWorker, error) {
	w, err := f.Worker(ctx, i)
	if err != nil {
		return nil, err
	}
	return fenceSetWorker{c: w.(*fenceSessionWorker).c}, nil
}

// fenceCandidate is client.Election: Campaign = a waiting Acquire of the
// election's lock, then the proclaim (a fenced write of the value with the
// new token); Resign = the Release.
type fenceCandidate struct {
	e    *client.Election
	opts []client.AcquireOption
}

func (c fenceCandidate) Campaign(ctx context.Context, value string) error {
	_, err := c.e.Campaign(ctx, []byte(value), c.opts...)
	return err
}

func (c fenceCandidate) Resign(ctx context.Context) error { return c.e.Resign(ctx) }

type fenceSetWorker struct {
	c    *client.Client
	opts []client.AcquireOption
}

// AcquireSet is one AcquireSet of the names with a wait: the set is queued
// on every lock and granted whole.
func (w fenceSetWorker) AcquireSet(ctx context.Context, names []string) (func(context.Context) error, int, error) {
	specs := make([]fence.LockSpec, len(names))
	for i, n := range names {
		specs[i] = fence.LockSpec{Name: n}
	}
	opts := append([]client.AcquireOption{client.Owner("bench"), client.Wait(time.Minute)}, w.opts...)
	l, err := w.c.AcquireSet(ctx, specs, opts...)
	if err != nil {
		return nil, 1, err
	}
	return l.Release, 1, nil
}

// ---- etcd

// Candidate is a concurrency.Election on the worker's own session (a
// candidate's key is its session's lease id: two candidates of one
// election need two sessions).
func (e *etcdClient) Candidate(ctx context.Context, i int, name string) (Candidate, error) {
	w, err := e.Worker(ctx, i)
	if err != nil {
		return nil, err
	}
	return etcdCandidate{concurrency.NewElection(w.(*etcdWorker).s, "/election/"+name)}, nil
}

func (e *etcdClient) SetWorker(ctx context.Context, i int) (SetWorker, error) {
	w, err := e.Worker(ctx, i)
	if err != nil {
		return nil, err
	}
	return etcdSetWorker{cli: e.cli, s: w.(*etcdWorker).s, rng: rand.New(rand.NewPCG(uint64(i), 7))}, nil
}

type etcdCandidate struct{ e *concurrency.Election }

func (c etcdCandidate) Campaign(ctx context.Context, value string) error {
	return c.e.Campaign(ctx, value)
}

func (c etcdCandidate) Resign(ctx context.Context) error { return c.e.Resign(ctx) }

type etcdSetWorker struct {
	cli *clientv3.Client
	s   *concurrency.Session
	rng *rand.Rand
}

// AcquireSet is one transaction: if none of the keys exists
// (CreateRevision == 0 on each), put them all with the session's lease;
// else try again after SetRetry–2×SetRetry (etcd has no queue for a set
// of keys). The release deletes the three in one transaction.
func (w etcdSetWorker) AcquireSet(ctx context.Context, names []string) (func(context.Context) error, int, error) {
	cmps := make([]clientv3.Cmp, len(names))
	puts := make([]clientv3.Op, len(names))
	dels := make([]clientv3.Op, len(names))
	for i, n := range names {
		k := "/sku/" + n
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		puts[i] = clientv3.OpPut(k, "bench", clientv3.WithLease(w.s.Lease()))
		dels[i] = clientv3.OpDelete(k)
	}
	for tries := 1; ; tries++ {
		resp, err := w.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			return nil, tries, err
		}
		if resp.Succeeded {
			return func(ctx context.Context) error {
				_, err := w.cli.Txn(ctx).Then(dels...).Commit()
				return err
			}, tries, nil
		}
		t := time.NewTimer(SetRetry + time.Duration(w.rng.Int64N(int64(SetRetry))))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, tries, ctx.Err()
		}
	}
}

// ---- the workloads

// ElectionResult is one run of workload 6: candidates campaign, and each
// leader resigns at once.
type ElectionResult struct {
	System     string
	Round      int
	Candidates int
	Elections  int // leaders in the timed window
	PerSec     float64
	// P50, P99: a hand-off, from the leader's Resign call to the next
	// leader's Campaign returning.
	P50, P99  time.Duration
	Errors    int
	FirstErr  string
	CPUPer10k float64
}

// runElection: every candidate loops Campaign → Resign on one election
// for dur; the hand-off is timed from the start of a leader's Resign to the
// return of the next leader's Campaign (one leader at a time: the next one
// is granted only after the resign). Leaders after dur are not counted; each
// candidate wins once more at most (the others stop) and resigns.
func runElection(ctx context.Context, sys System, srv target, round, candidates int, dur time.Duration) (res ElectionResult, err error) {
	res = ElectionResult{System: sys.Name(), Round: round, Candidates: candidates}
	cl, err := sys.Open(ctx, srv.addr(), candidates)
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
	bc, ok := cl.(BoundaryClient)
	if !ok {
		return res, fmt.Errorf("%s cannot run workload 6", sys.Name())
	}
	name := fmt.Sprintf("w6/r%d/%s/n%d", round, sys.Name(), candidates)
	cs := make([]Candidate, candidates)
	for i := range cs {
		if cs[i], err = bc.Candidate(ctx, i, name); err != nil {
			return res, err
		}
	}
	for i, c := range cs { // warm-up: every candidate once, in turn
		if err := c.Campaign(ctx, fmt.Sprint("leader-", i)); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if err := c.Resign(ctx); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	var (
		start      = make(chan struct{})
		stop       atomic.Bool
		lastResign atomic.Int64 // unix ns of the last leader's Resign call
		done       sync.WaitGroup
		mu         sync.Mutex
		handoffs   []time.Duration
		e          errs
	)
	for i, c := range cs {
		done.Add(1)
		go func() {
			defer done.Done()
			<-start
			for !stop.Load() {
				if err := c.Campaign(ctx, fmt.Sprint("leader-", i)); err != nil {
					e.add(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				now := time.Now()
				if !stop.Load() {
					mu.Lock()
					res.Elections++
					if t := lastResign.Load(); t != 0 {
						handoffs = append(handoffs, now.Sub(time.Unix(0, t)))
					}
					mu.Unlock()
				}
				lastResign.Store(time.Now().UnixNano())
				if err := c.Resign(ctx); err != nil {
					e.add(err)
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
	cpu1 := srv.cpu()
	done.Wait()
	res.Errors, res.FirstErr = int(e.n.Load()), e.first
	res.PerSec = float64(res.Elections) / elapsed.Seconds()
	if res.Elections > 0 {
		res.CPUPer10k = (cpu1 - cpu0) / float64(res.Elections) * 10000
	}
	sortDurations(handoffs)
	res.P50, res.P99 = percentile(handoffs, 0.5), percentile(handoffs, 0.99)
	return res, nil
}

// OrderResult is one run of workload 7: orders of 3 SKUs out of a
// catalog, each taken as one set.
type OrderResult struct {
	System  string
	Round   int
	Clients int
	Orders  int
	PerSec  float64
	// P50, P99: an order's acquire, from the first try to holding all 3.
	P50, P99 time.Duration
	// TriesPerOrder: transactions per order (etcd); 1 for Fence's one
	// waiting AcquireSet.
	TriesPerOrder float64
	Errors        int
	FirstErr      string
	CPUPer10k     float64
}

// runOrders: every client loops acquire 3 distinct SKUs of skus (chosen at
// random; clients overlap) as one set → release, for dur.
func runOrders(ctx context.Context, sys System, srv target, round, clients, skus int, dur time.Duration) (res OrderResult, err error) {
	res = OrderResult{System: sys.Name(), Round: round, Clients: clients}
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
	bc, ok := cl.(BoundaryClient)
	if !ok {
		return res, fmt.Errorf("%s cannot run workload 7", sys.Name())
	}
	ws := make([]SetWorker, clients)
	for i := range ws {
		if ws[i], err = bc.SetWorker(ctx, i); err != nil {
			return res, err
		}
	}
	prefix := fmt.Sprintf("w7/r%d/%s/c%d/sku", round, sys.Name(), clients)
	var (
		start   = make(chan struct{})
		stop    atomic.Bool
		ready   sync.WaitGroup
		done    sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		tries   int
		e       errs
		lastEnd time.Time
	)
	for i, w := range ws {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			rng := rand.New(rand.NewPCG(uint64(round), uint64(i)))
			order := func() (time.Duration, int, error) {
				p := rng.Perm(skus)[:3]
				names := []string{fmt.Sprintf("%s%03d", prefix, p[0]), fmt.Sprintf("%s%03d", prefix, p[1]), fmt.Sprintf("%s%03d", prefix, p[2])}
				t := time.Now()
				release, n, err := w.AcquireSet(ctx, names)
				lat := time.Since(t)
				if err != nil {
					return 0, n, err
				}
				return lat, n, release(ctx)
			}
			for range 3 { // warm-up
				if _, _, err := order(); err != nil {
					e.add(err)
				}
			}
			ready.Done()
			<-start
			var my []time.Duration
			myTries := 0
			for !stop.Load() {
				lat, n, err := order()
				if err != nil {
					e.add(err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				my, myTries = append(my, lat), myTries+n
			}
			end := time.Now()
			mu.Lock()
			lats, tries = append(lats, my...), tries+myTries
			if end.After(lastEnd) {
				lastEnd = end
			}
			mu.Unlock()
		}()
	}
	ready.Wait()
	cpu0 := srv.cpu()
	t0 := time.Now()
	close(start)
	time.Sleep(dur)
	stop.Store(true)
	done.Wait()
	cpu1 := srv.cpu()
	elapsed := lastEnd.Sub(t0) // every order begun in the window, counted to its end
	res.Errors, res.FirstErr = int(e.n.Load()), e.first
	res.Orders = len(lats)
	res.PerSec = float64(res.Orders) / elapsed.Seconds()
	if res.Orders > 0 {
		res.CPUPer10k = (cpu1 - cpu0) / float64(res.Orders) * 10000
		res.TriesPerOrder = float64(tries) / float64(res.Orders)
	}
	sortDurations(lats)
	res.P50, res.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	return res, nil
}

// runBoundaries runs workloads 6 and 7 for the systems that have them, on
// servers (or clusters) of their own, every system once per round.
func (cfg *Config) runBoundaries(ctx context.Context, systems []System, rep *Report, checkLeader func(string, target), fail func(string, error)) error {
	var bs []System
	for _, s := range systems {
		if _, ok := s.(BoundarySystem); ok {
			bs = append(bs, s)
		}
	}
	ss := servers{}
	defer ss.stop()
	for _, s := range bs {
		if ss[s.Server()] != nil {
			continue
		}
		srv, err := cfg.startTarget(s.Server())
		if err != nil {
			return err
		}
		ss[s.Server()] = srv
		cfg.logf("started %s on %s", s.Server(), srv.addr())
	}
	if cfg.has("6") {
		for _, n := range cfg.W6Candidates {
			for r := 1; r <= cfg.Rounds; r++ {
				for _, s := range bs {
					if err := ctx.Err(); err != nil {
						return err
					}
					what := fmt.Sprintf("w6 %s candidates=%d round %d", s.Name(), n, r)
					res, err := runElection(ctx, s, ss[s.Server()], r, n, cfg.W6Duration)
					checkLeader(what, ss[s.Server()])
					if err != nil {
						fail(what, err)
						continue
					}
					cfg.logf("w6 candidates=%d round %d %-14s %8.0f elections/s hand-off p50 %v p99 %v errors %d %s", n, r, s.Name(), res.PerSec, res.P50, res.P99, res.Errors, res.FirstErr)
					rep.W6 = append(rep.W6, res)
				}
			}
		}
	}
	if cfg.has("7") {
		for _, n := range cfg.W7Clients {
			for r := 1; r <= cfg.Rounds; r++ {
				for _, s := range bs {
					if err := ctx.Err(); err != nil {
						return err
					}
					what := fmt.Sprintf("w7 %s clients=%d round %d", s.Name(), n, r)
					res, err := runOrders(ctx, s, ss[s.Server()], r, n, cfg.W7SKUs, cfg.W7Duration)
					checkLeader(what, ss[s.Server()])
					if err != nil {
						fail(what, err)
						continue
					}
					cfg.logf("w7 clients=%d round %d %-14s %8.0f orders/s p50 %v p99 %v tries/order %.2f errors %d %s", n, r, s.Name(), res.PerSec, res.P50, res.P99, res.TriesPerOrder, res.Errors, res.FirstErr)
					rep.W7 = append(rep.W7, res)
				}
			}
		}
	}
	return nil
}
