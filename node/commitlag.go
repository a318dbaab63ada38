package node

import (
	"sync"
	"time"
)

// commitLag is the slack bookkeeping of one term of office (doc.go, Expiry
// and G3): the largest commit lag seen and the Now of every proposal still in
// flight.
//
// Contract: stamp reads the leader clock and registers the proposal under the
// same mutex, so stamps are in Now order and the oldest flight is the first
// one not done. Every stamp must be followed by exactly one done.
type commitLag struct {
	mu     sync.Mutex
	maxLag int64    // ns; never decreases within the term
	first  uint64   // ticket of flights[head]
	head   int      // flights[:head] are done and dropped
	flight []flight // in stamp (= Now) order
}

type flight struct {
	now  int64
	done bool
}

// stamp reads the clock and returns Now for a new proposal, the slack it
// must carry — max(maxLag, Now - oldest in-flight Now) — and the ticket to
// pass to done.
func (l *commitLag) stamp(c *leaderClock) (now int64, slack time.Duration, ticket uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, slack = l.slackAt(c)
	ticket = l.first + uint64(len(l.flight)-l.head)
	l.flight = append(l.flight, flight{now: now})
	return now, slack, ticket
}

// peek is stamp without a proposal: what a command stamped now would carry.
func (l *commitLag) peek(c *leaderClock) (now int64, slack time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slackAt(c)
}

func (l *commitLag) slackAt(c *leaderClock) (int64, time.Duration) {
	now := c.now()
	slack := l.maxLag
	if l.head < len(l.flight) {
		slack = max(slack, now-l.flight[l.head].now)
	}
	return now, time.Duration(slack)
}

// done ends the flight of ticket. committed: raft returned its applied
// result, so its lag (clock now - its Now) is charged; a proposal that failed
// (not enqueued, not leader) is only dropped.
func (l *commitLag) done(c *leaderClock, ticket uint64, committed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := &l.flight[l.head+int(ticket-l.first)]
	f.done = true
	if committed {
		l.maxLag = max(l.maxLag, c.now()-f.now)
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
