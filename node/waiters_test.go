package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

type applied struct {
	res state.Result
	err error
}

func applyAsync(n *Node, ctx context.Context, cmd state.Command) <-chan applied {
	out := make(chan applied, 1)
	go func() {
		res, err := n.Apply(ctx, cmd)
		out <- applied{res, err}
	}()
	return out
}

// recv returns what ch delivers; a hang guard (not a timing assertion)
// turns a waiter that is never told into a failure.
func recv(t *testing.T, ch <-chan applied) applied {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("a waiting acquire was never answered")
		return applied{}
	}
}

// Two concurrent attempts of one request_id (a client retry while the first
// attempt still waits) both get the grant.
func TestSameRequestIDWaitersAllTold(t *testing.T) {
	n := openNode(t, t.TempDir())
	holder := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Hour)
	cmd.RequestID, cmd.Wait = "req-1", time.Hour
	ctx := context.Background()

	first := applyAsync(n, ctx, cmd)
	waitFor(t, n, "job", func(li state.LockInfo) bool { return li.Waiters == 1 })
	second := applyAsync(n, ctx, cmd)
	waitUntil(t, "the retry was applied while queued", func() bool { return queuedAttempt(n, "req-1") == 2 })
	if got := n.wait.count(); got != 2 {
		t.Fatalf("%d waiters registered, want both attempts", got)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: holder.Token})
	for i, ch := range []<-chan applied{first, second} {
		a := recv(t, ch)
		if a.err != nil || a.res.Err != nil || a.res.Lease == nil || a.res.Lease.Token != holder.Token+1 {
			t.Errorf("attempt %d = %+v, %v; want the grant with token %d", i+1, a.res, a.err, holder.Token+1)
		}
	}
}

// A retry of a queued acquire sent with wait=0 is not answered "queued with
// no lease" (which the server reported as internal): it waits like the
// first attempt, bounded by its wait plus Config.WaitMargin, and then it is
// answered busy; the queue entry stays with the first attempt, which still
// waits here.
func TestQueuedRetryWithNoWait(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), WaitMargin: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	holder := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Hour)
	cmd.RequestID, cmd.Wait = "req-1", time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := applyAsync(n, ctx, cmd)
	waitFor(t, n, "job", func(li state.LockInfo) bool { return li.Waiters == 1 })

	retry := cmd
	retry.Wait = 0
	res, err := n.Apply(context.Background(), retry)
	var busy *fence.BusyError
	if err != nil || !errors.As(res.Err, &busy) || !busy.Waited {
		t.Fatalf("queued retry with wait=0 = %+v, %v; want busy (Waited) after its bound", res, err)
	}
	// The retry gave up, but the first attempt still waits here: the entry
	// is its, and the holder's release hands it the lock.
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: holder.Token})
	if a := recv(t, first); a.err != nil || a.res.Lease == nil || a.res.Lease.Token != holder.Token+1 {
		t.Fatalf("first attempt after the retry gave up = %+v, %v; want the grant", a.res, a.err)
	}
}

// A waiting acquire is bounded by its wait plus the margin even when the
// caller's context never ends and the machine's Event never comes to this
// node.
func TestWaitBoundedWithoutDeadline(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), WaitMargin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	mustApply(t, n, acquire("job", time.Hour))
	cmd := acquire("job", time.Hour)
	cmd.RequestID, cmd.Wait = "req-1", time.Hour
	// Queue the request with a long wait, then retry it with a short one:
	// the machine keeps the first deadline, the retry's bound is short.
	ctx, cancel := context.WithCancel(context.Background())
	first := applyAsync(n, ctx, cmd)
	waitFor(t, n, "job", func(li state.LockInfo) bool { return li.Waiters == 1 })
	retry := cmd
	retry.Wait = 20 * time.Millisecond
	res, err := n.Apply(context.Background(), retry)
	var busy *fence.BusyError
	if err != nil || !errors.As(res.Err, &busy) || !busy.Waited {
		t.Fatalf("retry = %+v, %v; want busy (Waited) at its bound", res, err)
	}
	// The retry ran out while attempt 1 still waits here: the entry (now
	// at the retry's attempt) is attempt 1's, and nothing withdrew it.
	if got := queuedAttempt(n, "req-1"); got != 2 {
		t.Fatalf("after the retry's bound the request is at attempt %d (0: not queued), want still queued at 2", got)
	}
	cancel()
	if a := recv(t, first); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("attempt 1 after its caller left = %+v, %v; want context.Canceled", a.res, a.err)
	}
	if got := queuedAttempt(n, "req-1"); got != 0 {
		t.Fatalf("after every attempt gave up the request is still queued at attempt %d", got)
	}
}

// A set's waiter whose caller goes away is withdrawn from every queue, as a
// one-lock waiter is (an outside test saw such sets granted to nobody, for
// their whole TTL, and a flood of them hold every waiter slot): the lock
// the set waited for then goes to the next acquirer.
func TestSetWaiterWithdrawnWhenItsCallerLeaves(t *testing.T) {
	n := openNode(t, t.TempDir())
	holder := mustApply(t, n, acquire("c", time.Hour)).Lease
	ctx, cancel := context.WithCancel(context.Background())
	set := state.Command{Op: state.OpAcquire, Owner: "S", TTL: time.Hour, Wait: time.Hour, RequestID: "set-1",
		Locks: []fence.LockSpec{{Name: "d"}, {Name: "c"}}}
	waiting := applyAsync(n, ctx, set)
	waitFor(t, n, "c", func(li state.LockInfo) bool { return li.Waiters == 1 })
	cancel()
	if a := recv(t, waiting); a.err == nil && a.res.Err == nil {
		t.Fatalf("a cancelled set wait answered %+v", a.res)
	}
	waitFor(t, n, "d", func(li state.LockInfo) bool { return li.Waiters == 0 })
	waitFor(t, n, "c", func(li state.LockInfo) bool { return li.Waiters == 0 })
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "c", Token: holder.Token})
	waitFor(t, n, "c", func(li state.LockInfo) bool { return li.Free })
	waitFor(t, n, "d", func(li state.LockInfo) bool { return li.Free })
}
