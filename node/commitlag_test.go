package node

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence"
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

// lastCharge is the last lag charged and the largest lag measured.
func (l *commitLag) lastCharge() (last lagCharge, measured time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, time.Duration(l.measured)
}

// charged is a copy of the charges kept (expired ones included until a
// stamp or peek drops them).
func (l *commitLag) charged() []lagCharge {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lagCharge(nil), l.charges.c...)
}

// checkFrontier fails unless the charges are sorted by until ascending and
// lag descending, both strictly, with positive lags.
func checkFrontier(t *testing.T, step int, c []lagCharge) {
	t.Helper()
	for i := range c {
		if c[i].lag <= 0 || i > 0 && (c[i-1].until >= c[i].until || c[i-1].lag <= c[i].lag) {
			t.Fatalf("step %d: charges out of order: %v", step, c)
		}
	}
}

// Charges expire at their until, the largest live lag is the slack, and a
// charge covered by another (earlier until, smaller lag) is not kept.
func TestLagChargesExpire(t *testing.T) {
	var s lagCharges
	s.charge(10, 5)
	s.charge(20, 3)
	s.charge(15, 4)
	s.charge(12, 2) // covered by (15, 4)
	s.charge(30, 0) // no lag: nothing
	if len(s.c) != 3 {
		t.Fatalf("charges %v, want 3 kept", s.c)
	}
	for _, step := range []struct{ now, lag, falls int64 }{
		{0, 5, 10}, {9, 5, 10}, {10, 4, 15}, {14, 4, 15}, {15, 3, 20}, {19, 3, 20}, {20, 0, math.MaxInt64},
	} {
		if lag, falls := s.at(step.now); lag != step.lag || falls != step.falls {
			t.Fatalf("at %d: lag %d until %d, want %d until %d", step.now, lag, falls, step.lag, step.falls)
		}
	}
	if len(s.c) != 0 {
		t.Fatalf("expired charges kept: %v", s.c)
	}
	s.charge(40, 1)
	s.charge(50, 2)
	s.charge(45, 6)
	s.charge(50, 6) // same until, covers both
	if len(s.c) != 1 || s.c[0] != (lagCharge{50, 6}) {
		t.Fatalf("charges %v, want only (50, 6)", s.c)
	}
}

// 5000 random charges and clock steps against a brute-force list: the slack
// is exactly the largest lag whose until is still ahead; with a small limit
// it is never less, and the set stays within the limit.
func TestLagChargesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact := lagCharges{limit: math.MaxInt}
	capped := lagCharges{limit: 4}
	var all []lagCharge
	now := int64(0)
	for step := range 5000 {
		if rng.IntN(2) == 0 {
			c := lagCharge{until: now + rng.Int64N(200), lag: rng.Int64N(50)}
			exact.charge(c.until, c.lag)
			capped.charge(c.until, c.lag)
			all = append(all, c)
		} else {
			now += rng.Int64N(10)
		}
		// want: the largest live lag; wantFalls: when the last charge of
		// that lag expires.
		want, wantFalls := int64(0), int64(math.MaxInt64)
		for _, c := range all {
			switch {
			case c.until <= now || c.lag <= 0 || c.lag < want:
			case c.lag > want || wantFalls == math.MaxInt64:
				want, wantFalls = c.lag, c.until
			default:
				wantFalls = max(wantFalls, c.until)
			}
		}
		got, falls := exact.at(now)
		if got != want || falls != wantFalls {
			t.Fatalf("step %d, clock %d: slack %d falling at %d, want %d falling at %d", step, now, got, falls, want, wantFalls)
		}
		checkFrontier(t, step, exact.c)
		if c, _ := capped.at(now); c < want || len(capped.c) > 4 {
			t.Fatalf("step %d: capped slack %d (want >= %d) from %d charges (limit 4)", step, c, want, len(capped.c))
		}
		checkFrontier(t, step, capped.c)
	}
}

