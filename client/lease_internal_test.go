package client

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// TestErrReportsPassedDeadline: Err reports a lease lost as soon as its
// safe deadline has passed, even when the deadline timer has not run (here
// it never fires during the test).
func TestErrReportsPassedDeadline(t *testing.T) {
	c, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := time.Now().Add(-2 * time.Second)
	l := newLease(c, fence.Lease{Name: "x", Token: 7, TTL: time.Second, Remaining: time.Second}, sent, -1)
	l.watch = time.NewTimer(time.Hour) // armed, but not by the deadline
	defer l.watch.Stop()
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrDeadlinePassed) {
		t.Fatalf("Err after the deadline = %v, want a LostError caused by ErrDeadlinePassed", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed once Err reported the loss")
	}
}

// TestStopBeforeStart: a lease ended before it was started (its Client was
// closed while Acquire ran) has no timer to stop; stop must not touch it.
func TestStopBeforeStart(t *testing.T) {
	c, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := newLease(c, fence.Lease{Name: "x", Token: 7, TTL: time.Second, Remaining: time.Second}, time.Now(), -1)
	l.stop(ErrClientClosed)
	if !errors.Is(l.Err(), ErrClientClosed) {
		t.Fatalf("Err = %v, want ErrClientClosed", l.Err())
	}
}
