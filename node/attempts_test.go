package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// queuedAttempt is the current attempt of a queued request (0: not queued).
func queuedAttempt(n *Node, requestID string) uint32 {
	var a uint32
	n.fsm.read(func(m *state.Machine) {
		for _, q := range m.Queued() {
			if q.RequestID == requestID {
				a = q.Attempt
			}
		}
	})
	return a
}

// waitUntil polls cond (a hang guard turns a condition never met into a
// failure).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Fault 2: a retried waiting acquire is not cancelled by its own first
// attempt. Attempt 1's caller goes away after attempt 2 re-attached: its
// cancel names attempt 1 and is a no-op; attempt 2 gets the lock, and keeps
// it.
func TestFirstAttemptsCancelSparesTheRetry(t *testing.T) {
	n := openNode(t, t.TempDir())
	holder := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Hour)
	cmd.RequestID, cmd.Wait = "req-1", time.Hour

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := applyAsync(n, ctx1, cmd)
	waitUntil(t, "attempt 1 is queued", func() bool { return queuedAttempt(n, "req-1") == 1 })
	second := applyAsync(n, context.Background(), cmd)
	waitUntil(t, "attempt 2 re-attached", func() bool { return queuedAttempt(n, "req-1") == 2 })

	cancel1()
	if a := recv(t, first); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("attempt 1 after its caller left = %+v, %v; want context.Canceled", a.res, a.err)
	}
	if got := queuedAttempt(n, "req-1"); got != 2 {
		t.Fatalf("after attempt 1's cancel the request is at attempt %d (0: not queued), want still queued at 2", got)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: holder.Token})
	a := recv(t, second)
	if a.err != nil || a.res.Lease == nil || a.res.Lease.Token != holder.Token+1 {
		t.Fatalf("attempt 2 = %+v, %v; want the grant with token %d", a.res, a.err, holder.Token+1)
	}
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if li.Lease == nil || li.Lease.Token != holder.Token+1 {
		t.Fatalf("lock after the grant = %+v, want held by attempt 2's token %d", li, holder.Token+1)
	}
}

// Fault 3: a waiter whose client waited on a node that is gone is withdrawn
// after the grace; the lock is then free when its holder releases it.
// A client that re-attached within the grace keeps its place.
func TestOrphanedWaitersWithdrawnAfterGrace(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	holder := mustApply(t, n, acquire("job", time.Hour)).Lease
	holder2 := mustApply(t, n, acquire("kept", time.Hour)).Lease
	orphan := acquire("job", time.Hour)
	orphan.RequestID, orphan.Wait = "dead-client", time.Hour
	live := acquire("kept", time.Hour)
	live.RequestID, live.Wait = "live-client", time.Hour
	o := applyAsync(n, context.Background(), orphan)
	l := applyAsync(n, context.Background(), live)
	waitUntil(t, "both are queued", func() bool {
		return queuedAttempt(n, "dead-client") == 1 && queuedAttempt(n, "live-client") == 1
	})
	n.Close()
	for _, ch := range []<-chan applied{o, l} {
		if a := recv(t, ch); !errors.Is(a.err, ErrClosed) {
			t.Fatalf("waiter on a closed node = %+v, %v; want ErrClosed", a.res, a.err)
		}
	}

	// The grace ends when the test says so (graceEnd): with the default
	// 5s timer the live client's retry had to be applied within 5s of
	// takeoffice, a race with the machine's speed.
	graceEnd := make(chan struct{})
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), graceEnd: graceEnd})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The live client retries (same request_id) within the grace, which
	// starts at takeoffice, just before Open returns.
	l = applyAsync(n, context.Background(), live)
	waitUntil(t, "the live client re-attached", func() bool { return queuedAttempt(n, "live-client") == 2 })
	close(graceEnd)
	waitUntil(t, "the orphans were reaped", func() bool { return n.reaped.Load() == 1 })

	if got := queuedAttempt(n, "dead-client"); got != 0 {
		t.Fatalf("the dead client's acquire is still queued (attempt %d) after the grace", got)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: holder.Token})
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if !li.Free || li.Lease != nil {
		t.Fatalf("lock after release = %+v: handed to a waiter nobody waits for", li)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "kept", Token: holder2.Token})
	if a := recv(t, l); a.err != nil || a.res.Lease == nil {
		t.Fatalf("re-attached client = %+v, %v; want the grant", a.res, a.err)
	}
}