// A proposal stamped while another is in flight carries at least the
// distance to the oldest one in flight; a committed proposal's lag is
// charged to later ones for its leases' TTL, and a proposal that started no
// lease or failed charges nothing.
func TestCommitLagSlack(t *testing.T) {
	c := newLeaderClock(0, 3*time.Millisecond, int64(time.Hour), true)
	l := &c.lag
	if _, s, falls := l.peek(c); s != 3*time.Millisecond || falls != int64(time.Hour+3*time.Millisecond) {
		t.Fatalf("idle slack %v falling at %v, want the starting 3ms until 1h3ms", s, time.Duration(falls))
	}
	gNow, gSlack, g := l.stamp(c)
	if gSlack != 3*time.Millisecond {
		t.Fatalf("first stamp slack %v, want 3ms", gSlack)
	}
	qNow, qSlack, q := l.stamp(c)
	if want := max(3*time.Millisecond, time.Duration(qNow-gNow)); qSlack != want {
		t.Fatalf("slack while g in flight %v, want %v", qSlack, want)
	}

	// g commits, starting a 2h lease: its lag, measured between two clock
	// readings, is charged until the lag plus 2h past g's Now.
	before := c.now()
	l.done(c, g, true, 2*time.Hour)
	after := c.now()
	last, _ := l.lastCharge()
	if last.lag < before-gNow || last.lag > after-gNow || last.until != gNow+last.lag+int64(2*time.Hour) {
		t.Fatalf("charged %v, want a lag in [%v, %v] until lag + 2h after %v", last, before-gNow, after-gNow, gNow)
	}
	want := max(time.Duration(last.lag), 3*time.Millisecond)
	// q is still in flight and now the oldest.
	rNow, rSlack, r := l.stamp(c)
	if w := max(want, time.Duration(rNow-qNow)); rSlack != w {
		t.Fatalf("slack %v, want %v", rSlack, w)
	}
	// q committed but started no lease, r failed: nothing more is charged.
	l.done(c, q, true, 0)
	l.done(c, r, false, time.Hour)
	if got, _ := l.lastCharge(); got != last || l.inFlight() != 0 {
		t.Fatalf("last charge %v (want %v), %d in flight", got, last, l.inFlight())
	}
	if _, s, _ := l.peek(c); s != want {
		t.Fatalf("idle slack %v, want %v", s, want)
	}
	if _, measured := l.lastCharge(); measured < time.Duration(last.lag) {
		t.Fatalf("measured %v, want at least %v", measured, time.Duration(last.lag))
	}
}

// The oldest flight is found whatever order proposals finish in, also across
// compactions of the queue.
func TestCommitLagOldestInFlight(t *testing.T) {
	c := newLeaderClock(0, 0, 0, false)
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
		l.done(c, open[j].ticket, false, 0)
		open = append(open[:j], open[j+1:]...)
		if got := l.inFlight(); got != len(open) {
			t.Fatalf("step %d: %d in flight, want %d", i, got, len(open))
		}
	}
}

// The leases a command started are its grant or renewal and the locks it
// handed to waiters; the longest TTL among them is charged.
func TestLongestStarted(t *testing.T) {
	lease := func(ttl time.Duration) *fence.Lease { return &fence.Lease{TTL: ttl} }
	for _, tc := range []struct {
		res  state.Result
		want time.Duration
	}{
		{state.Result{}, 0},
		{state.Result{Lease: lease(time.Second)}, time.Second},
		{state.Result{Events: []state.Event{{Err: fence.ErrBusy}, {Lease: lease(time.Minute)}, {Lease: lease(time.Second)}}}, time.Minute},
		{state.Result{Lease: lease(time.Hour), Events: []state.Event{{Lease: lease(time.Minute)}}}, time.Hour},
	} {
		if got := longestStarted(tc.res); got != tc.want {
			t.Errorf("longestStarted(%+v) = %v, want %v", tc.res, got, tc.want)
		}
	}
}

// holdApply runs cmd through n while the FSM is held, so the proposer sees
// the result only when the test lets it go: the commit lag it makes is at
// least u - stamped, and the command's Now is in [before, stamped].
func holdApply(t *testing.T, n *Node, cmd state.Command, hold time.Duration) (res state.Result, before, stamped, u int64) {
	t.Helper()
	c := n.clock.Load()
	before = c.now()
	n.fsm.mu.Lock()
	done := make(chan state.Result, 1)
	go func() {
		res, err := n.Apply(context.Background(), cmd)
		if err != nil {
			res.Err = err
		}
		done <- res
	}()
	for c.lag.inFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	stamped = c.now()
	time.Sleep(hold) // the commit lag this test makes
	u = c.now()
	n.fsm.mu.Unlock()
	res = <-done
	if res.Err != nil {
		t.Fatalf("%+v: %v", cmd, res.Err)
	}
	return res, before, stamped, u
}

