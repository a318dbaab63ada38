package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// The lock-boundary workloads (issue 23, docs/lock-boundaries.md): a
// worker process runs one of them (WorkerConfig.Workload), recording the
// same Ops as the story's worker, with the set, mode and permits of each
// acquire and release (Op.Set, Op.Mode, Op.Permits), what a set's lease
// lists (Op.Granted), and looks at a lock's holders (KindHolders), for the
// checkers of exclusion by mode, permits and sets (check.go).
const (
	// WorkloadStory (the default, ""): the paused-worker story, one
	// exclusive lock sku-k per iteration.
	WorkloadStory = "story"
	// WorkloadSKU: the catalog pattern's SKU worker: holds CatalogLock
	// shared and sku-k exclusive as one set (listed in a random order),
	// and reads, writes and adds sku-k's resource with the set's token
	// (its proof for sku-k), as the story's worker does.
	WorkloadSKU = "sku"
	// WorkloadImport: the catalog pattern's full import: holds CatalogLock
	// exclusive and reads and writes every SKU resource of the built-in
	// store with its token. (Not PostgreSQL: its guard verifies a signed
	// token's proof for the resource's own name, and the import's proof is
	// for the catalog.)
	WorkloadImport = "import"
	// WorkloadSet: random overlapping sets of 2–4 of the setLocks locks
	// set-0..set-7, listed in random orders, mostly waiting; looks at the
	// holders of each lock of the set while held, and of one after its
	// release.
	WorkloadSet = "set"
	// WorkloadPermits: one of WorkerConfig.Permits permits of PermitLock,
	// mostly waiting; looks at its holders while held.
	WorkloadPermits = "permits"

	// CatalogLock is the catalog pattern's catalog lock; PermitLock the
	// permits workload's semaphore.
	CatalogLock = "catalog"
	PermitLock  = "permit-0"

	setLocks       = 8
	defaultPermits = 2
)

// BoundaryMix is the workloads Config.Boundaries adds, one worker each:
// the catalog pattern (two SKU workers and an import), two set workers and
// three permit workers (more than the default 2 permits).
var BoundaryMix = []string{WorkloadSKU, WorkloadSKU, WorkloadImport, WorkloadSet, WorkloadSet, WorkloadPermits, WorkloadPermits, WorkloadPermits}

func validWorkload(wl string, permits uint32) error {
	switch wl {
	case "", WorkloadStory:
		return nil
	case WorkloadSKU, WorkloadImport, WorkloadSet, WorkloadPermits:
	default:
		return fmt.Errorf("chaos worker: unknown workload %q (want %s, %s, %s, %s, %s)", wl, WorkloadStory, WorkloadSKU, WorkloadImport, WorkloadSet, WorkloadPermits)
	}
	if permits > fence.MaxPermits {
		return fmt.Errorf("chaos worker: permits %d: at most %d", permits, fence.MaxPermits)
	}
	return nil
}

