package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func spec(name string) fence.LockSpec       { return fence.LockSpec{Name: name} }
func sharedSpec(name string) fence.LockSpec { return fence.LockSpec{Name: name, Mode: fence.Shared} }

// setAcq is an acquire of the set locks (a wait and request_id when wait > 0).
func setAcq(now int64, owner string, ttl, wait time.Duration, rid string, locks ...fence.LockSpec) Command {
	return Command{Op: OpAcquire, Now: now, Owner: owner, TTL: ttl, Wait: wait, RequestID: rid, Locks: locks}
}

func sharedAcq(now int64, name, owner string, ttl, wait time.Duration, rid string) Command {
	return Command{Op: OpAcquire, Now: now, Name: name, Mode: fence.Shared, Owner: owner, TTL: ttl, Wait: wait, RequestID: rid}
}

func permitAcq(now int64, name, owner string, permits uint32, ttl, wait time.Duration, rid string) Command {
	return Command{Op: OpAcquire, Now: now, Name: name, Permits: permits, Owner: owner, TTL: ttl, Wait: wait, RequestID: rid}
}

// holdersOf renders the tokens holding name, in grant order.
func holdersOf(m *Machine, name string) []fence.Token {
	var out []fence.Token
	for _, h := range m.Lock(name, m.Now()).Holders {
		out = append(out, h.Token)
	}
	return out
}

func wantHolders(t *testing.T, m *Machine, name string, want ...fence.Token) {
	t.Helper()
	if got := holdersOf(m, name); !slices.Equal(got, want) {
		t.Fatalf("lock %s held by %v, want %v", name, got, want)
	}
}

// A set is granted whole (one token on every lock, listed sorted whatever
// the request's order) or not at all: with one lock held, the others stay
// free.
func TestSetGrantedWholeOrNotAtAll(t *testing.T) {
	m := New()
	l := mustGrant(t, m, setAcq(0, "A", time.Second, 0, "", spec("sku/3"), spec("sku/1"), spec("sku/2")), 1)
	if l.Name != "sku/1" || len(l.Locks) != 3 || l.Locks[0].Name != "sku/1" || l.Locks[2].Name != "sku/3" {
		t.Fatalf("set lease %+v: want named sku/1 with its three locks sorted", l)
	}
	for _, n := range []string{"sku/1", "sku/2", "sku/3"} {
		wantHolders(t, m, n, 1)
	}
	// A second set overlapping on sku/2 is busy, naming it, and takes nothing.
	r := m.Apply(setAcq(0, "B", time.Second, 0, "", spec("sku/4"), spec("sku/2")))
	if b := errAs[*fence.BusyError](t, r.Err); b.Name != "sku/2" || b.Token != 1 {
		t.Fatalf("busy %+v, want sku/2 held by token 1", b)
	}
	if info := m.Lock("sku/4", m.Now()); !info.Free {
		t.Fatalf("sku/4 taken by a set refused busy: %+v", info)
	}
	// Released by any of its names, the set frees every lock.
	mustOK(t, m, rel(0, "sku/3", 1))
	for _, n := range []string{"sku/1", "sku/2", "sku/3"} {
		if info := m.Lock(n, m.Now()); !info.Free {
			t.Fatalf("%s not free after the set's release: %+v", n, info)
		}
	}
	// Renewed by any name, every lock's lease moves: the set outlives its
	// first TTL on each of them.
	mustGrant(t, m, setAcq(at(1), "C", time.Second, 0, "", spec("x"), spec("y")), 2)
	mustOK(t, m, renew(at(1.8), "y", 2, time.Second))
	mustOK(t, m, tick(at(2.5)))
	wantHolders(t, m, "x", 2)
	mustOK(t, m, tick(at(2.9)))
	wantHolders(t, m, "x")
	wantHolders(t, m, "y")
}

