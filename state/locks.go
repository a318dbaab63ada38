package state

import (
	"container/list"
	"slices"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// How a lock's last lease ended.
type leaseEnd uint8

const (
	endNone     leaseEnd = iota // never granted, or still held
	endReleased                 // released by its holder (or a cancelled wait)
	endExpired                  // its TTL ran out in server time
)

// lockEntry is one lock: the leases that hold it, its FIFO waiters, and
// what is needed to tell a stale token from an expired or a foreign one.
//
// A lock has one exclusive holder, or any number (up to fence.MaxHolders)
// of shared holders, or — a semaphore, permits > 0 — up to permits
// holders. A set's lease (grant.parts) holds each of its locks: it is
// among the holders of every one, and a set's waiter is in the queue of
// every one.
//
// A server holds up to millions of them (--max-locks), so the fields are
// ordered to leave no padding and the small ones share a word: 144 bytes
// (a size class of its own; docs/design.md, "A lock in memory"). The
// field order is memory layout only: snapshots encode each field by name.
type lockEntry struct {
	name       string
	holders    []*grant    // leases that hold it, in grant order (nil when free)
	queue      []*request  // waiters, arrival order
	lastToken  fence.Token // token of the last grant of this lock
	lastOwner  string      // owner of the last grant
	freedAt    int64       // decision time a lease of it last ended
	delayUntil int64       // lock-delay end after an expiry; 0 when none
	deadline   int64
	idleElem   *list.Element // position in idle, nil when not idle
	idleSince  int64         // server time it became idle

	permits   uint32   // its permit count while held or waited for (0: not a semaphore)
	heapIndex int32    // position in deadlines, -1 when not there
	queuedAt  int32    // settle's work list: 1 + its place there, 0 when not in it
	lastEnd   leaseEnd // how the lease of lastToken ended (endNone while held)
}

// part is one lock a grant holds, in the mode it holds it.
type part struct {
	l    *lockEntry
	mode fence.Mode
}

// grant is a lease: of one lock, or of a set of locks (every one granted
// together under one token, and ended together).
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
	// The locks it holds, sorted by name (parts): a lease of one lock
	// holds one[0] (set is nil: no allocation of its own, and 16 bytes
	// less than a slice header, so a grant is 112 bytes), a set's lease
	// *set.
	set *[]part
	one [1]part
}

// parts are the locks g holds, sorted by name.
func (g *grant) parts() []part {
	if g.set != nil {
		return *g.set
	}
	return g.one[:]
}

// setParts makes room for n parts (n > 1: a set's).
func (g *grant) setParts(n int) {
	if n > 1 {
		p := make([]part, n)
		g.set = &p
	}
}

// isSet reports whether g is a set's lease.
func (g *grant) isSet() bool { return len(g.parts()) > 1 }

// name is the lease's name: its lock's, or its set's first (by name).
func (g *grant) name() string { return g.parts()[0].l.name }

