package state

import (
	"bytes"
	"testing"
	"time"
)

// configured returns a machine that has applied an OpConfig (DefaultConfig):
// attempt generations count.
func configured(t *testing.T) *Machine {
	t.Helper()
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Config: DefaultConfig()})
	return m
}

func cancel(now int64, name, rid string, attempt uint32) Command {
	return Command{Op: OpCancelWait, Now: now, Name: name, RequestID: rid, Attempt: attempt}
}

func wantQueued(t *testing.T, m *Machine, want ...QueuedRequest) {
	t.Helper()
	got := m.Queued()
	if len(got) != len(want) {
		t.Fatalf("queued %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("queued %+v, want %+v", got, want)
		}
	}
}

// Fault 2: a client retries a waiting acquire with the same request_id (a
// proxy answered 503 first); then the server notices the first attempt's
// dropped connection and cancels it. The cancel names the first attempt,
// which is no longer current: it changes nothing.
func TestCancelOfAnEarlierAttemptIsANoop(t *testing.T) {
	t.Run("while queued", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
		first := mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		if !first.Queued || first.Attempt != 1 {
			t.Fatalf("first attempt %+v", first)
		}
		retry := mustOK(t, m, waitAcq(at(1), "x", "B", time.Minute, 59*time.Second, "w"))
		if !retry.Queued || !retry.Replayed || retry.Attempt != 2 {
			t.Fatalf("retry %+v", retry)
		}
		wantQueued(t, m, QueuedRequest{Name: "x", RequestID: "w", Attempt: 2})
		mustOK(t, m, cancel(at(2), "x", "w", 1))
		wantQueued(t, m, QueuedRequest{Name: "x", RequestID: "w", Attempt: 2})
		r := mustOK(t, m, rel(at(3), "x", 1))
		if len(r.Events) != 1 || r.Events[0].RequestID != "w" || r.Events[0].Lease == nil || r.Events[0].Attempt != 2 {
			t.Fatalf("hand-on %+v", r.Events)
		}
	})
	t.Run("after the grant won the race", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
		mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		mustOK(t, m, waitAcq(0, "x", "C", time.Minute, time.Minute, "c"))
		r := mustOK(t, m, rel(at(1), "x", 1)) // granted to w's first attempt
		if len(r.Events) != 1 || r.Events[0].Lease.Token != 2 || r.Events[0].Attempt != 1 {
			t.Fatalf("hand-on %+v", r.Events)
		}
		retry := mustOK(t, m, waitAcq(at(2), "x", "B", time.Minute, time.Minute, "w"))
		if retry.Lease == nil || retry.Lease.Token != 2 || retry.Attempt != 2 {
			t.Fatalf("retry %+v", retry)
		}
		// The first attempt's connection drops: its cancel must not release
		// the lease the retry just returned, nor hand the lock to C.
		r = mustOK(t, m, cancel(at(3), "x", "w", 1))
		if len(r.Events) != 0 {
			t.Fatalf("stale cancel decided %+v", r.Events)
		}
		if li := m.Lock("x", at(3)); li.Lease == nil || li.Lease.Token != 2 || li.Lease.Owner != "B" {
			t.Fatalf("lock after the stale cancel: %+v", li)
		}
		mustOK(t, m, renew(at(4), "x", 2, 0))
	})
	t.Run("cancel of the current attempt still works", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
		mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		mustOK(t, m, cancel(at(1), "x", "w", 2))
		wantQueued(t, m)

		mustOK(t, m, waitAcq(at(1), "x", "C", time.Minute, time.Minute, "c"))
		mustOK(t, m, waitAcq(at(1), "x", "D", time.Minute, time.Minute, "d"))
		mustOK(t, m, rel(at(2), "x", 1)) // c granted, attempt 1
		r := mustOK(t, m, cancel(at(3), "x", "c", 1))
		if len(r.Events) != 1 || r.Events[0].RequestID != "d" || r.Events[0].Lease == nil {
			t.Fatalf("cancel of the holding attempt: %+v", r.Events)
		}
	})
	t.Run("a format-1 cancel (attempt 0) cancels the current attempt", func(t *testing.T) {
		m := configured(t)
		mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
		mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
		mustOK(t, m, cancel(at(1), "x", "w", 0))
		wantQueued(t, m)
	})
}

// A retry of a live wait makes a new attempt, with or without an OpConfig
// in the log, and the count survives a snapshot.
func TestAttemptsCountAndSurviveSnapshot(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
	mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w"))
	if r := mustOK(t, m, waitAcq(0, "x", "B", time.Minute, time.Minute, "w")); r.Attempt != 2 {
		t.Fatalf("retry made attempt %d, want 2", r.Attempt)
	}
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	n := New()
	if err := n.Restore(&b); err != nil {
		t.Fatal(err)
	}
	wantQueued(t, n, QueuedRequest{Name: "x", RequestID: "w", Attempt: 2})
	if r := mustOK(t, n, waitAcq(0, "x", "B", time.Minute, time.Minute, "w")); r.Attempt != 3 {
		t.Fatalf("restored machine's retry made attempt %d, want 3", r.Attempt)
	}
}

// Queued lists waiters by lock name, then in arrival order.
func TestQueuedOrder(t *testing.T) {
	m := configured(t)
	mustGrant(t, m, acq(0, "b", "A", time.Minute), 1)
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 2)
	mustOK(t, m, waitAcq(0, "b", "B", time.Second, time.Minute, "b1"))
	mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Minute, "a2"))
	mustOK(t, m, waitAcq(0, "a", "B", time.Second, time.Minute, "a1"))
	wantQueued(t, m, QueuedRequest{"a", "a2", 1}, QueuedRequest{"a", "a1", 1}, QueuedRequest{"b", "b1", 1})
}