// G3 from the commit, with a real node whose apply is held up: the grant
// is committed but the proposer sees it only when the test lets the FSM go,
// at leader time u. The ticker must not end the lease (and hand the lock to
// the waiter) before u + TTL, and the lag is charged to later commands.
func TestSlowCommitDelaysExpiry(t *testing.T) {
	n := openNode(t, t.TempDir())
	const ttl = 50 * time.Millisecond
	c := n.clock.Load()
	g, _, stamped, u := holdApply(t, n, acquire("slow", ttl), 100*time.Millisecond)
	if g.Lease == nil {
		t.Fatalf("grant: %+v", g)
	}
	if last, _ := c.lag.lastCharge(); last.lag < u-stamped {
		t.Fatalf("charged lag %v, want at least the %v the apply was held", time.Duration(last.lag), time.Duration(u-stamped))
	}

	w := acquire("slow", time.Hour)
	w.Wait = time.Hour
	res := mustApply(t, n, w)
	if res.Lease == nil || res.Lease.Token != g.Lease.Token+1 {
		t.Fatalf("waiter got %+v", res)
	}
	var wEnd int64
	var pending bool
	n.fsm.read(func(m *state.Machine) { wEnd, pending = m.NextDeadline() })
	if !pending {
		t.Fatal("no deadline pending although the waiter holds the lock")
	}
	if start := wEnd - int64(time.Hour); start < u+int64(ttl) {
		t.Fatalf("lease handed on at %v, before TTL %v after the grant was seen committed (%v)", time.Duration(start), ttl, time.Duration(u))
	}
}

