package state

import (
	"container/list"
	"time"

	"github.com/fenceworks/fence"
)

// How a lock's last lease ended.
type leaseEnd uint8

const (
	endNone     leaseEnd = iota // never granted, or still held
	endReleased                 // released by its holder (or a cancelled wait)
	endExpired                  // its TTL ran out in server time
)

// lockEntry is one lock: its holder, its FIFO waiters, and what is needed to
// tell a stale token from an expired or a foreign one.
type lockEntry struct {
	name       string
	holder     *grant      // nil when free
	queue      []*request  // waiters, arrival order
	lastToken  fence.Token // token of the last grant of this lock
	lastOwner  string      // owner of the last grant
	lastEnd    leaseEnd    // how the last grant ended (endNone while held)
	freedAt    int64       // server time the lock last became free
	delayUntil int64       // lock-delay end after an expiry; 0 when none

	heapIndex int // position in deadlines, -1 when not there
	deadline  int64
	idleElem  *list.Element // position in idle, nil when not idle
	idleSince int64         // server time it became idle
}

// grant is the current lease of a lock.
type grant struct {
	owner     string
	token     fence.Token
	ttl       time.Duration
	expiresAt int64
	lockDelay time.Duration
	req       *request // the acquire's request_id, nil if none
	// sess is the session the lease is bound to (nil: a standalone lease).
	// A bound lease has no TTL or expiry of its own (ttl and expiresAt are
	// 0): it ends when its session does, and the lock's deadline heap does
	// not hold it (the session heap does).
	sess *session
	// principal acquired it (auth.go): only it (or an admin) may renew or
	// release it.
	principal string
	// key signs it (keys.go): the signing key when it was granted or last
	// renewed; nil if there was none.
	key *signingKey
}

// end is the server time the lease ends at (its session's expiry for a
// bound lease).
func (g *grant) end() int64 {
	if g.sess != nil {
		return g.sess.expiresAt
	}
	return g.expiresAt
}

// lease describes g at server time now. Remaining is floored at 0: a lease
// still held as of the decision time may be past its end as of now. A
// session-bound lease reports its session's TTL and remaining time.
func (g *grant) lease(name string, now int64) *fence.Lease {
	ttl := g.ttl
	if g.sess != nil {
		ttl = g.sess.ttl
	}
	return &fence.Lease{Name: name, Owner: g.owner, Token: g.token, TTL: ttl, Remaining: time.Duration(max(g.end()-now, 0))}
}

// lockFor returns the lock named name, creating a free one.
func (m *impl) lockFor(name string) *lockEntry {
	l := m.byName[name]
	if l == nil {
		l = &lockEntry{name: name, heapIndex: -1}
		m.byName[name] = l
	}
	return l
}

// settle brings lock l up to server time: an expired lease ends (starting its
// lock-delay), the lock passes to waiters in arrival order, and waits that ran
// out end. Outcomes for waiters are appended to events in FIFO order.
func (m *impl) settle(l *lockEntry, events *[]Event) {
	now := m.expiryTime()
	// A session-bound lease ends only with its session (settleSessions).
	if l.holder != nil && l.holder.sess == nil && l.holder.expiresAt <= now {
		g := l.holder
		m.endLease(l, endExpired, g.expiresAt)
		if g.lockDelay > 0 {
			l.delayUntil = g.expiresAt + int64(g.lockDelay)
		}
	}
	// handOn needs the delay's end: a waiter whose wait ran out before it
	// never had the chance. A grant clears it; otherwise clear it once passed.
	m.handOn(l, events)
	if l.holder == nil && l.delayUntil != 0 && l.delayUntil <= now {
		l.delayUntil = 0
	}
	m.expireWaits(l, events)
}

// handOn grants a free lock to its first waiter whose wait had not run out
// when the lock became available. The waiters before it had run out.
func (m *impl) handOn(l *lockEntry, events *[]Event) {
	for l.holder == nil && len(l.queue) > 0 {
		available := max(l.freedAt, l.delayUntil)
		if available > m.expiryTime() {
			return
		}
		w := l.queue[0]
		l.queue = l.queue[1:]
		m.dropWaiterCount(w)
		if w.sess != nil && w.sess.expiresAt <= m.expiryTime() {
			// Its session is past its expiry (it ends later in this
			// apply): it ends with it, and is not granted.
			m.noteLeft(l, w)
			m.sessionEndedWait(w, events)
			continue
		}
		if w.deadline <= available {
			m.noteLeft(l, w)
			m.waitRanOut(l, w, events)
			continue
		}
		if err := m.admitToken(); err != nil {
			m.noteLeft(l, w)
			m.refuseWait(w, err, events)
			continue
		}
		g := m.grantTo(l, w.owner, w.principal, w.ttl, w.lockDelay, w, w.sess)
		*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Lease: g.lease(l.name, m.clock)})
	}
	if len(l.queue) == 0 {
		l.queue = nil
	}
}

