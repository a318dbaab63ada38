package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

func openSession(t testing.TB, n *Node, ttl time.Duration) uint64 {
	t.Helper()
	res, err := n.Apply(context.Background(), state.Command{Op: state.OpSessionOpen, TTL: ttl})
	if err != nil || res.Err != nil || res.Session == nil {
		t.Fatalf("open session: %+v, %v", res, err)
	}
	return res.Session.ID
}

// untilWaiting waits until k acquires are queued in the machine (a hang
// guard, not a timing assertion).
func untilWaiting(t testing.TB, n *Node, k int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var w int
		n.fsm.read(func(m *state.Machine) { w = m.Waiting() })
		if w >= k {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acquires queued, want %d", w, k)
		}
		time.Sleep(time.Millisecond)
	}
}

// A queued session-bound acquire (Seq, no RequestID) waits under
// SessionRequestID and is woken by the grant when the holder releases; its
// lease is bound to the session.
func TestSessionWaiterWokenByGrant(t *testing.T) {
	n := openNode(t, t.TempDir())
	held := mustApply(t, n, acquire("l", time.Hour)).Lease
	s := openSession(t, n, time.Minute)
	got := applyAsync(n, context.Background(), state.Command{Op: state.OpAcquire, Name: "l", Owner: "s", Session: s, Seq: 1, Wait: time.Minute})
	untilWaiting(t, n, 1)
	if !n.wait.has(state.SessionRequestID(s, 1)) {
		t.Fatal("the session acquire's waiter is not registered under SessionRequestID(session, seq)")
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "l", Token: held.Token})
	a := recv(t, got)
	if a.err != nil || a.res.Err != nil || a.res.Lease == nil {
		t.Fatalf("queued session acquire after the release = %+v, %v; want the lease", a.res, a.err)
	}
	if a.res.Lease.TTL != time.Minute {
		t.Fatalf("session-bound lease TTL = %s, want the session's 1m", a.res.Lease.TTL)
	}
	var info state.SessionInfo
	n.fsm.read(func(m *state.Machine) { info, _ = m.Session(s, 0) })
	if info.Leases != 1 {
		t.Fatalf("session holds %d leases, want 1", info.Leases)
	}
}

// A session's queued acquires end with it: closed, or expired once its
// keepalives stop; each waiting caller gets *fence.SessionExpiredError.
func TestSessionWaiterEndsWithSession(t *testing.T) {
	for _, how := range []string{"close", "expiry"} {
		t.Run(how, func(t *testing.T) {
			n := openNode(t, t.TempDir())
			mustApply(t, n, acquire("l", time.Hour))
			ttl := time.Minute
			if how == "expiry" {
				ttl = 300 * time.Millisecond
			}
			s := openSession(t, n, ttl)
			got := applyAsync(n, context.Background(), state.Command{Op: state.OpAcquire, Name: "l", Owner: "s", Session: s, Seq: 1, Wait: time.Hour})
			untilWaiting(t, n, 1)
			if how == "close" {
				mustApply(t, n, state.Command{Op: state.OpSessionClose, Session: s})
			}
			a := recv(t, got)
			var se *fence.SessionExpiredError
			if a.err != nil || !errors.As(a.res.Err, &se) || se.Session != s || !errors.Is(a.res.Err, fence.ErrSessionExpired) {
				t.Fatalf("session acquire waiting when its session ended (%s) = %+v, %v; want SESSION_EXPIRED for session %d", how, a.res, a.err, s)
			}
			if c := n.wait.count(); c != 0 {
				t.Fatalf("%d waiters left registered", c)
			}
		})
	}
}

// Exactly-once through the node: the same Session/Seq submitted twice (a
// client retrying after an unknown outcome), one after the other or at
// once (in one group), is applied once; the other gets the saved result,
// Replayed.
func TestSessionSeqRetryReplayed(t *testing.T) {
	n := openNode(t, t.TempDir())
	tok := mustApply(t, n, acquire("w", time.Hour)).Lease.Token
	s := openSession(t, n, time.Minute)
	add := state.Command{Op: state.OpAdd, Name: "counter", Token: tok, Delta: 5, Session: s, Seq: 1}
	first := mustApply(t, n, add)
	second := mustApply(t, n, add)
	if first.Replayed || !second.Replayed || first.AddValue != 5 || second.AddValue != 5 {
		t.Fatalf("add then its retry = %+v / %+v; want 5 applied once, the retry Replayed", first, second)
	}
	acq := state.Command{Op: state.OpAcquire, Name: "sl", Owner: "s", Session: s, Seq: 2, Ack: 2}
	a1 := mustApply(t, n, acq)
	a2 := mustApply(t, n, acq)
	if a1.Lease == nil || a2.Lease == nil || a2.Lease.Token != a1.Lease.Token || !a2.Replayed {
		t.Fatalf("acquire then its retry = %+v / %+v; want the same lease, Replayed", a1, a2)
	}

	// At once: both in flight together.
	for seq := uint64(3); seq < 23; seq++ {
		cmd := state.Command{Op: state.OpAdd, Name: "counter", Token: tok, Delta: 1, Session: s, Seq: seq, Ack: seq}
		x, y := applyAsync(n, context.Background(), cmd), applyAsync(n, context.Background(), cmd)
		rx, ry := recv(t, x), recv(t, y)
		if rx.err != nil || ry.err != nil || rx.res.Err != nil || ry.res.Err != nil {
			t.Fatalf("seq %d twice at once: %+v / %+v", seq, rx, ry)
		}
		if rx.res.Replayed == ry.res.Replayed || rx.res.AddValue != ry.res.AddValue {
			t.Fatalf("seq %d twice at once: %+v / %+v; want one applied, one Replayed, the same value", seq, rx.res, ry.res)
		}
	}
	rs, err := n.Resource(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	if string(rs.Value) != "25" {
		t.Fatalf("counter = %q, want 25 (5 + 20 adds, each once)", rs.Value)
	}
}

// A retry of a queued session acquire (same seq) while the first caller
// still waits: both are answered with the grant.
func TestSessionQueuedRetryBothWoken(t *testing.T) {
	n := openNode(t, t.TempDir())
	held := mustApply(t, n, acquire("l", time.Hour)).Lease
	s := openSession(t, n, time.Minute)
	cmd := state.Command{Op: state.OpAcquire, Name: "l", Owner: "s", Session: s, Seq: 1, Wait: time.Minute}
	first := applyAsync(n, context.Background(), cmd)
	untilWaiting(t, n, 1)
	retry := applyAsync(n, context.Background(), state.Command{Op: state.OpAcquire, Name: "l", Owner: "s", Session: s, Seq: 1}) // Wait 0: a retry
	for n.wait.count() < 2 {
		time.Sleep(time.Millisecond)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "l", Token: held.Token})
	a, b := recv(t, first), recv(t, retry)
	if a.err != nil || b.err != nil || a.res.Lease == nil || b.res.Lease == nil || a.res.Lease.Token != b.res.Lease.Token {
		t.Fatalf("first attempt %+v %v, retry %+v %v; want both told the same grant", a.res, a.err, b.res, b.err)
	}
}