// Waiting sets keep their place on every lock: two sets naming the same
// locks in opposite orders never deadlock, and a single-lock acquirer that
// comes later does not pass a waiting set on a lock the set waits for.
func TestWaitingSetsKeepTheirPlaceAndNeverDeadlock(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "H", time.Second), 1)
	// S1 waits for {a, b}; S2 for {b, a}: both queue on both.
	if r := mustOK(t, m, setAcq(at(0.1), "S1", time.Second, time.Minute, "s1", spec("a"), spec("b"))); !r.Queued {
		t.Fatalf("S1 not queued: %s", describe(r))
	}
	if r := mustOK(t, m, setAcq(at(0.2), "S2", time.Second, time.Minute, "s2", spec("b"), spec("a"))); !r.Queued {
		t.Fatalf("S2 not queued: %s", describe(r))
	}
	// b is free but S1 holds the head of its queue: a newcomer waits.
	if r := mustOK(t, m, waitAcq(at(0.3), "b", "N", time.Second, time.Minute, "n")); !r.Queued {
		t.Fatalf("a newcomer passed waiting sets on b: %s", describe(r))
	}
	// H releases a: S1 gets both, then (on its release) S2, then N.
	r := mustOK(t, m, rel(at(0.4), "a", 1))
	if len(r.Events) != 1 || r.Events[0].RequestID != "s1" || r.Events[0].Lease.Token != 2 || len(r.Events[0].Lease.Locks) != 2 {
		t.Fatalf("release of a: %s, want s1 granted both with token 2", describe(r))
	}
	r = mustOK(t, m, rel(at(0.5), "b", 2))
	if len(r.Events) != 1 || r.Events[0].RequestID != "s2" || r.Events[0].Lease.Token != 3 {
		t.Fatalf("release of s1: %s, want s2 granted", describe(r))
	}
	r = mustOK(t, m, rel(at(0.6), "a", 3))
	if len(r.Events) != 1 || r.Events[0].RequestID != "n" || r.Events[0].Lease.Token != 4 {
		t.Fatalf("release of s2: %s, want n granted", describe(r))
	}
}

// Many shared holders or one exclusive; a queued exclusive request blocks
// later shared ones (no writer starvation); every grant takes a new token.
func TestSharedAndExclusive(t *testing.T) {
	m := New()
	mustGrant(t, m, sharedAcq(0, "catalog", "r1", time.Second, 0, ""), 1)
	mustGrant(t, m, sharedAcq(0, "catalog", "r2", time.Second, 0, ""), 2)
	wantHolders(t, m, "catalog", 1, 2)
	if r := m.Apply(acq(0, "catalog", "w", time.Second)); r.Err == nil {
		t.Fatalf("exclusive granted beside shared holders: %s", describe(r))
	}
	if r := mustOK(t, m, waitAcq(0, "catalog", "w", time.Second, time.Minute, "w")); !r.Queued {
		t.Fatalf("exclusive not queued: %s", describe(r))
	}
	// A later shared request waits behind the queued writer.
	if r := mustOK(t, m, sharedAcq(0, "catalog", "r3", time.Second, time.Minute, "r3")); !r.Queued {
		t.Fatalf("a shared request passed a queued writer: %s", describe(r))
	}
	mustOK(t, m, rel(at(0.1), "catalog", 1))
	wantHolders(t, m, "catalog", 2)
	r := mustOK(t, m, rel(at(0.2), "catalog", 2))
	if len(r.Events) != 1 || r.Events[0].RequestID != "w" || r.Events[0].Lease.Token != 3 {
		t.Fatalf("last reader left: %s, want the writer granted token 3", describe(r))
	}
	if r := m.Apply(sharedAcq(at(0.2), "catalog", "r4", time.Second, 0, "")); r.Err == nil {
		t.Fatalf("shared granted beside an exclusive holder: %s", describe(r))
	}
	r = mustOK(t, m, rel(at(0.3), "catalog", 3))
	if len(r.Events) != 1 || r.Events[0].RequestID != "r3" || r.Events[0].Lease.Token != 4 || r.Events[0].Lease.Mode != fence.Shared {
		t.Fatalf("writer left: %s, want r3 granted shared with token 4", describe(r))
	}
}

