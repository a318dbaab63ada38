//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashClient is one client of TestCrashKill9. It alone writes its resource,
// with strictly increasing values, so after a crash the stored value must be
// its last acknowledged value or a later one it had sent.
type crashClient struct {
	id       int
	resource string

	mu        sync.Mutex
	tokens    []roundToken // every token a reply carried, in order
	attempted int          // the largest value ever sent
	acked     int          // the last acknowledged value (0: none)
	ackedTok  uint64       // the token of that write
	ackedN    uint64       // number of acknowledged writes, all rounds

	lock     string      // the lock of the current round
	held     uint64      // the token of the last acknowledged grant of lock
	released leaseStatus // what became of it
	// acquiring: an acquire was sent after that, with no answer yet — it
	// may have been granted with a reply lost to the kill.
	acquiring bool
}

// leaseStatus is what a client knows of its last acknowledged grant.
type leaseStatus int

const (
	leaseHeld      leaseStatus = iota // no release sent: it must survive the crash
	leaseReleasing                    // release sent, no answer: held or free
	leaseReleased                     // release acknowledged: free
)

// roundToken is a token and the round (between two kills) it was received in.
type roundToken struct {
	round int
	token uint64
}

// TestCrashKill9 checks G1 and G6 across kill -9: clients acquire, write and
// release concurrently; the server is killed with SIGKILL once enough writes
// have been acknowledged; it is restarted on the same data directory. Then
// every token granted is greater than every token any client received before,
// every acknowledged write is still there, and every acknowledged grant or
// release too. Three rounds on raft-wal.
func TestCrashKill9(t *testing.T) {
	t.Run("wal", func(t *testing.T) { crashKill9(t, 3) })
}

func crashKill9(t *testing.T, rounds int, serveArgs ...string) {
	srv := startServer(t, serveArgs...)
	c := connectAPI(srv)
	const clients, acksPerRound = 6, 40
	if testing.Short() {
		rounds = 1
	}

	cs := make([]*crashClient, clients)
	for i := range cs {
		cs[i] = &crashClient{id: i, resource: fmt.Sprintf("crash/res-%d", i)}
	}

	var maxBefore uint64 // the largest token received before the last kill
	for round := 1; round <= rounds; round++ {
		loadCtx, cancel := context.WithCancel(context.Background())
		var acks atomic.Int64
		enough := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for _, cl := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl.load(loadCtx, t, c, round, func() {
					if acks.Add(1) == acksPerRound {
						once.Do(func() { close(enough) })
					}
				})
			}()
		}
		select {
		case <-enough:
		case <-time.After(hangGuard):
			cancel()
			wg.Wait()
			t.Fatalf("round %d: only %d writes acknowledged", round, acks.Load())
		}
		srv.Kill()
		cancel()
		wg.Wait()

		// G1 within the history: every token of this round is above every
		// token seen before the previous kill.
		roundMax := maxBefore
		for _, cl := range cs {
			for _, tok := range cl.tokensSince(round) {
				if tok <= maxBefore {
					t.Errorf("round %d: client %d got token %d, not above %d seen before the previous kill", round, cl.id, tok, maxBefore)
				}
				roundMax = max(roundMax, tok)
			}
		}
		maxBefore = roundMax

		srv.Restart()

		// G6: every acknowledged write survived.
		ctx := context.Background()
		for _, cl := range cs {
			cl.mu.Lock()
			acked, attempted, ackedTok, ackedN := cl.acked, cl.attempted, cl.ackedTok, cl.ackedN
			cl.mu.Unlock()
			if acked == 0 {
				continue
			}
			st, err := c.read(ctx, cl.resource)
			if err != nil {
				t.Fatalf("round %d: read %s after restart: %v", round, cl.resource, err)
			}
			v, err := strconv.Atoi(string(st.GetValue()))
			if err != nil || v < acked || v > attempted {
				t.Errorf("round %d: %s = %q after restart, want a value in [%d, %d] (last acknowledged, last sent)", round, cl.resource, st.GetValue(), acked, attempted)
			}
			if st.GetLastToken() < ackedTok {
				t.Errorf("round %d: %s last_token %d after restart, below acknowledged token %d", round, cl.resource, st.GetLastToken(), ackedTok)
			}
			if st.GetVersion() < ackedN {
				t.Errorf("round %d: %s version %d after restart, below %d acknowledged writes", round, cl.resource, st.GetVersion(), ackedN)
			}
		}

		// G6 for grants: an acknowledged lease survives with its token, and
		// an acknowledged release stays released. (Leases are 10 minutes
		// long and server time stands still while the server is down.)
		for _, cl := range cs {
			cl.mu.Lock()
			lock, held, status, acquiring := cl.lock, cl.held, cl.released, cl.acquiring
			cl.mu.Unlock()
			if held == 0 {
				continue
			}
			info, err := c.get(ctx, lock)
			if err != nil {
				t.Fatalf("round %d: get %s after restart: %v", round, lock, err)
			}
			got := info.GetLease().GetToken()
			switch {
			case acquiring && got > held: // granted, reply lost
			case status == leaseHeld && got != held,
				status == leaseReleasing && got != held && got != 0,
				status == leaseReleased && got != 0:
				t.Errorf("round %d: lock %s after restart held with token %d; the client's last grant was %d (status %d, acquiring %v)", round, lock, got, held, status, acquiring)
			}
		}

		// G1 across the restart: a fresh grant is above everything seen.
		lease, err := c.acquire(ctx, fmt.Sprintf("crash/after-%d", round), "checker", time.Minute, 0)
		if err != nil {
			t.Fatalf("round %d: acquire after restart: %v", round, err)
		}
		if lease.GetToken() <= maxBefore {
			t.Errorf("round %d: first token after restart %d, not above %d seen before the kill", round, lease.GetToken(), maxBefore)
		}
		t.Logf("round %d: %d writes acknowledged, max token before kill %d, first after restart %d", round, acks.Load(), maxBefore, lease.GetToken())
	}
	srv.Stop()
}