// scaleN is the number of leases of the session-end tests:
// FENCE_SESSION_SCALE, default 2,000.
func scaleN(t testing.TB) int {
	if v := os.Getenv("FENCE_SESSION_SCALE"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return 2000
}

// Expiry at scale: a session holds N leases, a caller waits on each lock;
// the session ends (closed, or expired once keepalives stop) and every
// waiter is granted its lock, in one apply (one command: no proposal per
// lease), each told by its own Event.
func TestSessionEndHandsEveryLockOn(t *testing.T) {
	for _, how := range []string{"close", "expiry"} {
		t.Run(how, func(t *testing.T) {
			k := scaleN(t)
			n := openNode(t, t.TempDir())
			// The session outlives any setup (a 2s session kept alive
			// every 250ms expired during a slow setup); for "expiry" its
			// TTL is cut to the least once every waiter is queued.
			s := openSession(t, n, time.Hour)
			var wg sync.WaitGroup
			errs := make(chan error, k)
			for i := range k {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := n.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("l-%d", i), Owner: "s", Session: s})
					if err == nil {
						err = res.Err
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("session acquire: %v", err)
			}
			results := make(chan applied, k)
			for i := range k {
				go func() {
					res, err := n.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("l-%d", i), Owner: "w", TTL: time.Hour,
						Wait: time.Hour, RequestID: fmt.Sprintf("w-%d", i)})
					results <- applied{res, err}
				}()
			}
			untilWaiting(t, n, k)
			commands0 := n.props.commands.Load()
			before := n.LastToken()
			if how == "close" {
				mustApply(t, n, state.Command{Op: state.OpSessionClose, Session: s})
			} else {
				mustApply(t, n, state.Command{Op: state.OpSessionKeepAlive, Session: s, TTL: fence.MinTTL})
				commands0++ // the keepalive that cut the TTL; the expiry is the ticker's
			}
			tokens := map[fence.Token]bool{}
			for range k {
				var a applied
				select {
				case a = <-results:
				case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
					t.Fatalf("a waiter was never handed its lock after the session ended (%s)", how)
				}
				if a.err != nil || a.res.Err != nil || a.res.Lease == nil {
					t.Fatalf("waiter after the session ended: %+v, %v; want its grant", a.res, a.err)
				}
				tokens[a.res.Lease.Token] = true
			}
			if len(tokens) != k || n.LastToken() != before+fence.Token(k) {
				t.Fatalf("%d distinct grants, last token %d (was %d); want %d new tokens", len(tokens), n.LastToken(), before, k)
			}
			// One command ended the session and handed every lock on:
			// the close, or a tick (the ticker may propose one more that
			// came a little early, whatever k is); no proposal per lease.
			want := uint64(1)
			if how == "expiry" {
				want = 2
			}
			if got := n.props.commands.Load() - commands0; got > want {
				t.Fatalf("%d commands proposed from the session's end to the last grant of %d, want at most %d", got, k, want)
			}
		})
	}
}

// A session-bound acquire whose caller goes away is withdrawn like any
// other (the node cancels it under SessionRequestID); the lock stays free
// for the next.
func TestSessionWaiterCancelWithdraws(t *testing.T) {
	n := openNode(t, t.TempDir())
	held := mustApply(t, n, acquire("l", time.Hour)).Lease
	s := openSession(t, n, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	got := applyAsync(n, ctx, state.Command{Op: state.OpAcquire, Name: "l", Owner: "s", Session: s, Seq: 1, Wait: time.Hour})
	untilWaiting(t, n, 1)
	cancel()
	if a := recv(t, got); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled session acquire = %+v, %v; want context.Canceled", a.res, a.err)
	}
	var w int // the cancel was applied before Apply returned
	n.fsm.read(func(m *state.Machine) { w = m.Waiting() })
	if w != 0 {
		t.Fatalf("%d acquires still queued after the caller went away, want 0", w)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "l", Token: held.Token})
	li, err := n.Lock(context.Background(), "l")
	if err != nil || li.Lease != nil {
		t.Fatalf("lock after the release = %+v, %v; want free (the withdrawn session acquire not granted)", li, err)
	}
}
