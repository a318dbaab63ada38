package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// Two live attempts of one request_id wait on one queue entry. Attempt 2 (a
// retry whose deadline passes) gives up first: attempt 1 still waits here,
// so the entry stays (attempt 2's cancel would have removed it and left
// attempt 1 waiting for nothing, then a false BUSY). When A's lease ends,
// attempt 1 is granted. Attempt 2's deadline passes once it re-attached (an
// event): a 1s timeout that ran out before attempt 2 was applied, as on a
// loaded machine, left the request at attempt 1 and failed the test.
func TestRetryGivingUpSparesTheFirstAttempt(t *testing.T) {
	n := openNode(t, t.TempDir())
	a := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Minute)
	cmd.RequestID, cmd.Wait = "req", time.Hour

	first := applyAsync(n, context.Background(), cmd)
	waitUntil(t, "attempt 1 is queued", func() bool { return queuedAttempt(n, "req") == 1 })
	ctx2 := newDeadlineCtx()
	defer ctx2.expire()
	second := applyAsync(n, ctx2, cmd)
	waitUntil(t, "attempt 2 re-attached", func() bool { return queuedAttempt(n, "req") == 2 })
	ctx2.expire()
	if r := recv(t, second); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("attempt 2 = %+v, %v; want its deadline", r.res, r.err)
	}
	// Attempt 2 was applied (it bumped the attempt) and has returned: a
	// cancel it proposed would have been applied by now.
	if got := queuedAttempt(n, "req"); got != 2 {
		t.Fatalf("after attempt 2 gave up the request is at attempt %d (0: not queued), want still queued at 2 for attempt 1", got)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: a.Token}) // A's lease ends
	r := recv(t, first)
	if r.err != nil || r.res.Err != nil || r.res.Lease == nil || r.res.Lease.Token != a.Token+1 {
		t.Fatalf("attempt 1 = %+v, %v; want the grant with token %d", r.res, r.err, a.Token+1)
	}
}

// When every attempt here gives up, the last one withdraws the entry,
// naming the highest attempt seen (attempt 1's own number would be a no-op
// and leave the entry queued for nobody), and nobody is handed the lock.
func TestAllAttemptsGivingUpWithdrawTheEntry(t *testing.T) {
	n := openNode(t, t.TempDir())
	a := mustApply(t, n, acquire("job", time.Hour)).Lease
	cmd := acquire("job", time.Minute)
	cmd.RequestID, cmd.Wait = "req", time.Hour

	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first := applyAsync(n, ctx1, cmd)
	waitUntil(t, "attempt 1 is queued", func() bool { return queuedAttempt(n, "req") == 1 })
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	second := applyAsync(n, ctx2, cmd)
	waitUntil(t, "attempt 2 re-attached", func() bool { return queuedAttempt(n, "req") == 2 })

	cancel2()
	if r := recv(t, second); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("attempt 2 = %+v, %v; want context.Canceled", r.res, r.err)
	}
	if got := queuedAttempt(n, "req"); got != 2 {
		t.Fatalf("after attempt 2 gave up: attempt %d, want still queued at 2", got)
	}
	cancel1()
	if r := recv(t, first); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("attempt 1 = %+v, %v; want context.Canceled", r.res, r.err)
	}
	if got := queuedAttempt(n, "req"); got != 0 {
		t.Fatalf("after both attempts gave up the request is still queued at attempt %d", got)
	}
	if c := n.wait.count(); c != 0 {
		t.Fatalf("%d waiters still registered", c)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: a.Token})
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if !li.Free || li.Lease != nil {
		t.Fatalf("lock after release = %+v: handed to a request nobody waits for", li)
	}
}

// deadlineCtx is a context whose deadline passes when the test calls
// expire: Err is then context.DeadlineExceeded, as after a timeout, but at
// a point the test chose rather than after a duration a slow machine may
// need for the work before it.
type deadlineCtx struct {
	context.Context // Background: no deadline, no values
	done            chan struct{}
	once            sync.Once
}

func newDeadlineCtx() *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *deadlineCtx) expire()               { c.once.Do(func() { close(c.done) }) }
func (c *deadlineCtx) Done() <-chan struct{} { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
