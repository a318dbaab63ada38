package state

import (
	"slices"

	"github.com/fenceworks/fence"
)

// Settling brings locks up to the decision time: leases past their end
// end (starting their lock-delay), freed locks pass to their waiters, and
// waits that ran out end. A set's lease ends on all its locks at once, and
// a set's waiter is granted on all its locks at once or waits on all, so
// settling one lock can change others: those go on a work list and are
// settled in turn, in the order they were reached (deterministic: no map
// order decides it), until nothing changes.
//
// The fairness rule: each lock's queue is strict FIFO. The waiter at the
// head of a lock's queue is granted when every lock it names has it at
// the head of its queue and room for it (an exclusive waiter needs no
// holder; a shared one no exclusive holder; a permit one a free permit);
// nobody behind it on a lock is granted before it there. A set waiter
// therefore keeps its place on every lock, and no two waiters can
// deadlock: the oldest waiter is at the head of every queue it is in, so
// it is granted as soon as the leases ahead of it end.

// lockWork is settle's work list: locks to settle, each at most once at a
// time, in the order they were added.
type lockWork struct {
	locks []*lockEntry
	next  int
}

// newWork returns an empty work list, on the machine's spare array when
// it has one (settleWork gives it back): no allocation per command. A
// list made while another is in use gets an array of its own.
func (m *impl) newWork() lockWork {
	w := lockWork{locks: m.spareWork[:0]}
	m.spareWork = nil
	return w
}

// add puts l on the list unless it is on it and not yet settled.
func (w *lockWork) add(l *lockEntry) {
	if l.queuedAt != 0 {
		return
	}
	w.locks = append(w.locks, l)
	l.queuedAt = int32(len(w.locks))
}

// settleWork settles every lock on work (and every lock that reaches it
// meanwhile), then files each one (touch).
func (m *impl) settleWork(work *lockWork, events *[]Event) {
	for work.next < len(work.locks) {
		l := work.locks[work.next]
		work.next++
		l.queuedAt = 0
		m.settleOne(l, work, events)
	}
	for _, l := range work.locks {
		m.touch(l)
	}
	clear(work.locks)
	if cap(work.locks) <= 64 {
		m.spareWork = work.locks[:0]
	}
	work.locks, work.next = nil, 0
}

// settle brings lock l (and every lock that changes with it) up to the
// decision time, appending waiters' outcomes to events.
func (m *impl) settle(l *lockEntry, events *[]Event) {
	work := m.newWork()
	work.add(l)
	m.settleWork(&work, events)
}

// settleLocks is settle for several locks (nil ones skipped).
func (m *impl) settleLocks(ls []*lockEntry, events *[]Event) {
	work := m.newWork()
	for _, l := range ls {
		if l != nil {
			work.add(l)
		}
	}
	m.settleWork(&work, events)
}

// settleOne: l's leases past their end end, in order of their end (each
// followed by a hand-on, so a waiter is judged at the instant the lock
// became available to it); then l passes to its waiters; then waits that
// ran out end.
func (m *impl) settleOne(l *lockEntry, work *lockWork, events *[]Event) {
	now := m.expiryTime()
	for {
		// A session-bound lease ends only with its session (settleSessions).
		var due *grant
		for _, g := range l.holders {
			if g.sess == nil && g.expiresAt <= now && (due == nil || g.expiresAt < due.expiresAt) {
				due = g
			}
		}
		if due == nil {
			break
		}
		m.endLease(due, endExpired, due.expiresAt, work)
		m.handOn(l, work, events)
	}
	// handOn needs the delay's end: a waiter whose wait ran out before it
	// never had the chance. A grant clears it; otherwise clear it once passed.
	m.handOn(l, work, events)
	if l.delayUntil != 0 && l.delayUntil <= now {
		l.delayUntil = 0
	}
	m.expireWaits(l, work, events)
}

// waiterSpecs are w's locks with their modes: its set, or its one lock
// (in buf).
func (w *request) specs(buf *[1]fence.LockSpec) []fence.LockSpec {
	if len(w.set) > 0 {
		return w.set
	}
	buf[0] = fence.LockSpec{Name: w.name, Mode: w.mode, Permits: w.permits}
	return buf[:]
}

