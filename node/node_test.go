package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

func TestMain(m *testing.M) {
	// raft never answers a future still queued when it shuts down; the node
	// stops waiting for it (Node.await), and the goroutine blocked on it
	// holds nothing.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*deferError).Error"))
}

func openNode(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { within(t, "close the node at cleanup", func() { n.Close() }) })
	return n
}

// mustApply applies cmd and fails the test on an error or a refusal; a
// proposal raft never answers fails it after the hang guard.
func mustApply(t *testing.T, n *Node, cmd state.Command) state.Result {
	t.Helper()
	var res state.Result
	var err error
	if !within(t, fmt.Sprintf("Apply(%+v)", cmd), func() { res, err = n.Apply(context.Background(), cmd) }) {
		t.FailNow()
	}
	if err != nil {
		t.Fatalf("Apply(%+v): %v", cmd, err)
	}
	if res.Err != nil {
		t.Fatalf("Apply(%+v) refused: %v", cmd, res.Err)
	}
	return res
}

func acquire(name string, ttl time.Duration) state.Command {
	return state.Command{Op: state.OpAcquire, Name: name, Owner: "test", TTL: ttl}
}

// G1 across restart: state and the token counter survive close and reopen;
// the first grant after reopen is greater than every grant before.
func TestReopenKeepsStateAndTokens(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	a := mustApply(t, n, acquire("a", time.Hour)).Lease
	b := mustApply(t, n, acquire("b", time.Hour)).Lease
	if a.Token != 1 || b.Token != 2 {
		t.Fatalf("tokens = %d, %d; want 1, 2", a.Token, b.Token)
	}
	mustApply(t, n, state.Command{Op: state.OpWrite, Name: "stock", Token: b.Token, Value: []byte("8"), OpID: "w1"})
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	n = openNode(t, dir)
	if got := n.LastToken(); got != 2 {
		t.Fatalf("LastToken after reopen = %d, want 2", got)
	}
	rs, err := n.Resource(context.Background(), "stock")
	if err != nil {
		t.Fatal(err)
	}
	if string(rs.Value) != "8" || rs.LastToken != 2 || rs.Version != 1 {
		t.Fatalf("resource after reopen = %+v", rs)
	}
	c := mustApply(t, n, acquire("c", time.Hour)).Lease
	if c.Token != 3 {
		t.Fatalf("first token after reopen = %d, want 3", c.Token)
	}
	// The op_id memory survived too: a replay does not apply again.
	res := mustApply(t, n, state.Command{Op: state.OpWrite, Name: "stock", Token: b.Token, Value: []byte("8"), OpID: "w1"})
	if !res.Replayed || res.Resource.Version != 1 {
		t.Fatalf("replayed write after reopen = %+v, want Replayed at version 1", res)
	}
}

// G3 across restart: the leader clock resumes at the machine's server time,
// so wall time spent down does not count and a lease granted before close is
// still held after reopen.
func TestClockResumesAfterReopen(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	l := mustApply(t, n, acquire("a", time.Hour)).Lease
	var before int64
	n.fsm.read(func(m *state.Machine) { before = m.Now() })
	n.Close()
	time.Sleep(50 * time.Millisecond) // wall time passes while the node is down

	n = openNode(t, dir)
	if base := n.clock.Load().base; base != before {
		t.Fatalf("leader clock base after reopen = %d, want the machine's time before close %d", base, before)
	}
	li, err := n.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if li.Lease == nil || li.Lease.Token != l.Token {
		t.Fatalf("lock after reopen = %+v, want held by token %d", li, l.Token)
	}
}

// The ticker expires a lease and, in the same apply, hands the lock to the
// waiter queued behind it. The lease is cut short (a renewal with the least
// TTL) only once the waiter is queued: with a short lease from the start, a
// machine slower than that TTL between the two applies granted the waiter's
// acquire directly (an expired lease noticed by the acquire), and no tick.
func TestTickerExpiresLeaseAndHandsToWaiter(t *testing.T) {
	n := openNode(t, t.TempDir())
	a := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Hour)
	cmd.Wait = time.Hour
	waiter := applyAsync(n, context.Background(), cmd)
	waitFor(t, n, "job", func(li state.LockInfo) bool { return li.Waiters == 1 })
	ticks := n.Status().Ticks
	mustApply(t, n, state.Command{Op: state.OpRenew, Name: "job", Token: a.Token, TTL: fence.MinTTL})
	w := recv(t, waiter)
	if w.err != nil {
		t.Fatal(w.err)
	}
	res := w.res
	if res.Lease == nil || res.Lease.Token != a.Token+1 {
		t.Fatalf("waiter got %+v, want the lease with token %d", res, a.Token+1)
	}
	if n.Status().Ticks == ticks {
		t.Fatal("no tick was proposed, yet the lease expired")
	}
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if li.Lease == nil || li.Lease.Token != res.Lease.Token || li.Waiters != 0 {
		t.Fatalf("lock = %+v, want held by the waiter's token and no waiters", li)
	}
}