// expireWaits ends the waits that ran out by server time, in arrival order.
func (m *impl) expireWaits(l *lockEntry, events *[]Event) {
	// Waiters leave in arrival order; each change reports the queue
	// length after it.
	kept := l.queue[:0]
	for i, w := range l.queue {
		if w.deadline <= m.expiryTime() {
			m.dropWaiterCount(w)
			m.noteWaiter(ChangeLeftQueue, l, w, len(kept)+len(l.queue)-i-1)
			m.waitRanOut(l, w, events)
			continue
		}
		kept = append(kept, w)
	}
	clear(l.queue[len(kept):])
	l.queue = kept
	if len(l.queue) == 0 {
		l.queue = nil
	}
}

// refuseWait ends w (taken off its queue) with err instead of a grant: there
// is no token left to grant it with. Like a cancelled wait it is not
// remembered (nothing was granted): a retry is a new request, refused the
// same way.
func (m *impl) refuseWait(w *request, err error, events *[]Event) {
	m.unsetLive(w.id)
	if w.sess != nil && w.sess.waiters != nil {
		delete(w.sess.waiters, w.id)
	}
	w.state, w.outcome, w.deadline = reqDone, outcomeCancelled, 0
	*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Err: err})
}

func (m *impl) waitRanOut(l *lockEntry, w *request, events *[]Event) {
	err := m.busy(l)
	err.Waited = true
	m.finish(w, outcomeWaitedOut)
	*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Err: err})
}

// grantTo gives the free lock l a new lease with the next token, bound to
// session s if it is not nil (then ttl is ignored).
func (m *impl) grantTo(l *lockEntry, owner, principal string, ttl, lockDelay time.Duration, req *request, s *session) *grant {
	g := &grant{
		principal: principal,
		owner:     owner,
		token:     m.nextToken(),
		ttl:       ttl,
		expiresAt: m.clock + int64(ttl),
		lockDelay: lockDelay,
		req:       req,
		sess:      s,
	}
	if s != nil {
		g.ttl, g.expiresAt = 0, 0
		s.bind(l)
		if req != nil && s.waiters != nil {
			delete(s.waiters, req.id)
		}
	}
	l.holder = g
	m.holders++
	m.signWith(g)
	l.lastToken = g.token
	l.lastOwner = owner
	l.lastEnd = endNone
	l.delayUntil = 0
	m.noteGrant(l, g)
	if req != nil {
		req.state = reqHeld
		req.token = g.token
		m.setLive(req)
	}
	return g
}

// endLease frees l; at is the decision time the lease ended (its expiry, or
// the decision time of the release, so a waiter's wait is compared with it
// in decision time too).
func (m *impl) endLease(l *lockEntry, how leaseEnd, at int64) {
	g := l.holder
	l.holder = nil
	m.noteEnd(l, g, how)
	l.lastEnd = how
	m.ends[how]++
	m.holders--
	m.unsign(g)
	l.freedAt = at
	if g.sess != nil {
		delete(g.sess.leases, l.name)
	}
	if g.req != nil {
		out := outcomeReleased
		if how == endExpired {
			out = outcomeExpired
		}
		m.finish(g.req, out)
	}
}

// busy describes why l cannot be granted now (l is settled: its state is as
// of the decision time; Remaining counts from now, floored at 0).
func (m *impl) busy(l *lockEntry) *fence.BusyError {
	now := m.clock
	switch {
	case l.holder != nil:
		return &fence.BusyError{Name: l.name, Holder: l.holder.owner, Token: l.holder.token, Remaining: time.Duration(max(l.holder.end()-now, 0))}
	case l.delayUntil > m.expiryTime():
		return &fence.BusyError{Name: l.name, Remaining: time.Duration(max(l.delayUntil-now, 0)), Delayed: true}
	}
	// Free, and a waiter's wait ran out before it became free: report the
	// last holder.
	return &fence.BusyError{Name: l.name, Holder: l.lastOwner, Token: l.lastToken}
}

// free reports whether l can be granted to a new acquirer at decision time
// at: no holder, no lock-delay, nobody queued ahead.
func (l *lockEntry) free(at int64) bool {
	return l.holder == nil && l.delayUntil <= at && len(l.queue) == 0
}

// touch files l where it belongs after a change: in the deadline heap if
// something is due on it, in the idle list (or deleted) if it is idle.
func (m *impl) touch(l *lockEntry) {
	if at, ok := l.nextDeadline(); ok {
		m.deadlines.set(l, at)
	} else {
		m.deadlines.remove(l)
	}
	if l.holder == nil && len(l.queue) == 0 && l.delayUntil == 0 {
		m.idle.add(l, m.clock)
	} else {
		m.idle.remove(l)
	}
}

// nextDeadline is the earliest server time at which settling l changes it.
func (l *lockEntry) nextDeadline() (int64, bool) {
	at, ok := int64(0), false
	consider := func(t int64) {
		if !ok || t < at {
			at, ok = t, true
		}
	}
	if l.holder != nil {
		if l.holder.sess == nil { // a bound lease's end is its session's
			consider(l.holder.expiresAt)
		}
	} else if l.delayUntil != 0 {
		consider(l.delayUntil)
	}
	for _, w := range l.queue {
		consider(w.deadline)
	}
	return at, ok
}