// Permits: at most N holders, each with its own lease and token; a
// request naming another N is refused naming both; FIFO waiting; the
// count is free again once nobody holds or waits.
func TestPermits(t *testing.T) {
	m := New()
	mustGrant(t, m, permitAcq(0, "exchange", "w1", 2, time.Second, 0, ""), 1)
	mustGrant(t, m, permitAcq(0, "exchange", "w2", 2, time.Second, 0, ""), 2)
	if r := m.Apply(permitAcq(0, "exchange", "w3", 2, time.Second, 0, "")); !errorsIsBusy(r.Err) {
		t.Fatalf("a third permit of two: %s", describe(r))
	}
	r := m.Apply(permitAcq(0, "exchange", "w3", 3, time.Second, 0, ""))
	if e := errAs[*fence.PermitsMismatchError](t, r.Err); e.Name != "exchange" || e.Permits != 3 || e.Current != 2 {
		t.Fatalf("mismatch %+v, want exchange 3 vs 2", e)
	}
	if r := m.Apply(acq(0, "exchange", "plain", time.Second)); errAs[*fence.PermitsMismatchError](t, r.Err).Current != 2 {
		t.Fatalf("a plain acquire of a semaphore: %s", describe(r))
	}
	mustOK(t, m, permitAcq(0, "exchange", "w3", 2, time.Second, time.Minute, "w3"))
	mustOK(t, m, permitAcq(0, "exchange", "w4", 2, time.Second, time.Minute, "w4"))
	r = mustOK(t, m, rel(at(0.1), "exchange", 2))
	if len(r.Events) != 1 || r.Events[0].RequestID != "w3" || r.Events[0].Lease.Token != 3 || r.Events[0].Lease.Permits != 2 {
		t.Fatalf("a permit freed: %s, want w3 granted token 3", describe(r))
	}
	wantHolders(t, m, "exchange", 1, 3)
	// Everything ends (w4 is granted when w1 expires, then expires too):
	// the lock forgets its count.
	mustOK(t, m, tick(at(5)))
	wantHolders(t, m, "exchange", 4)
	mustOK(t, m, tick(at(7)))
	mustGrant(t, m, permitAcq(at(7), "exchange", "w5", 5, time.Second, 0, ""), 5)
}

func errorsIsBusy(err error) bool { _, ok := err.(*fence.BusyError); return ok }

// A set's lease that expires ends on every lock, each starting its
// lock-delay; a session-bound set ends with its session; a cancelled set
// waiter leaves every queue.
func TestSetEndsTogether(t *testing.T) {
	m := New()
	c := setAcq(0, "A", time.Second, 0, "", spec("a"), sharedSpec("b"))
	c.LockDelay = 500 * time.Millisecond
	mustGrant(t, m, c, 1)
	mustOK(t, m, tick(at(1)))
	for _, n := range []string{"a", "b"} {
		if info := m.Lock(n, m.Now()); info.Lease != nil || info.LockDelayRemaining != 500*time.Millisecond {
			t.Fatalf("%s after the set expired: %+v, want free in a 500ms lock-delay", n, info)
		}
	}
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: at(2), TTL: time.Second}).Session.ID
	g := mustGrant(t, m, Command{Op: OpAcquire, Now: at(2), Owner: "S", Session: s, Locks: []fence.LockSpec{spec("a"), spec("c")}}, 2)
	if g.Name != "a" {
		t.Fatalf("lease %+v", g)
	}
	mustOK(t, m, setAcq(at(2), "W", time.Second, time.Minute, "w", spec("c"), spec("d")))
	if info := m.Lock("d", m.Now()); info.Waiters != 1 {
		t.Fatalf("d: %+v, want the set waiter queued", info)
	}
	mustOK(t, m, Command{Op: OpCancelWait, Now: at(2.1), Name: "d", RequestID: "w"})
	if info := m.Lock("c", m.Now()); info.Waiters != 0 {
		t.Fatalf("c after the set's cancel on d: %+v, want its queue empty", info)
	}
	mustOK(t, m, Command{Op: OpSessionClose, Now: at(2.2), Session: s})
	for _, n := range []string{"a", "c"} {
		if info := m.Lock(n, m.Now()); !info.Free {
			t.Fatalf("%s after the session closed: %+v", n, info)
		}
	}
}