// load acquires the client's lock for this round, writes the next value with
// the token, releases, and repeats until ctx is done. Errors (the server is
// being killed) end nothing: the loop retries until cancelled.
func (cl *crashClient) load(ctx context.Context, t *testing.T, c api, round int, acked func()) {
	lock := fmt.Sprintf("crash/lock-%d-r%d", cl.id, round)
	cl.mu.Lock()
	cl.lock, cl.held = lock, 0
	cl.mu.Unlock()
	for ctx.Err() == nil {
		cl.mu.Lock()
		cl.acquiring = true
		cl.mu.Unlock()
		lease, err := c.acquire(ctx, lock, fmt.Sprintf("client-%d", cl.id), 10*time.Minute, 10*time.Second)
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		tok := lease.GetToken()
		cl.mu.Lock()
		cl.held, cl.released, cl.acquiring = tok, leaseHeld, false
		cl.tokens = append(cl.tokens, roundToken{round, tok})
		cl.attempted++
		value := cl.attempted
		cl.mu.Unlock()

		st, err := c.write(ctx, cl.resource, tok, strconv.Itoa(value))
		if err == nil {
			if string(st.GetValue()) != strconv.Itoa(value) || st.GetLastToken() != tok {
				t.Errorf("client %d: write of %d with token %d answered value %q last_token %d", cl.id, value, tok, st.GetValue(), st.GetLastToken())
			}
			cl.mu.Lock()
			cl.acked, cl.ackedTok = value, tok
			cl.ackedN++
			cl.mu.Unlock()
			acked()
		}
		cl.mu.Lock()
		cl.released = leaseReleasing
		cl.mu.Unlock()
		if err := c.release(ctx, lock, tok); err == nil {
			cl.mu.Lock()
			cl.released = leaseReleased
			cl.mu.Unlock()
		}
	}
}

// tokensSince returns the tokens this client received in round.
func (cl *crashClient) tokensSince(round int) []uint64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []uint64
	for _, rt := range cl.tokens {
		if rt.round == round {
			out = append(out, rt.token)
		}
	}
	return out
}
