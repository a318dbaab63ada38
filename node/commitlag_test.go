package node

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// inFlight is how many stamps are not done yet.
func (l *commitLag) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.flight[l.head:] {
		if !f.done {
			n++
		}
	}
	return n
}

func (l *commitLag) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.maxLag)
}

// A proposal stamped while another is in flight carries at least the
// distance to the oldest one in flight, and a committed proposal's lag is
// charged to every later one.
func TestCommitLagSlack(t *testing.T) {
	c := newLeaderClock(0, 3*time.Millisecond)
	l := &c.lag
	if _, s := l.peek(c); s != 3*time.Millisecond {
		t.Fatalf("idle slack %v, want the starting max slack 3ms", s)
	}
	gNow, gSlack, g := l.stamp(c)
	if gSlack != 3*time.Millisecond {
		t.Fatalf("first stamp slack %v, want 3ms", gSlack)
	}
	qNow, qSlack, q := l.stamp(c)
	if want := max(3*time.Millisecond, time.Duration(qNow-gNow)); qSlack != want {
		t.Fatalf("slack while g in flight %v, want %v", qSlack, want)
	}

	// g commits: its lag, measured between two clock readings, is charged.
	before := c.now()
	l.done(c, g, true)
	after := c.now()
	if m := int64(l.max()); m < max(before-gNow, int64(3*time.Millisecond)) || m > max(after-gNow, int64(3*time.Millisecond)) {
		t.Fatalf("max lag %v, want in [%v, %v]", l.max(), time.Duration(before-gNow), time.Duration(after-gNow))
	}
	// q is still in flight and now the oldest.
	rNow, rSlack, r := l.stamp(c)
	if want := max(l.max(), time.Duration(rNow-qNow)); rSlack != want {
		t.Fatalf("slack %v, want %v", rSlack, want)
	}
	// A failed proposal is dropped without charging its lag.
	m := l.max()
	l.done(c, q, false)
	l.done(c, r, false)
	if l.max() != m || l.inFlight() != 0 {
		t.Fatalf("max lag %v (want %v), %d in flight", l.max(), m, l.inFlight())
	}
	if _, s := l.peek(c); s != m {
		t.Fatalf("idle slack %v, want the max lag %v", s, m)
	}
}

// The oldest flight is found whatever order proposals finish in, also across
// compactions of the queue.
func TestCommitLagOldestInFlight(t *testing.T) {
	c := newLeaderClock(0, 0)
	l := &c.lag
	rng := rand.New(rand.NewPCG(1, 2))
	type st struct {
		now    int64
		ticket uint64
	}
	var open []st
	for i := range 5000 {
		if len(open) == 0 || rng.IntN(3) != 0 && len(open) < 300 {
			now, slack, tk := l.stamp(c)
			want := time.Duration(0)
			if len(open) > 0 {
				oldest := open[0].now
				for _, o := range open {
					oldest = min(oldest, o.now)
				}
				want = time.Duration(now - oldest)
			}
			if slack != want {
				t.Fatalf("step %d: slack %v, want %v (%d in flight)", i, slack, want, len(open))
			}
			open = append(open, st{now, tk})
			continue
		}
		j := rng.IntN(len(open))
		l.done(c, open[j].ticket, false)
		open = append(open[:j], open[j+1:]...)
		if got := l.inFlight(); got != len(open) {
			t.Fatalf("step %d: %d in flight, want %d", i, got, len(open))
		}
	}
}

// G3 from the commit, with a real node whose apply is held up: the grant
// is committed but the proposer sees it only when the test lets the FSM go,
// at leader time u. The ticker must not end the lease (and hand the lock to
// the waiter) before u + TTL, and the lag is charged to later commands.
func TestSlowCommitDelaysExpiry(t *testing.T) {
	n := openNode(t, t.TempDir())
	const ttl = 50 * time.Millisecond
	c := n.clock.Load()

	n.fsm.mu.Lock()
	done := make(chan state.Result, 1)
	go func() {
		res, _ := n.Apply(context.Background(), acquire("slow", ttl))
		done <- res
	}()
	for c.lag.inFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	stamped := c.now()                 // at or after the grant's Now
	time.Sleep(100 * time.Millisecond) // the commit lag this test makes
	u := c.now()                       // at or before the proposer sees the grant
	n.fsm.mu.Unlock()
	g := <-done
	if g.Err != nil || g.Lease == nil {
		t.Fatalf("grant: %+v", g)
	}
	if lag := c.lag.max(); lag < time.Duration(u-stamped) {
		t.Fatalf("max lag %v, want at least the %v the apply was held", lag, time.Duration(u-stamped))
	}

	w := acquire("slow", time.Hour)
	w.Wait = time.Hour
	res := mustApply(t, n, w)
	if res.Lease == nil || res.Lease.Token != g.Lease.Token+1 {
		t.Fatalf("waiter got %+v", res)
	}
	var wEnd int64
	var maxSlack time.Duration
	n.fsm.read(func(m *state.Machine) { wEnd, _ = m.NextDeadline(); maxSlack = m.MaxSlack() })
	if start := wEnd - int64(time.Hour); start < u+int64(ttl) {
		t.Fatalf("lease handed on at %v, before TTL %v after the grant was seen committed (%v)", time.Duration(start), ttl, time.Duration(u))
	}
	if maxSlack < time.Duration(u-stamped) {
		t.Fatalf("machine MaxSlack %v, want at least %v", maxSlack, time.Duration(u-stamped))
	}
}

// Across a restart the new term starts its commit lag at the machine's
// MaxSlack.
func TestMaxSlackSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	c := n.clock.Load()
	n.fsm.mu.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Apply(context.Background(), acquire("a", time.Hour))
	}()
	for c.lag.inFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	n.fsm.mu.Unlock()
	<-done
	mustApply(t, n, acquire("b", time.Hour)) // carries the lag as Slack
	var want time.Duration
	n.fsm.read(func(m *state.Machine) { want = m.MaxSlack() })
	if want < 20*time.Millisecond {
		t.Fatalf("MaxSlack %v, want at least the 20ms the apply was held", want)
	}
	n.Close()

	n = openNode(t, dir)
	if got := n.clock.Load().lag.max(); got != want {
		t.Fatalf("new term starts with max lag %v, want the machine's MaxSlack %v", got, want)
	}
}