// handOn grants l's waiters in arrival order while the one at the head can
// be granted: it is at the head of every queue it is in, every lock of it
// has room for it, and its wait had not run out when the last of them
// became available. The waiters whose wait ran out before that leave
// every queue.
func (m *impl) handOn(l *lockEntry, work *lockWork, events *[]Event) {
	var buf [1]fence.LockSpec
	for len(l.queue) > 0 {
		w := l.queue[0]
		if w.sess != nil && w.sess.expiresAt <= m.expiryTime() {
			// Its session is past its expiry (it ends later in this
			// apply): it ends with it, and is not granted.
			m.unqueue(w, work)
			m.sessionEndedWait(w, events)
			continue
		}
		specs := w.specs(&buf)
		var lbuf [1]*lockEntry
		ls := lbuf[:]
		if len(specs) > 1 {
			ls = make([]*lockEntry, len(specs))
		}
		available := int64(0)
		for i, s := range specs {
			wl := m.names.get(s.Name)
			if len(wl.queue) == 0 || wl.queue[0] != w || !wl.admits(s.Mode) {
				return // it waits on a lock ahead of it, and the rest of l's queue behind it
			}
			ls[i] = wl
			available = max(available, wl.freedAt, wl.delayUntil)
		}
		if available > m.expiryTime() {
			return
		}
		if w.deadline <= available {
			// Its wait ran out before its locks were free: it is
			// refused as the lock was then (its last holder), not as
			// "free but queued" because of the requests behind it.
			m.unqueue(w, work)
			m.waitRanOutBeforeFree(w, events)
			continue
		}
		if err := m.admitToken(); err != nil {
			m.unqueue(w, work)
			m.refuseWait(w, err, events)
			continue
		}
		for _, wl := range ls {
			wl.queue = wl.queue[1:]
			if len(wl.queue) == 0 {
				wl.queue = nil
			}
			if wl != l {
				work.add(wl)
			}
		}
		m.dropWaiterCount(w)
		g := m.grantTo(ls, specs, w.owner, w.principal, w.ttl, w.lockDelay, w, w.sess)
		*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Lease: g.lease(m.clock)})
	}
	l.queue = nil
}

// unqueue takes w, which leaves without a grant, off every queue it is in
// (each lock put on work: a new head may be granted), and counts it out.
func (m *impl) unqueue(w *request, work *lockWork) {
	var buf [1]fence.LockSpec
	for _, s := range w.specs(&buf) {
		l := m.names.get(s.Name)
		if i := slices.Index(l.queue, w); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
			if len(l.queue) == 0 {
				l.queue = nil
			}
			m.noteLeft(l, w)
			work.add(l)
		}
	}
	m.dropWaiterCount(w)
}

// expireWaits ends l's waits that ran out by the decision time, in
// arrival order.
func (m *impl) expireWaits(l *lockEntry, work *lockWork, events *[]Event) {
	for {
		i := slices.IndexFunc(l.queue, func(w *request) bool { return w.deadline <= m.expiryTime() })
		if i < 0 {
			return
		}
		w := l.queue[i]
		m.unqueue(w, work)
		m.waitRanOut(w, events)
	}
}

// busyFor describes why w cannot be granted now: the first of its locks
// that is not free for it (its first lock if each one is).
func (m *impl) busyFor(w *request) *fence.BusyError {
	var buf [1]fence.LockSpec
	specs := w.specs(&buf)
	for _, s := range specs {
		if l := m.names.get(s.Name); l != nil && !l.freeFor(s, m.expiryTime()) {
			return m.busyOf(l, s)
		}
	}
	if l := m.names.get(specs[0].Name); l != nil {
		return m.busy(l)
	}
	return &fence.BusyError{Name: specs[0].Name}
}

// refuseWait ends w (taken off its queues) with err instead of a grant:
// there is no token left to grant it with. Like a cancelled wait it is not
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

// waitRanOut ends w (taken off its queues) as busy.
func (m *impl) waitRanOut(w *request, events *[]Event) {
	m.waitEnded(w, m.busyFor(w), events)
}

// waitRanOutBeforeFree ends w, whose wait ran out before the instant its
// locks became free (found only now that they are): the refusal names the
// lock's last holder, whom w waited for, whatever is queued behind w.
func (m *impl) waitRanOutBeforeFree(w *request, events *[]Event) {
	err := m.busyFor(w)
	if err.Queued > 0 {
		l := m.names.get(err.Name)
		err = &fence.BusyError{Name: l.name, Holder: l.lastOwner, Token: l.lastToken}
	}
	m.waitEnded(w, err, events)
}

func (m *impl) waitEnded(w *request, err *fence.BusyError, events *[]Event) {
	err.Waited = true
	m.finish(w, outcomeWaitedOut)
	*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Err: err})
}
