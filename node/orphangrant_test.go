package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// An orphan (queued when the node went down, its client gone) may be
// granted during the grace: the grace lets clients re-attach, so nothing is
// withdrawn before it ends. When the grace ends its cancel releases that
// lease and hands the lock on, so the lock is held hostage for at most the
// grace, not the orphan's TTL: the waiter queued behind it (its client
// re-attached) gets the lock.
func TestOrphanGrantedDuringGraceIsReleasedAtItsEnd(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	holder := mustApply(t, n, acquire("job", time.Hour)).Lease
	orphan := acquire("job", time.Hour)
	orphan.Owner, orphan.RequestID, orphan.Wait = "orphan", "dead-client", time.Hour
	next := acquire("job", time.Hour)
	next.Owner, next.RequestID, next.Wait = "next", "live-client", time.Hour
	o := applyAsync(n, context.Background(), orphan)
	waitUntil(t, "the orphan is queued", func() bool { return queuedAttempt(n, "dead-client") == 1 })
	l := applyAsync(n, context.Background(), next)
	waitUntil(t, "the next waiter is queued", func() bool { return queuedAttempt(n, "live-client") == 1 })
	n.Close()
	for _, ch := range []<-chan applied{o, l} {
		if a := recv(t, ch); !errors.Is(a.err, ErrClosed) {
			t.Fatalf("waiter on a closed node = %+v, %v; want ErrClosed", a.res, a.err)
		}
	}

	// The grace ends when the test says so (graceEnd): with the default
	// 5s timer the re-attach and the release had to be applied within 5s
	// of takeoffice, a race with the machine's speed.
	graceEnd := make(chan struct{})
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), graceEnd: graceEnd})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	l = applyAsync(n, context.Background(), next) // the live client re-attaches
	waitUntil(t, "the live client re-attached", func() bool { return queuedAttempt(n, "live-client") == 2 })

	// The holder releases within the grace: the orphan, first in line, is
	// granted.
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "job", Token: holder.Token})
	li, err := n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if n.reaped.Load() != 0 {
		t.Fatal("the orphans were reaped before the grace ended")
	}
	if li.Lease == nil || li.Lease.Owner != "orphan" || li.Lease.Token != holder.Token+1 {
		t.Fatalf("lock during the grace = %+v, want granted to the orphan (token %d)", li, holder.Token+1)
	}

	// At the grace's end the orphan's lease is released and handed on.
	close(graceEnd)
	waitUntil(t, "the orphans were reaped", func() bool { return n.reaped.Load() == 1 })
	a := recv(t, l)
	if a.err != nil || a.res.Err != nil || a.res.Lease == nil || a.res.Lease.Token != holder.Token+2 {
		t.Fatalf("re-attached waiter = %+v, %v; want the grant with token %d", a.res, a.err, holder.Token+2)
	}
	li, err = n.Lock(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if li.Lease == nil || li.Lease.Owner != "next" {
		t.Fatalf("lock after the grace = %+v, want held by the re-attached waiter", li)
	}
}