// A retried set acquire (same request_id) is answered with its first
// outcome; the same id with another set is OP_CONFLICT.
func TestSetRetry(t *testing.T) {
	m := New()
	first := mustGrant(t, m, setAcq(0, "A", time.Second, 0, "r", spec("a"), spec("b")), 1)
	again := mustOK(t, m, setAcq(0, "A", time.Second, 0, "r", spec("b"), spec("a")))
	if !again.Replayed || again.Lease.Token != first.Token || len(again.Lease.Locks) != 2 {
		t.Fatalf("retry in another order: %s", describe(again))
	}
	if r := m.Apply(setAcq(0, "A", time.Second, 0, "r", spec("a"), sharedSpec("b"))); errAs[*fence.OpConflictError](t, r.Err).ID != "r" {
		t.Fatalf("same id, other modes: %s", describe(r))
	}
}

// A state with sets, shared holders, permits and set waiters survives a
// snapshot byte for byte (R1), and the restored machine decides the next
// commands as the original does.
func TestBoundariesSnapshotRoundTrip(t *testing.T) {
	m := New()
	s := mustOK(t, m, Command{Op: OpSessionOpen, Now: 0, TTL: time.Minute}).Session.ID
	steps := []Command{
		setAcq(0, "A", time.Second, 0, "ra", spec("a"), sharedSpec("cat")),
		sharedAcq(0, "cat", "B", time.Second, 0, "rb"),
		{Op: OpAcquire, Now: 0, Owner: "S", Session: s, Seq: 1, Locks: []fence.LockSpec{sharedSpec("cat"), spec("s1")}},
		setAcq(0, "W", time.Second, time.Minute, "rw", spec("a"), spec("z")),
		waitAcq(0, "cat", "X", time.Second, time.Minute, "rx"),
		permitAcq(0, "p", "P1", 2, time.Second, 0, "rp1"),
		permitAcq(0, "p", "P2", 2, time.Second, 0, ""),
		permitAcq(0, "p", "P3", 2, time.Second, time.Minute, "rp3"),
	}
	for _, c := range steps {
		mustOK(t, m, c)
	}
	b := snapBytes(t, m)
	n := New()
	if err := n.Restore(bytes.NewReader(b)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if again := snapBytes(t, n); !bytes.Equal(again, b) {
		t.Fatal("snapshot of the restored machine differs")
	}
	for _, c := range []Command{rel(at(0.1), "a", 1), rel(at(0.2), "cat", 2), tick(at(1.5)), rel(at(1.6), "s1", 3)} {
		if x, y := describe(m.Apply(c)), describe(n.Apply(c)); x != y {
			t.Fatalf("%+v: original %s, restored %s", c, x, y)
		}
	}
	if x, y := snapBytes(t, m), snapBytes(t, n); !bytes.Equal(x, y) {
		t.Fatal("the two machines differ after the same commands")
	}
}

// A set's wait refused (a quota, MaxLocks) makes no lock: the state is as
// before, byte for byte; and MaxLocks counts the locks a set's waiter
// would make.
func TestRefusedSetWaitMakesNoLock(t *testing.T) {
	c := DefaultConfig()
	c.MaxWaitersPerPrincipal = 1
	m := NewWithConfig(c)
	mustGrant(t, m, acq(0, "held", "A", time.Minute), 1)
	w := setAcq(0, "B", time.Minute, time.Minute, "w1", spec("held"), spec("fresh-1"))
	w.Principal = "token:b"
	mustOK(t, m, w)
	before := snapBytes(t, m)
	w2 := setAcq(0, "B", time.Minute, time.Minute, "w2", spec("held"), spec("fresh-2"))
	w2.Principal = "token:b"
	errAs[*fence.ResourceExhaustedError](t, m.Apply(w2).Err)
	if !bytes.Equal(before, snapBytes(t, m)) {
		t.Fatal("a refused set wait changed the state")
	}
	c = DefaultConfig()
	c.MaxLocks = 2
	m = NewWithConfig(c)
	mustGrant(t, m, acq(0, "held", "A", time.Minute), 1)
	mustOK(t, m, setAcq(0, "B", time.Minute, time.Minute, "w1", spec("held"), spec("fresh-1"))) // 2 locks
	r := m.Apply(setAcq(0, "B", time.Minute, time.Minute, "w2", spec("held"), spec("fresh-2")))
	if e := errAs[*fence.ResourceExhaustedError](t, r.Err); e.Limit != "locks held, delayed or with waiters (config.max_locks)" {
		t.Fatalf("a third lock made by a set's waiter: %+v", e)
	}
}

// A session's seq retried with another set, mode or permit count is
// OP_CONFLICT, not the first acquire's lease (an outside test got back a
// set it had not asked for); the same set listed in another order is the
// same request, answered with its saved result.
func TestSeqRetryOfAnotherBoundaryConflicts(t *testing.T) {
	m := New()
	s := mustOK(t, m, Command{Op: OpSessionOpen, TTL: time.Minute}).Session.ID
	seq := func(n uint64, c Command) Command { c.Session, c.Seq, c.Ack, c.TTL = s, n, n, 0; return c }
	first := mustOK(t, m, seq(1, setAcq(0, "A", 0, 0, "", spec("a"), spec("b"))))
	for _, c := range []Command{
		seq(1, setAcq(0, "A", 0, 0, "", spec("x"), spec("y"))),
		seq(1, setAcq(0, "A", 0, 0, "", spec("a"), sharedSpec("b"))),
	} {
		if r := m.Apply(c); errAs[*fence.OpConflictError](t, r.Err).Field != "seq" {
			t.Fatalf("%+v: %s", c.Locks, describe(r))
		}
	}
	if r := mustOK(t, m, seq(1, setAcq(0, "A", 0, 0, "", spec("b"), spec("a")))); !r.Replayed || r.Lease.Token != first.Lease.Token {
		t.Fatalf("the same set in another order: %s", describe(r))
	}
	mustOK(t, m, seq(2, sharedAcq(0, "c", "A", 0, 0, "")))
	if r := m.Apply(seq(2, acq(0, "c", "A", 0))); errAs[*fence.OpConflictError](t, r.Err).Field != "seq" {
		t.Fatalf("shared retried as exclusive: %s", describe(r))
	}
	mustOK(t, m, seq(3, permitAcq(0, "p", "A", 2, 0, 0, "")))
	if r := m.Apply(seq(3, permitAcq(0, "p", "A", 5, 0, 0, ""))); errAs[*fence.OpConflictError](t, r.Err).Field != "seq" {
		t.Fatalf("permits 2 retried as 5: %s", describe(r))
	}
}

// A lock lists a set's lease as it holds that lock — named by it, in its
// mode there, without the set's other locks — so a listing of locks held
// by large sets stays the size of its holders (an outside test built a
// 668 MB List from 64-lock sets listed whole on each of their locks).
// Released by that name, the whole set goes.
func TestLockListsASetsLeaseAsItHoldsIt(t *testing.T) {
	m := New()
	mustGrant(t, m, setAcq(0, "A", time.Minute, 0, "", spec("a"), sharedSpec("b"), spec("c")), 1)
	h := m.Lock("b", 0).Holders
	if len(h) != 1 || h[0].Name != "b" || h[0].Mode != fence.Shared || h[0].Token != 1 || h[0].Locks != nil {
		t.Fatalf("b's holders %+v, want the set's lease named b, shared, without the set's locks", h)
	}
	mustOK(t, m, rel(0, h[0].Name, h[0].Token))
	for _, n := range []string{"a", "b", "c"} {
		if !m.Lock(n, 0).Free {
			t.Fatalf("%s not free after the set's release by b", n)
		}
	}
}

// A set's lease and a set's waiter are written once in a snapshot, not
// once per lock (an outside test made a 2.18 GB snapshot from 34 MB of
// 64-lock sets): a snapshot of a 64-lock set and its 64-lock waiter is
// about the size of one of 64 one-lock leases and waiters, and restores
// to the same state.
func TestSetSnapshotWritesASetOnce(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("%0200d", i) } // long names: what a repeat would cost
	var set []fence.LockSpec
	for i := range 64 {
		set = append(set, spec(name(i)))
	}
	m := New()
	mustGrant(t, m, setAcq(0, "A", time.Minute, 0, "", set...), 1)
	mustOK(t, m, setAcq(0, "B", time.Minute, time.Minute, "w", set...))
	single := New()
	for i := range 64 {
		mustOK(t, single, acq(0, name(i), "A", time.Minute))
		mustOK(t, single, waitAcq(0, name(i), "B", time.Minute, time.Minute, fmt.Sprint("w", i)))
	}
	b, s := snapBytes(t, m), snapBytes(t, single)
	if len(b) > 2*len(s) {
		t.Fatalf("snapshot of a 64-lock set and its waiter: %d bytes; of 64 one-lock leases and waiters: %d", len(b), len(s))
	}
	n := New()
	if err := n.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapBytes(t, n), b) {
		t.Fatal("the restored machine snapshots differently")
	}
	if r := mustOK(t, n, rel(0, name(63), 1)); len(r.Events) != 1 || r.Events[0].RequestID != "w" {
		t.Fatalf("release of the restored set by its last lock: %s, want the waiting set granted", describe(r))
	}
}

