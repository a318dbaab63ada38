package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// arrivalLog answers every request 503 (Connect: Unavailable) and records
// which door each attempt reached and when it arrived; it closes third when
// the third attempt arrives.
type arrivalLog struct {
	mu    sync.Mutex
	doors []string
	at    []time.Time
	third chan struct{}
}

func (a *arrivalLog) door(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.doors = append(a.doors, name)
		a.at = append(a.at, time.Now())
		if len(a.at) == 3 {
			close(a.third)
		}
		a.mu.Unlock()
		http.Error(w, "no leader", http.StatusServiceUnavailable)
	})
}

// TestRetryPausesAfterEveryEndpointFailedOnce: a call moves to an endpoint
// it has not tried yet at once, but once every endpoint failed it waits the
// backoff pause before the next attempt instead of starting over in a hot
// loop. The pause is jittered in [first/2, first]; a timer never fires
// early, so the third attempt (the first of the second round) cannot arrive
// less than first/2 after the second (the last of the first round) — an
// ordering the code guarantees, not a speed bound on the machine.
//
// Kills the mutants of retry.go's `n+1 < len(c.endpoints)` (`<=`, and `n-1`
// for `n+1`): both retry the first endpoint again at once after the round.
func TestRetryPausesAfterEveryEndpointFailedOnce(t *testing.T) {
	const first = time.Second
	log := &arrivalLog{third: make(chan struct{})}
	a := serveLoopback(t, log.door("a"))
	b := serveLoopback(t, log.door("b"))
	c := newClientFor(t, a, client.WithEndpointsInOrder(), client.WithEndpoints(b), client.WithoutSession(), client.WithBackoff(first, first))

	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() { _, err := c.Get(ctx, uniq(t)); done <- err }()
	select {
	case <-log.third:
	case err := <-done:
		t.Fatalf("Get returned before a third attempt: %v", err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Get succeeded against endpoints that only answer Unavailable")
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if log.doors[0] == log.doors[1] {
		t.Fatalf("attempts went to %v: the second attempt must go to the endpoint not tried yet", log.doors)
	}
	if gap, least := log.at[2].Sub(log.at[1]), first/2; gap < least {
		t.Fatalf("after both endpoints failed once the next attempt came %v later, want at least the smallest backoff pause %v (doors %v)", gap, least, log.doors[:3])
	}
}