// The slack decays: a held-up grant raises it by its lag, which stays
// charged until the lease's life plus the lag has passed on the leader
// clock; then, with nothing in flight, the slack is back to zero.
func TestSlackDecaysAfterLease(t *testing.T) {
	n := openNode(t, t.TempDir())
	const ttl = 50 * time.Millisecond
	c := n.clock.Load()
	if _, s, _ := c.lag.peek(c); s != 0 {
		t.Fatalf("slack of a new store %v, want 0", s)
	}
	_, before, stamped, u := holdApply(t, n, acquire("slow", ttl), 100*time.Millisecond)
	last, _ := c.lag.lastCharge()
	// Status reports the slack a command stamped now carries: while the
	// charge runs, at least its lag (it only falls once the clock passed it).
	if st := n.Status(); st.ServerTime < last.until && st.Slack < time.Duration(last.lag) {
		t.Fatalf("Status at %v: slack %v, want >= %v until %v", time.Duration(st.ServerTime), st.Slack, time.Duration(last.lag), time.Duration(last.until))
	}
	if now := last.until - last.lag - int64(ttl); last.lag < u-stamped || now < before || now > stamped {
		t.Fatalf("charged %v: want a lag >= %v until lag + TTL after a Now in [%v, %v]", last, u-stamped, before, stamped)
	}
	// Until the charge's end the slack carries it; at or after it, it is
	// gone. Only clock readings decide which case applies.
	for {
		now, s, falls := c.lag.peek(c)
		if now >= last.until {
			break
		}
		if s < time.Duration(last.lag) || falls != last.until {
			t.Fatalf("at %v: slack %v falling at %v; want >= %v until %v", time.Duration(now), s, time.Duration(falls), time.Duration(last.lag), time.Duration(last.until))
		}
		time.Sleep(time.Millisecond)
	}
	// The ticker expires the lease (a tick starts no lease: nothing
	// charged); once it is done, nothing is left.
	for {
		var pending bool
		n.fsm.read(func(m *state.Machine) { _, pending = m.NextDeadline() })
		if !pending && c.lag.inFlight() == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, s, falls := c.lag.peek(c); s != 0 || falls != math.MaxInt64 || len(c.lag.charged()) != 0 {
		t.Fatalf("slack %v falling at %v, charges %v; want 0 and none", s, falls, c.lag.charged())
	}
	if got, _ := c.lag.lastCharge(); got != last {
		t.Fatalf("the tick charged %v", got)
	}
	if st := n.Status(); !st.InOffice || st.Slack != 0 {
		t.Fatalf("Status: in office %v, slack %v; want in office with slack 0", st.InOffice, st.Slack)
	}
}

// A renewal's lag is charged for the renewed lease's new TTL.
func TestRenewChargesNewTTL(t *testing.T) {
	n := openNode(t, t.TempDir())
	c := n.clock.Load()
	g := mustApply(t, n, acquire("r", time.Second)).Lease
	const ttl = 3 * time.Hour
	res, before, stamped, u := holdApply(t, n, state.Command{Op: state.OpRenew, Name: "r", Token: g.Token, TTL: ttl}, 20*time.Millisecond)
	if res.Lease == nil || res.Lease.TTL != ttl {
		t.Fatalf("renew: %+v", res)
	}
	last, _ := c.lag.lastCharge()
	if now := last.until - last.lag - int64(ttl); last.lag < u-stamped || now < before || now > stamped {
		t.Fatalf("charged %v: want a lag >= %v until lag + %v after a Now in [%v, %v]", last, u-stamped, ttl, before, stamped)
	}
}

// A new term charges the machine's MaxSlack until the latest expiry of the
// leases it holds plus MaxSlack; with no lease held it charges nothing.
func TestNewTermChargesMaxSlackForHeldLeases(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	a, _, _, _ := holdApply(t, n, acquire("a", time.Hour), 20*time.Millisecond)
	b := mustApply(t, n, acquire("b", 2*time.Hour)) // carries the lag as Slack
	var maxSlack time.Duration
	var latest int64
	var held bool
	n.fsm.read(func(m *state.Machine) { maxSlack = m.MaxSlack(); latest, held = m.LatestExpiry() })
	if !held {
		t.Fatal("LatestExpiry says no lock is held")
	}
	if maxSlack < 20*time.Millisecond {
		t.Fatalf("MaxSlack %v, want at least the 20ms the apply was held", maxSlack)
	}
	n.Close()

	n = openNode(t, dir)
	c := n.clock.Load()
	if got, want := c.lag.charged(), (lagCharge{latest + int64(maxSlack), int64(maxSlack)}); len(got) != 1 || got[0] != want {
		t.Fatalf("new term charges %v, want only %v", got, want)
	}
	if _, s, _ := c.lag.peek(c); s < maxSlack {
		t.Fatalf("slack %v, want at least MaxSlack %v", s, maxSlack)
	}
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "a", Token: a.Lease.Token})
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "b", Token: b.Lease.Token})
	n.Close()

	n = openNode(t, dir)
	c = n.clock.Load()
	if got := c.lag.charged(); len(got) != 0 {
		t.Fatalf("term with no lease held charges %v, want none", got)
	}
	if _, s, _ := c.lag.peek(c); s != 0 {
		t.Fatalf("slack %v with no lease held and nothing in flight, want 0", s)
	}
}

// Beyond its limit the set merges the two neighbours whose lags are
// closest (the earliest such pair on a tie) into their later until and
// larger lag, and only beyond it: a set at its limit is kept as it is.
// Merging any pair would stay safe; this pins which precision is kept.
func TestLagChargesMergeClosestNeighbours(t *testing.T) {
	for _, tc := range []struct {
		name    string
		charges []lagCharge
		want    []lagCharge
	}{
		{"at the limit: no merge",
			[]lagCharge{{10, 100}, {20, 60}, {30, 50}},
			[]lagCharge{{10, 100}, {20, 60}, {30, 50}}},
		{"closest lags merge",
			[]lagCharge{{10, 100}, {20, 60}, {30, 50}, {40, 10}},
			[]lagCharge{{10, 100}, {30, 60}, {40, 10}}},
		{"closest are the last pair",
			[]lagCharge{{10, 100}, {20, 50}, {30, 20}, {40, 15}},
			[]lagCharge{{10, 100}, {20, 50}, {40, 20}}},
		{"a tie: the earliest pair",
			[]lagCharge{{10, 100}, {20, 80}, {30, 60}, {40, 10}},
			[]lagCharge{{20, 100}, {30, 60}, {40, 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := lagCharges{limit: 3}
			for _, c := range tc.charges {
				s.charge(c.until, c.lag)
			}
			if !slices.Equal(s.c, tc.want) {
				t.Fatalf("charges %v, want %v", s.c, tc.want)
			}
		})
	}
}