// A shared holder that expires with a lock-delay keeps every request out
// until the delay ends, other holders or not, and a busy refusal says so
// (Delayed, the delay's remaining time: what a client waits before it
// retries), not another holder's remaining time.
func TestBusyNamesALockDelayBesideHolders(t *testing.T) {
	m := New()
	c := sharedAcq(0, "cat", "A", time.Second, 0, "")
	c.LockDelay = 10 * time.Second
	mustGrant(t, m, c, 1)
	mustGrant(t, m, sharedAcq(0, "cat", "B", 3*time.Second, 0, ""), 2)
	mustOK(t, m, tick(at(1.5))) // A expired: the lock is in its delay until 11s; B holds until 3s
	b := errAs[*fence.BusyError](t, m.Apply(sharedAcq(at(1.5), "cat", "C", time.Second, 0, "")).Err)
	if !b.Delayed || b.Remaining != 9500*time.Millisecond {
		t.Fatalf("busy %+v, want the lock-delay's 9.5s (B holds only 1.5s more)", b)
	}
}

// A lock that is free but held back by its queue (strict FIFO: a waiting
// set keeps its place on a lock while it waits for its other locks) refuses
// a try-acquire as busy saying so — no holder, token 0, the number of
// requests queued ahead — not as "held by "" (token 0)"; a set naming it
// is refused the same way, and a wait that runs out behind the queue says
// it too. The refusal is the same on every replica (R1: built from the
// state only).
func TestBusyOfAFreeLockNamesTheQueueAhead(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "a", "H", 10*time.Second), 1)
	mustOK(t, m, setAcq(at(0.1), "S1", time.Second, time.Minute, "s1", spec("a"), spec("b")))
	mustOK(t, m, setAcq(at(0.2), "S2", time.Second, time.Minute, "s2", spec("b"), spec("a")))
	if info := m.Lock("b", m.Now()); len(info.Holders) != 0 {
		t.Fatalf("b held: %+v", info)
	}
	want := func(what string, err error, waited bool) {
		t.Helper()
		b := errAs[*fence.BusyError](t, err)
		if b.Name != "b" || b.Holder != "" || b.Token != 0 || b.Delayed || b.Queued != 2 || b.Waited != waited {
			t.Fatalf("%s: busy %+v, want b free with 2 queued ahead", what, b)
		}
		msg := `lock "b" is free but 2 queued request(s) come first`
		if !strings.HasPrefix(b.Error(), msg) {
			t.Fatalf("%s: message %q, want it to begin %q", what, b.Error(), msg)
		}
	}
	want("try", m.Apply(acq(at(0.3), "b", "T", time.Second)).Err, false)
	want("shared try", m.Apply(sharedAcq(at(0.3), "b", "T", time.Second, 0, "")).Err, false)
	want("set try", m.Apply(setAcq(at(0.3), "T", time.Second, 0, "", spec("b"), spec("c"))).Err, false)
	// A wait behind the queue that runs out is refused the same way.
	mustOK(t, m, waitAcq(at(0.4), "b", "N", time.Second, time.Second, "n"))
	r := mustOK(t, m, tick(at(1.5)))
	if len(r.Events) != 1 || r.Events[0].RequestID != "n" {
		t.Fatalf("tick: %s, want n's wait ended", describe(r))
	}
	want("wait ran out", r.Events[0].Err, true)
	// A held lock with a queue names its holder, as before.
	b := errAs[*fence.BusyError](t, m.Apply(acq(at(1.5), "a", "T", time.Second)).Err)
	if b.Token != 1 || b.Holder != "H" || b.Queued != 0 {
		t.Fatalf("busy on a held lock: %+v, want H (token 1)", b)
	}
}