// setWant is a set of locks, as the request lists them.
func setWant(listed []LockRef) want {
	set := slices.Clone(listed)
	slices.SortFunc(set, func(a, b LockRef) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return want{name: set[0].Name, set: set, listed: listed}
}

// leaseChoice picks the lease kind and the wait of one acquire, as the
// story's iteration does.
func (w *wrk) leaseChoice() (session bool, wait time.Duration) {
	session = w.rng.IntN(2) == 0
	switch w.cfg.Mode {
	case "session":
		session = true
	case "standalone":
		session = false
	}
	if w.rng.IntN(5) != 0 {
		wait = 2 * max(w.cfg.TTL, w.cfg.SessionTTL)
	}
	return session, wait
}

// skuIteration: the catalog shared and sku-k exclusive as one set, then
// the story's read, pause, write, add on sku-k with the set's proof for it.
func (w *wrk) skuIteration(ctx context.Context) error {
	k := w.rng.IntN(w.cfg.Resources)
	listed := []LockRef{{Name: CatalogLock, Mode: ModeShared}, {Name: lockName(k)}}
	if w.rng.IntN(2) == 0 {
		listed[0], listed[1] = listed[1], listed[0]
	}
	session, wait := w.leaseChoice()
	h, err := w.acquire(ctx, setWant(listed), k, session, wait)
	if err != nil || h == nil {
		return err
	}
	err = w.hold(ctx, h)
	if rerr := w.release(h); err == nil {
		err = rerr
	}
	return err
}

// importIteration: the catalog exclusive, then every SKU resource of the
// built-in store read and written (and sometimes restocked) with its token.
func (w *wrk) importIteration(ctx context.Context) error {
	session, wait := w.leaseChoice()
	h, err := w.acquire(ctx, oneLock(CatalogLock), -1, session, wait)
	if err != nil || h == nil {
		return err
	}
	var fs store // without the built-in store, the import only holds the catalog
	for _, s := range w.stores {
		if s.Name() == StoreFence {
			fs = s
		}
	}
	for k := 0; fs != nil && k < w.cfg.Resources && err == nil && ctx.Err() == nil; k++ {
		err = w.holdOn(ctx, h, fs, k)
	}
	if rerr := w.release(h); err == nil {
		err = rerr
	}
	return err
}

// setIteration: a random set of 2–4 locks in a random order; a look at
// each lock's holders while held, a short hold, the release, and a look at
// one of its locks after it.
func (w *wrk) setIteration(ctx context.Context) error {
	n := 2 + w.rng.IntN(3)
	var listed []LockRef
	for _, i := range w.rng.Perm(setLocks)[:n] {
		listed = append(listed, LockRef{Name: fmt.Sprintf("set-%d", i)})
	}
	if w.rng.IntN(4) == 0 {
		listed[0].Mode = ModeShared // shared beside exclusive, in one set
	}
	session, wait := w.leaseChoice()
	h, err := w.acquire(ctx, setWant(listed), -1, session, wait)
	if err != nil || h == nil {
		return err
	}
	for _, r := range listed {
		if err := w.look(ctx, h.cl, r.Name); err != nil {
			w.release(h)
			return err
		}
	}
	sleepCtx(ctx, time.Duration(w.rng.Int64N(int64(w.cfg.TTL)/2+1)))
	if err := w.release(h); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	return w.look(ctx, h.cl, listed[w.rng.IntN(len(listed))].Name)
}

// permitsIteration: one of the lock's permits, a look at its holders, a
// short hold, the release.
func (w *wrk) permitsIteration(ctx context.Context) error {
	session, wait := w.leaseChoice()
	h, err := w.acquire(ctx, want{name: PermitLock, permits: w.cfg.Permits}, -1, session, wait)
	if err != nil || h == nil {
		return err
	}
	err = w.look(ctx, h.cl, PermitLock)
	if err == nil {
		sleepCtx(ctx, time.Duration(w.rng.Int64N(int64(w.cfg.TTL)+1)))
	}
	if rerr := w.release(h); err == nil {
		err = rerr
	}
	return err
}

// look records the holders of lock name as the server lists them
// (client.Get): KindHolders. It returns only recorder errors.
func (w *wrk) look(ctx context.Context, cl *client.Client, name string) error {
	if ctx.Err() != nil {
		return nil
	}
	op := Op{Kind: KindHolders, Lock: name, Call: nowNano(), Attempts: 1}
	gctx, cancel := context.WithTimeout(ctx, workerOpTimeout)
	li, err := cl.Get(gctx, name)
	cancel()
	op.Out, op.Err = classifyRead(err), errString(err)
	if err == nil {
		op.Permits = li.Permits
		hs := li.Holders
		if len(hs) == 0 && li.Lease != nil {
			hs = []fence.Lease{*li.Lease}
		}
		for _, l := range hs {
			op.Holders = append(op.Holders, holderRef(l, name))
		}
	}
	return w.record(op)
}

// holderRef is how lease l holds lock name: a set's lease says it in its
// Locks (its Mode is not the mode of any one lock), any other in Mode.
func holderRef(l fence.Lease, name string) LockRef {
	r := LockRef{Token: uint64(l.Token)}
	mode := l.Mode
	for _, s := range l.Locks {
		if s.Name == name {
			mode = s.Mode
		}
	}
	if mode == fence.Shared {
		r.Mode = ModeShared
	}
	return r
}

// acquireWant acquires what wt asks for: one lock (with its mode and
// permits) or a set, listed in wt.listed's order.
func acquireWant(ctx context.Context, cl *client.Client, wt want, opts []client.AcquireOption) (*client.Lease, error) {
	if len(wt.set) > 0 {
		specs := make([]fence.LockSpec, len(wt.listed))
		for i, r := range wt.listed {
			specs[i] = fence.LockSpec{Name: r.Name, Permits: r.Permits}
			if r.Mode == ModeShared {
				specs[i].Mode = fence.Shared
			}
		}
		return cl.AcquireSet(ctx, specs, opts...)
	}
	if wt.mode == ModeShared {
		opts = append(opts, client.Shared())
	}
	if wt.permits > 0 {
		opts = append(opts, client.Permits(wt.permits))
	}
	return cl.Acquire(ctx, wt.name, opts...)
}

// grantedLocks is what a set's lease lists: its locks, each with the token
// of its proof for it.
func grantedLocks(l *client.Lease) []LockRef {
	var out []LockRef
	for _, s := range l.Locks() {
		r := LockRef{Name: s.Name, Permits: s.Permits, Proof: uint64(l.ProofFor(s.Name).Token)}
		if s.Mode == fence.Shared {
			r.Mode = ModeShared
		}
		out = append(out, r)
	}
	return out
}

// leaseProofFor is the lease's proof for lock name.
func leaseProofFor(l *client.Lease, name string) fence.SignedToken { return l.ProofFor(name) }
