package state

import (
	"strconv"

	"github.com/fenceworks/fence"
)

// Caps on waiters and fenced resources (Config). A command over a cap is
// refused with a *fence.ResourceExhaustedError naming the limit and changes
// nothing; a cap of 0 means none. Caps are checked when something would
// grow: what a lowered cap already exceeds stays until it ends.

// admitWaiter refuses one more waiter on l beyond MaxWaitersPerLock or
// beyond MaxWaiters in all. l has been settled.
func (m *impl) admitWaiters(ls []*lockEntry) error {
	for _, l := range ls {
		if l == nil {
			continue // a lock not made yet has nobody queued
		}
		if c := m.cfg.MaxWaitersPerLock; c > 0 && len(l.queue) >= c {
			return fence.Exhausted("waiters on lock "+strconv.Quote(l.name)+" (config.max_waiters_per_lock)", "at most "+utoa(c), utoa(len(l.queue)))
		}
	}
	if c := m.cfg.MaxWaiters; c > 0 && m.waiting >= c {
		return fence.Exhausted("waiters on all locks (config.max_waiters)", "at most "+utoa(c), utoa(m.waiting))
	}
	return nil
}

// admitLock refuses an acquire that would make lock l (nil if it does not
// exist, else settled) exist beyond MaxLocks: locks held, delayed or with
// waiters. Idle tombstones do not count (MaxIdleLocks bounds them), and a
// lock that already exists is not new. At the cap, everything due is
// settled first (as a Tick would, its events appended to events), so a
// lease past its end that no command has settled yet does not count.
func (m *impl) admitLocks(ls []*lockEntry, events *[]Event) error {
	c := m.cfg.MaxLocks
	if c <= 0 {
		return nil
	}
	n, added := m.existingLocks(ls)
	if added == 0 {
		return nil
	}
	if n+added > c {
		m.settleDue(events)
		n, added = m.existingLocks(ls)
	}
	if n+added > c {
		return fence.Exhausted("locks held, delayed or with waiters (config.max_locks)", "at most "+utoa(c), utoa(n))
	}
	return nil
}

// existingLocks counts the locks held, delayed or with waiters other than
// those of ls that are free (or nil), and how many of ls are: the locks
// an acquire of ls would add.
func (m *impl) existingLocks(ls []*lockEntry) (n, added int) {
	n = m.names.len() - m.idle.len()
	for _, l := range ls {
		if l == nil || l.free(m.expiryTime()) {
			added++
			if l != nil && l.idleElem == nil {
				n-- // l is free but not yet filed as idle (it became free in its settle)
			}
		}
	}
	return n, added
}

// admitResource refuses a change of resource name (nil if it does not
// exist yet) to a value of size bytes that would create a resource beyond
// MaxResources or grow the total of values beyond MaxResourceBytes.
func (m *impl) admitResource(name string, r *resource, size int) error {
	if c := m.cfg.MaxResources; r == nil && c > 0 && len(m.resources) >= c {
		return fence.Exhausted("fenced resources (config.max_resources)", "at most "+utoa(c), utoa(len(m.resources)))
	}
	old := 0
	if r != nil {
		old = len(r.value)
	}
	total := m.resourceBytes - int64(old) + int64(size)
	if c := m.cfg.MaxResourceBytes; c > 0 && size > old && total > c {
		return fence.Exhausted("bytes of all fenced resource values (config.max_resource_bytes)", "at most "+itoa(c), itoa(m.resourceBytes))
	}
	return nil
}

// setValue replaces r's value, keeping the byte total.
func (m *impl) setValue(r *resource, v []byte) {
	m.resourceBytes += int64(len(v)) - int64(len(r.value))
	r.value = v
}
