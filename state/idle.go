package state

import "container/list"

// idleLocks are the locks that are free, not delayed and without waiters,
// oldest first. They are kept as tombstones — the last token and how its
// lease ended — so a late renew or release still learns it is stale or
// expired rather than merely not the holder. Tombstones are forgotten like
// ids (doc.go): after IDRetention, or beyond min(MaxRequests, MaxIdleLocks)
// of them.
type idleLocks struct {
	order *list.List // of *lockEntry
}

func newIdleLocks() idleLocks { return idleLocks{order: list.New()} }

func (q *idleLocks) len() int { return q.order.Len() }

// add files l as idle since now, unless it already is.
func (q *idleLocks) add(l *lockEntry, now int64) {
	if l.idleElem != nil {
		return
	}
	l.idleElem = q.order.PushBack(l)
	l.idleSince = now
}

func (q *idleLocks) remove(l *lockEntry) {
	if l.idleElem == nil {
		return
	}
	q.order.Remove(l.idleElem)
	l.idleElem = nil
}

// forget drops the oldest tombstones beyond max and those idle for at least
// retention, calling drop on each.
func (q *idleLocks) forget(now, retention int64, max int, drop func(*lockEntry)) {
	for e := q.order.Front(); e != nil; e = q.order.Front() {
		l := e.Value.(*lockEntry)
		if q.order.Len() <= max && now-l.idleSince < retention {
			return
		}
		q.remove(l)
		drop(l)
	}
}

// each calls f on every idle lock, oldest first.
func (q *idleLocks) each(f func(l *lockEntry)) {
	for e := q.order.Front(); e != nil; e = e.Next() {
		f(e.Value.(*lockEntry))
	}
}