// A lock whose holders leave room for a request — a shared holder and a
// shared try, a permit to spare — but whose queue comes first (an
// exclusive waiter; a waiting set) refuses the try naming its first holder
// and the requests queued ahead, not as if the holder blocked it (an
// outside test was sent to a shared holder that did not block it).
func TestBusyWithRoomBesideTheHoldersNamesTheQueue(t *testing.T) {
	m := New()
	mustGrant(t, m, sharedAcq(0, "s", "R1", 10*time.Second, 0, ""), 1)
	mustOK(t, m, waitAcq(at(0.1), "s", "X", time.Second, time.Minute, "x"))
	b := errAs[*fence.BusyError](t, m.Apply(sharedAcq(at(0.2), "s", "R2", time.Second, 0, "")).Err)
	if b.Holder != "R1" || b.Token != 1 || b.Queued != 1 {
		t.Fatalf("shared try behind an exclusive waiter: %+v, want R1 (token 1) and 1 queued", b)
	}
	if msg := `with room for this request, but 1 queued request(s) come first`; !strings.Contains(b.Error(), msg) {
		t.Fatalf("message %q lacks %q", b.Error(), msg)
	}
	// An exclusive try is blocked by the holder itself: no queued fact.
	b = errAs[*fence.BusyError](t, m.Apply(acq(at(0.2), "s", "E", time.Second)).Err)
	if b.Holder != "R1" || b.Queued != 0 {
		t.Fatalf("exclusive try on a shared-held lock: %+v, want R1 and no queued", b)
	}

	// Permits: one of three taken, a set waiting for another lock queued
	// on it; a try for a spare permit is held back by the set.
	mustGrant(t, m, acq(at(0.3), "x", "H", 10*time.Second), 2)
	p := func(at int64, owner string) Command {
		c := acq(at, "p", owner, 10*time.Second)
		c.Permits = 3
		return c
	}
	mustGrant(t, m, p(at(0.3), "P1"), 3)
	ps := spec("p")
	ps.Permits = 3
	mustOK(t, m, setAcq(at(0.4), "S", time.Second, time.Minute, "set", ps, spec("x")))
	b = errAs[*fence.BusyError](t, m.Apply(p(at(0.5), "P2")).Err)
	if b.Holder != "P1" || b.Token != 3 || b.Queued != 1 {
		t.Fatalf("permit try behind a waiting set: %+v, want P1 (token 3) and 1 queued", b)
	}
}
