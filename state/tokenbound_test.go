package state

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The machine never issues a token above the largest token
// (fence.MaxTokenJSONInt, the bound a backup's header is checked against):
// once the counter is there, an acquire that would be granted or queued is
// refused RESOURCE_EXHAUSTED naming the token counter and the bound, and
// nothing changes; a waiter the lock would pass to is refused the same way;
// OpBumpToken above the bound is refused. A lock that needs no token (busy)
// still answers busy.
func TestNoTokenAboveTheLargest(t *testing.T) {
	const top = fence.Token(fence.MaxTokenJSONInt)
	m := NewWithConfig(DefaultConfig())
	mustOK(t, m, Command{Op: OpBumpToken, Now: sec, Token: top - 1})
	mustGrant(t, m, acq(sec, "a", "o", time.Minute), top-1)
	if r := m.Apply(waitAcq(sec, "a", "w", time.Minute, time.Minute, "w1")); r.Err != nil || !r.Queued {
		t.Fatalf("waiter on a: err=%v queued=%v", r.Err, r.Queued)
	}
	mustGrant(t, m, acq(sec, "b", "o", time.Minute), top)

	exhausted := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fence.ErrResourceExhausted) {
			t.Fatalf("%s at the largest token: %v (%T), want RESOURCE_EXHAUSTED", what, err, err)
		}
		e := errAs[*fence.ResourceExhaustedError](t, err)
		if !strings.Contains(e.Limit, "token counter") || !strings.Contains(e.Bound, top.String()) || !strings.Contains(e.Got, top.String()) {
			t.Fatalf("%s: %q does not name the token counter, the bound %d and the counter", what, err, top)
		}
	}
	unchanged := func(what string, before []byte) {
		t.Helper()
		if !bytes.Equal(before, snapshotBytes(t, m)) || m.LastToken() != top {
			t.Fatalf("%s: the refused command changed the state (last token %d)", what, m.LastToken())
		}
	}

	before := snapshotBytes(t, m)
	r := m.Apply(Command{Op: OpAcquire, Now: sec, Name: "c", Owner: "o", TTL: time.Minute, RequestID: "c1"})
	exhausted("a grant of a free lock", r.Err)
	unchanged("a grant of a free lock", before)
	// The same request again is refused again (nothing was remembered).
	exhausted("its retry", m.Apply(Command{Op: OpAcquire, Now: sec, Name: "c", Owner: "o", TTL: time.Minute, RequestID: "c1"}).Err)
	unchanged("its retry", before)

	r = m.Apply(waitAcq(sec, "b", "w", time.Minute, time.Minute, "w2"))
	exhausted("a wait on a held lock", r.Err)
	unchanged("a wait on a held lock", before)

	if r := m.Apply(acq(sec, "b", "x", time.Minute)); !errors.Is(r.Err, fence.ErrBusy) {
		t.Fatalf("a try of a held lock: %v, want busy (no token needed)", r.Err)
	}
	unchanged("a busy try", before)

	r = m.Apply(Command{Op: OpBumpToken, Now: sec, Token: top + 1})
	if r.Err == nil || !strings.Contains(r.Err.Error(), top.String()) {
		t.Fatalf("a bump above the largest token: %v, want refused naming %d", r.Err, top)
	}
	unchanged("a bump above the largest token", before)

	// a is released: its waiter would be granted a token above the bound.
	r = mustOK(t, m, rel(sec, "a", top-1))
	if len(r.Events) != 1 || r.Events[0].RequestID != "w1" || r.Events[0].Lease != nil {
		t.Fatalf("release of a: events %+v, want w1 refused", r.Events)
	}
	exhausted("the waiter on a", r.Events[0].Err)
	if m.Waiting() != 0 || m.LastToken() != top {
		t.Fatalf("after the release: %d waiting, last token %d", m.Waiting(), m.LastToken())
	}
	if info := m.Lock("a", sec); info.Lease != nil || info.Waiters != 0 {
		t.Fatalf("a is held after its waiter was refused: %+v", info)
	}
}