// A wait that runs out is reported as busy with Waited.
func TestWaitRunsOut(t *testing.T) {
	n := openNode(t, t.TempDir())
	mustApply(t, n, acquire("job", time.Hour))
	cmd := acquire("job", time.Hour)
	cmd.Wait = 30 * time.Millisecond
	res, err := n.Apply(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	var busy *fence.BusyError
	if !errors.As(res.Err, &busy) || !busy.Waited {
		t.Fatalf("result = %+v, want *fence.BusyError with Waited", res)
	}
}

// A waiter whose context ends is withdrawn from the queue: when the holder
// releases, the lock is free, not handed to the client that went away.
func TestCancelledWaiterIsNotHandedTheLock(t *testing.T) {
	n := openNode(t, t.TempDir())
	a := mustApply(t, n, acquire("job", time.Hour)).Lease

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cmd := acquire("job", time.Hour)
		cmd.Wait = time.Hour
		_, err := n.Apply(ctx, cmd)
		done <- err
	}()
	waitFor(t, n, "job", func(li state.LockInfo) bool { return li.Waiters == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter returned %v, want context.Canceled", err)
	}
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if li.Waiters != 0 {
		t.Fatalf("waiters after cancel = %d, want 0", li.Waiters)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: a.Token})
	li, err = n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if li.Lease != nil {
		t.Fatalf("after release the lock is held by %+v; it went to a waiter that had left", li.Lease)
	}
	if n.Status().Waiters != 0 {
		t.Fatalf("node still has %d registered waiters", n.Status().Waiters)
	}
}

// waitFor polls a lock (through linearizable reads) until cond holds (a
// hang guard, not a timing assertion, turns a condition never met into a
// failure).
func waitFor(t *testing.T, n *Node, name string, cond func(state.LockInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("lock %s never reached the condition", name)
		}
		li, err := n.Lock(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if cond(li) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A retried acquire with the same request_id gets the same lease (G5).
func TestAcquireRequestIDReplays(t *testing.T) {
	n := openNode(t, t.TempDir())
	cmd := acquire("job", time.Hour)
	cmd.RequestID = "req-1"
	first := mustApply(t, n, cmd).Lease
	again := mustApply(t, n, cmd)
	if again.Lease == nil || again.Lease.Token != first.Token {
		t.Fatalf("replay = %+v, want token %d", again, first.Token)
	}
	if n.LastToken() != first.Token {
		t.Fatalf("LastToken = %d: the replay granted again", n.LastToken())
	}
}

// Many goroutines acquire (waiting) and release a few locks: every token is
// unique, and on each lock tokens strictly increase in grant order.
func TestConcurrentAcquireRelease(t *testing.T) {
	n := openNode(t, t.TempDir())
	const workers, rounds, locks = 16, 20, 4
	names := []string{"l0", "l1", "l2", "l3"}
	var last [locks]atomic.Uint64
	var mu sync.Mutex
	seen := map[fence.Token]bool{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				i := (w + r) % locks
				cmd := acquire(names[i], time.Hour)
				cmd.Wait = time.Hour
				res, err := n.Apply(context.Background(), cmd)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					errc <- err
					return
				}
				tok := res.Lease.Token
				if prev := last[i].Swap(uint64(tok)); prev >= uint64(tok) {
					errc <- errors.New("token " + tok.String() + " on " + names[i] + " not above previous " + fence.Token(prev).String())
					return
				}
				mu.Lock()
				dup := seen[tok]
				seen[tok] = true
				mu.Unlock()
				if dup {
					errc <- errors.New("token " + tok.String() + " granted twice")
					return
				}
				res, err = n.Apply(context.Background(), state.Command{Op: state.OpRelease, Name: names[i], Token: tok})
				if err == nil {
					err = res.Err
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if len(seen) != workers*rounds || n.LastToken() != fence.Token(workers*rounds) {
		t.Fatalf("%d distinct tokens, last token %d; want %d", len(seen), n.LastToken(), workers*rounds)
	}
}

// A second node on the same data directory fails clearly instead of hanging.
func TestSecondOpenOnSameDirFails(t *testing.T) {
	dir := t.TempDir()
	openNode(t, dir)
	_, err := Open(Config{DataDir: dir, LockTimeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Open = %v, want a 'locked by another process' error", err)
	}
}

// After Close, Apply and reads fail with ErrClosed or ErrNotLeader, never hang.
func TestApplyAfterClose(t *testing.T) {
	n := openNode(t, t.TempDir())
	n.Close()
	if _, err := n.Apply(context.Background(), acquire("a", time.Hour)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}
	if _, err := n.Lock(context.Background(), "a"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Lock after Close = %v, want ErrNotLeader", err)
	}
}