// modeOn is the mode g holds l in.
func (g *grant) modeOn(l *lockEntry) fence.Mode {
	for _, p := range g.parts() {
		if p.l == l {
			return p.mode
		}
	}
	return fence.Exclusive
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
// session-bound lease reports its session's TTL and remaining time. A
// set's lease is named by its first lock and lists them all in Locks.
func (g *grant) lease(now int64) *fence.Lease {
	p := g.parts()[0]
	ls := g.holding(p.l, now)
	if !g.isSet() {
		return ls
	}
	ls.Locks = make([]fence.LockSpec, len(g.parts()))
	for i, p := range g.parts() {
		ls.Locks[i] = fence.LockSpec{Name: p.l.name, Mode: p.mode, Permits: p.l.permits}
	}
	return ls
}

// holding describes g as a holder of lock l: named l (a set's lease is
// renewed and released by any of its names), in the mode it holds l, with
// l's permit count, without the set's other locks. A listing of many locks
// held by large sets so stays the size of its holders (an outside test
// made a 668 MB List of 64-lock sets listed whole on each of their locks);
// the set's shape is in the grant's reply.
func (g *grant) holding(l *lockEntry, now int64) *fence.Lease {
	ttl := g.ttl
	if g.sess != nil {
		ttl = g.sess.ttl
	}
	return &fence.Lease{Name: l.name, Owner: g.owner, Token: g.token, TTL: ttl, Remaining: time.Duration(max(g.end()-now, 0)),
		Mode: g.modeOn(l), Permits: l.permits}
}

// lockFor returns the lock named name, creating a free one.
func (m *impl) lockFor(name string) *lockEntry {
	l := m.names.get(name)
	if l == nil {
		l = &lockEntry{name: name, heapIndex: -1}
		m.names.add(l)
	}
	return l
}

// holderWith returns the lease of l with token, nil if none.
func (l *lockEntry) holderWith(token fence.Token) *grant {
	for _, g := range l.holders {
		if g.token == token {
			return g
		}
	}
	return nil
}

// unused reports whether l has neither holders nor waiters: its permit
// count is then whatever the next request names.
func (l *lockEntry) unused() bool { return len(l.holders) == 0 && len(l.queue) == 0 }

// admits reports whether l's holders leave room for one more in mode
// (queue and lock-delay aside): a semaphore has a permit left; an
// exclusive acquire needs no holder; a shared one needs no exclusive
// holder and fewer than fence.MaxHolders.
func (l *lockEntry) admits(mode fence.Mode) bool {
	n := len(l.holders)
	switch {
	case l.permits > 0:
		return n < int(l.permits)
	case n == 0:
		return true
	case mode == fence.Exclusive:
		return false
	}
	return n < fence.MaxHolders && l.holders[0].modeOn(l) == fence.Shared
}

// freeFor reports whether l (settled, possibly nil) can be granted now at
// decision time at to a new acquire of spec: nobody queued, no lock-delay,
// room among its holders.
func (l *lockEntry) freeFor(spec fence.LockSpec, at int64) bool {
	if l == nil {
		return true
	}
	return len(l.queue) == 0 && l.delayUntil <= at && l.admits(spec.Mode)
}

// free reports whether l can be granted to a new exclusive acquirer at
// decision time at: no holder, no lock-delay, nobody queued.
func (l *lockEntry) free(at int64) bool {
	return len(l.holders) == 0 && l.delayUntil <= at && len(l.queue) == 0
}

// permitsFor checks that a request of spec may join l (settled, possibly
// nil): it names l's permit count, unless l is unused.
func (l *lockEntry) permitsFor(spec fence.LockSpec) error {
	if l == nil || l.unused() || l.permits == spec.Permits {
		return nil
	}
	return &fence.PermitsMismatchError{Name: l.name, Permits: spec.Permits, Current: l.permits}
}

// grantTo gives the locks of specs (ls[i] is specs[i]'s, each admitting it)
// one new lease with the next token, bound to session s if it is not nil
// (then ttl is ignored).
func (m *impl) grantTo(ls []*lockEntry, specs []fence.LockSpec, owner, principal string, ttl, lockDelay time.Duration, req *request, s *session) *grant {
	owner, principal = shareStrings(owner, principal, s, ls[0])
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
	g.setParts(len(ls))
	for i, l := range ls {
		g.parts()[i] = part{l: l, mode: specs[i].Mode}
	}
	if s != nil {
		g.ttl, g.expiresAt = 0, 0
		s.bind(g)
		if req != nil && s.waiters != nil {
			delete(s.waiters, req.id)
		}
	}
	m.holders++
	m.count(principal, 0, 0, len(ls))
	m.signWith(g)
	for i, l := range ls {
		if l.unused() {
			l.permits = specs[i].Permits
		}
		l.holders = append(l.holders, g)
		l.lastToken = g.token
		l.lastOwner = owner
		l.lastEnd = endNone
		l.delayUntil = 0
		m.noteGrant(l, g)
	}
	if req != nil {
		req.state = reqHeld
		req.token = g.token
		m.setLive(req)
	}
	return g
}

// shareStrings returns owner and principal sharing the bytes of an equal
// string already kept — session s's last owner and its principal, lock l's
// last owner — so that a million leases of one owner on one session keep
// one copy of it, not one per lease (each command decodes its own). Only
// memory changes: the strings are equal, so nothing decided differs.
func shareStrings(owner, principal string, s *session, l *lockEntry) (string, string) {
	switch {
	case s != nil && owner == s.owner:
		owner = s.owner
	case l != nil && owner == l.lastOwner:
		owner = l.lastOwner
	}
	if s != nil {
		s.owner = owner
		if principal == s.principal {
			principal = s.principal
		}
	}
	return owner, principal
}

// endLease ends g on every lock it holds; at is the decision time it
// ended at (its expiry, or the decision time of the release, so a waiter's
// wait is compared with it in decision time too). An expiry starts the
// lease's lock-delay on each of its locks. Each lock is put on work: its
// next waiters may now be granted (settleWork).
func (m *impl) endLease(g *grant, how leaseEnd, at int64, work *lockWork) {
	for _, p := range g.parts() {
		l := p.l
		if plant.On(plant.SetSplit) && how == endReleased && m.plantSetSplit(g, p) {
			continue
		}
		if i := slices.Index(l.holders, g); i >= 0 {
			l.holders = slices.Delete(l.holders, i, i+1)
		}
		if len(l.holders) == 0 {
			l.holders = nil
		}
		m.noteEnd(l, g, how)
		if l.lastToken == g.token {
			l.lastEnd = how
		}
		l.freedAt = max(l.freedAt, at)
		if how == endExpired && g.lockDelay > 0 {
			l.delayUntil = max(l.delayUntil, at+int64(g.lockDelay))
		}
		work.add(l)
	}
	m.ends[how]++
	m.holders--
	m.count(g.principal, 0, 0, -len(g.parts()))
	m.unsign(g)
	if g.sess != nil {
		g.sess.unbind(g)
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
// of the decision time; Remaining counts from now, floored at 0). A lock
// with several holders names its first.
func (m *impl) busy(l *lockEntry) *fence.BusyError {
	now := m.clock
	// A lock-delay left by one shared or permit holder's expiry blocks
	// every request until it ends, holders or not: when it ends after the
	// first holder's lease, it is what the request waits for.
	delayed := l.delayUntil > m.expiryTime()
	switch {
	case len(l.holders) > 0 && !(delayed && l.delayUntil > l.holders[0].end()):
		g := l.holders[0]
		return &fence.BusyError{Name: l.name, Holder: g.owner, Token: g.token, Remaining: time.Duration(max(g.end()-now, 0))}
	case delayed:
		return &fence.BusyError{Name: l.name, Remaining: time.Duration(max(l.delayUntil-now, 0)), Delayed: true}
	case len(l.queue) > 0:
		// Free, but strict FIFO: the queued requests come first (a set
		// waiter waiting for its other locks, an exclusive waiter for
		// shared holders elsewhere keeps its place).
		return &fence.BusyError{Name: l.name, Queued: len(l.queue)}
	}
	// Free, and a waiter's wait ran out before it became free: report the
	// last holder.
	return &fence.BusyError{Name: l.name, Holder: l.lastOwner, Token: l.lastToken}
}

// busyOf is busy for a request of spec: a lock whose holders leave room
// for it (shared holders and a shared request, permits to spare) but
// whose queue comes first (strict FIFO) names its first holder and the
// requests queued ahead, so the refusal does not blame a holder that does
// not block it.
func (m *impl) busyOf(l *lockEntry, spec fence.LockSpec) *fence.BusyError {
	b := m.busy(l)
	if b.Queued == 0 && !b.Delayed && len(l.holders) > 0 && len(l.queue) > 0 && l.admits(spec.Mode) {
		b.Queued = len(l.queue)
	}
	return b
}

// touch files l where it belongs after a change: in the deadline heap if
// something is due on it, in the idle list (or deleted) if it is idle. An
// unused lock forgets its permit count.
func (m *impl) touch(l *lockEntry) {
	if l.unused() {
		l.permits = 0
	}
	if at, ok := l.nextDeadline(); ok {
		m.deadlines.set(l, at)
	} else {
		m.deadlines.remove(l)
	}
	if l.unused() && l.delayUntil == 0 {
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
	for _, g := range l.holders {
		if g.sess == nil { // a bound lease's end is its session's
			consider(g.expiresAt)
		}
	}
	if l.delayUntil != 0 {
		consider(l.delayUntil)
	}
	for _, w := range l.queue {
		consider(w.deadline)
	}
	return at, ok
}
