package state

import (
	"math"
	"time"
)

// Reads never change state. They judge a lock as the next command would:
// at the machine's decision time (Apply's view, see doc.go, Time), with the
// lock settled as settle would settle it — a lease past its end is gone
// (starting its lock-delay), a waiter whose wait had not run out when the
// lock became available is about to be granted (so the lock is not free),
// and waits that ran out are not counted. now (server time, at least
// Now()) only counts the remaining times reported.

func (m *impl) lock(name string, now int64) LockInfo {
	l := m.names.get(name)
	if l == nil {
		return LockInfo{Name: name, Free: true}
	}
	return m.info(l, max(now, m.clock))
}

// info describes l as settle at the decision time would leave it.
func (m *impl) info(l *lockEntry, now int64) LockInfo { return m.describe(l, now, false) }

// describe is info; asHeld describes l as the machine holds it instead:
// leases and waits whose time has run out but whose end no command has
// applied yet (a lock's expiry is applied by a tick or by a command on
// it) are still listed, with 0 left, and no waiter is taken as granted
// yet. A watch's state is read so (Machine.LocksHeldPage): the changes
// that follow it (expired, left_queue, granted) are the ones that end them.
func (m *impl) describe(l *lockEntry, now int64, asHeld bool) LockInfo {
	d := m.expiryTime()
	// hd: the time leases and waits are judged at (as held: none ended).
	hd := d
	if asHeld {
		hd = math.MinInt64
	}
	info := LockInfo{Name: l.name, LastToken: l.lastToken, Permits: l.permits}
	freedAt, delayUntil := l.freedAt, l.delayUntil
	var live []*grant
	for _, g := range l.holders {
		if g.end() > hd {
			live = append(live, g)
			continue
		}
		freedAt = max(freedAt, g.end())
		if g.lockDelay > 0 {
			delayUntil = max(delayUntil, g.end()+int64(g.lockDelay))
		}
	}
	queue := l.queue
	if !asHeld && len(live) == 0 && len(queue) > 0 && len(queue[0].set) == 0 {
		// (A set at the head waits on its other locks too: it is counted
		// as any waiter, by its own deadline.)
		// handOn: the waiters whose wait ran out before the lock became
		// available are gone; the first other one is about to be granted.
		if available := max(freedAt, delayUntil); available <= d {
			for len(queue) > 0 && queue[0].deadline <= available {
				queue = queue[1:]
			}
			if len(queue) > 0 {
				// Granted by the next command, its wait having not run out
				// when the lock became available: it counts as a waiter
				// (whose lease is not issued yet) even if its wait has run
				// out since.
				delayUntil = 0 // a grant clears it
				info.Waiters++
				queue = queue[1:]
			}
		}
	}
	for _, w := range queue {
		if w.deadline > hd {
			info.Waiters++
		}
	}
	delayed := len(live) == 0 && delayUntil > d
	for _, g := range live {
		info.Holders = append(info.Holders, *g.holding(l, now))
		info.Principals = append(info.Principals, g.principal)
	}
	if len(live) > 0 {
		info.Lease = &info.Holders[0]
		info.Principal = info.Principals[0]
	} else if delayed {
		info.LockDelayRemaining = time.Duration(max(delayUntil-now, 0))
	}
	if len(live) == 0 && info.Waiters == 0 {
		info.Permits = 0 // unused: the next request names it
	}
	info.Free = len(live) == 0 && !delayed && info.Waiters == 0
	return info
}

func (m *impl) locksPage(prefix, after string, limit int, now int64, asHeld bool) ([]LockInfo, string) {
	now = max(now, m.clock)
	// The name index gives the prefix's names in order from after: a page
	// costs O(log N + page + the free locks (idle tombstones) skipped in
	// it), not a scan of every lock.
	var out []LockInfo
	m.names.ascend(prefix, after, func(l *lockEntry) bool {
		if info := m.describe(l, now, asHeld); !info.Free {
			out = append(out, info)
		}
		return limit <= 0 || len(out) <= limit
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit:limit]
		return out, out[limit-1].Name
	}
	return out, ""
}

func (m *impl) queued() []QueuedRequest {
	var ls []*lockEntry
	m.names.each(func(l *lockEntry) { // in name order
		if len(l.queue) > 0 {
			ls = append(ls, l)
		}
	})
	var out []QueuedRequest
	for _, l := range ls {
		name := l.name
		for _, w := range l.queue {
			if w.name == name { // a set's waiter once, at its first lock
				out = append(out, QueuedRequest{Name: name, RequestID: w.id, Attempt: w.attempt})
			}
		}
	}
	return out
}
