package node

import (
	"math"
	"sort"
	"sync"
	"time"
)

// commitLag is the slack bookkeeping of one term of office (doc.go, Expiry
// and G3): the commit lags still charged, and the Now of every proposal in
// flight.
//
// Contract: stamp reads the leader clock and registers the proposal under the
// same mutex, so stamps are in Now order and the oldest flight is the first
// one not done. Every stamp must be followed by exactly one done, which
// charges the proposal's lag, under the same mutex, for as long as the
// leases it started need it.
type commitLag struct {
	mu       sync.Mutex
	charges  lagCharges
	measured int64     // largest lag of a committed command this term (a metric: not charged by itself)
	last     lagCharge // the last lag charged (a metric)
	first    uint64    // ticket of flights[head]
	head     int       // flights[:head] are done and dropped
	flight   []flight  // in stamp (= Now) order
}

type flight struct {
	now  int64
	done bool
}

// stamp reads the clock and returns Now for a new proposal, the slack it
// must carry — max(largest lag still charged, Now - oldest in-flight Now) —
// and the ticket to pass to done.
func (l *commitLag) stamp(c *leaderClock) (now int64, slack time.Duration, ticket uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, slack, _ = l.slackAt(c)
	ticket = l.first + uint64(len(l.flight)-l.head)
	l.flight = append(l.flight, flight{now: now})
	return now, slack, ticket
}

// peek is stamp without a proposal: what a command stamped now would carry,
// and falls, the clock at which the charged part of that slack next drops
// (math.MaxInt64 when no lag is charged).
func (l *commitLag) peek(c *leaderClock) (now int64, slack time.Duration, falls int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slackAt(c)
}

func (l *commitLag) slackAt(c *leaderClock) (int64, time.Duration, int64) {
	now := c.now()
	slack, falls := l.charges.at(now)
	if l.head < len(l.flight) {
		slack = max(slack, now-l.flight[l.head].now)
	}
	return now, time.Duration(slack), falls
}

// done ends the flight of ticket. committed: raft returned the applied
// result, whose lag is clock now - its Now; a proposal that failed (not
// enqueued, not leader) is only dropped. longest is the longest TTL among
// the leases the command started (its grant or renewal, and the locks it
// handed to waiters), 0 if none. The lag is charged until clock now +
// longest: a later command stamped before then carries it, and one stamped
// after needs it no more (doc.go, G3).
func (l *commitLag) done(c *leaderClock, ticket uint64, committed bool, longest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := &l.flight[l.head+int(ticket-l.first)]
	f.done = true
	if committed {
		seen := c.now()
		lag := seen - f.now
		l.measured = max(l.measured, lag)
		if longest > 0 {
			l.last = lagCharge{until: seen + int64(longest), lag: lag}
			l.charges.charge(l.last.until, l.last.lag)
		}
	}
	for l.head < len(l.flight) && l.flight[l.head].done {
		l.head++
		l.first++
	}
	switch {
	case l.head == len(l.flight):
		l.flight, l.head = l.flight[:0], 0
	case l.head >= 64 && 2*l.head >= len(l.flight):
		n := copy(l.flight, l.flight[l.head:])
		l.flight, l.head = l.flight[:n], 0
	}
}

// lagCharge: commands stamped before clock until must carry slack >= lag.
type lagCharge struct {
	until int64
	lag   int64
}

// defaultChargeLimit bounds how many charges are kept apart.
const defaultChargeLimit = 64

// lagCharges is the set of charged lags, kept as its Pareto frontier: a
// charge with both an earlier until and a smaller lag than another never
// decides the slack and is dropped. So the charges are sorted by until
// ascending and by lag descending, the largest live lag is the first one not
// yet expired, and charging at the latest until (the usual case: TTLs alike)
// is amortized O(1). Beyond limit charges, the two neighbours whose lags are
// closest merge into one with the later until and the larger lag: slack only
// grows (stays safe) and the set stays small whatever the TTLs.
type lagCharges struct {
	c     []lagCharge
	limit int // 0: defaultChargeLimit
}

// at drops the charges expired at clock now (until <= now) and returns the
// largest lag still charged (0 if none) and the until at which it expires
// (math.MaxInt64 if none).
func (s *lagCharges) at(now int64) (lag, falls int64) {
	i := 0
	for i < len(s.c) && s.c[i].until <= now {
		i++
	}
	if i > 0 {
		s.c = s.c[:copy(s.c, s.c[i:])]
	}
	if len(s.c) == 0 {
		return 0, math.MaxInt64
	}
	return s.c[0].lag, s.c[0].until
}

// charge adds lag until until.
func (s *lagCharges) charge(until, lag int64) {
	if lag <= 0 {
		return
	}
	// i: first charge lasting at least as long; if it is also at least as
	// large, the new charge is covered.
	i := sort.Search(len(s.c), func(k int) bool { return s.c[k].until >= until })
	if i < len(s.c) && s.c[i].lag >= lag {
		return
	}
	end := i // s.c[j:end] are covered by the new charge
	if i < len(s.c) && s.c[i].until == until {
		end++
	}
	j := sort.Search(i, func(k int) bool { return s.c[k].lag <= lag })
	switch removed := end - j; {
	case removed == 0:
		s.c = append(s.c, lagCharge{})
		copy(s.c[j+1:], s.c[j:])
	case removed > 1:
		s.c = append(s.c[:j+1], s.c[end:]...)
	}
	s.c[j] = lagCharge{until: until, lag: lag}
	limit := s.limit
	if limit <= 0 {
		limit = defaultChargeLimit
	}
	if len(s.c) > limit {
		s.merge()
	}
}

// merge joins the neighbours k, k+1 with the smallest lag difference into
// (their later until, their larger lag).
func (s *lagCharges) merge() {
	k := 0
	for i := 1; i+1 < len(s.c); i++ {
		if s.c[i].lag-s.c[i+1].lag < s.c[k].lag-s.c[k+1].lag {
			k = i
		}
	}
	s.c[k].until = s.c[k+1].until
	s.c = append(s.c[:k+1], s.c[k+2:]...)
}
