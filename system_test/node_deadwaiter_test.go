//go:build e2e

package system_test

import (
	"context"
	"testing"
	"time"
)

// Fault 3 end to end: a `fence acquire --wait` client waits on a lock; the
// server is killed with SIGKILL and the client dies with it; the server
// restarts and the holder releases. The dead client's queued acquire must
// not hold the lock hostage for its TTL (1h): after the server's waiter
// grace it is withdrawn, and a live client waiting far less than that TTL
// gets the lock.
func TestNodeDeadWaiterDoesNotHoldLock(t *testing.T) {
	srv := startServer(t, "--waiter-grace", "2s")
	c := connectAPI(srv)
	ctx := context.Background()
	holder, err := c.acquire(ctx, "job", "holder", time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	waiter := startProc(t, "fence acquire --wait", fenceBinary(t), []string{"FENCE_SERVER=" + srv.URL()},
		"acquire", "job", "--ttl", "1h", "--wait", "1h", "--owner", "dead-waiter")
	deadline := time.Now().Add(hangGuard)
	for {
		li, err := c.get(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if li.GetWaiters() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting client never queued: %v", li)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Kill()
	waiter.cmd.Process.Kill() // the client is gone too
	waiter.Wait()

	srv.Restart()
	if err := c.release(ctx, "job", holder.GetToken()); err != nil {
		t.Fatalf("holder's release after the restart: %v", err)
	}
	// grace (2s) + the wait margin is all a live client may have to wait;
	// the dead waiter's lease, had it been granted, would last an hour.
	live, err := c.acquire(ctx, "job", "live", time.Minute, time.Minute)
	if err != nil {
		li, _ := c.get(ctx, "job")
		t.Fatalf("a live client waiting 1m could not acquire (lock %v): %v", li, err)
	}
	if live.GetOwner() != "live" || live.GetToken() <= holder.GetToken() {
		t.Fatalf("live client's lease = %v", live)
	}
}
