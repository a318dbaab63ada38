package state

import (
	"sort"
	"strings"
	"time"
)

// Reads never change state. They describe a lock as a Tick at server time
// now would leave it only as far as its own lease goes: a lease past its
// expiry shows as gone (with its lock-delay), but waiters are not handed the
// lock until a command applies it.

func (m *impl) lock(name string, now int64) LockInfo {
	now = max(now, m.clock)
	l := m.byName[name]
	if l == nil {
		return LockInfo{Name: name}
	}
	return l.info(now)
}

func (l *lockEntry) info(now int64) LockInfo {
	info := LockInfo{Name: l.name, LastToken: l.lastToken}
	for _, w := range l.queue {
		if w.deadline > now {
			info.Waiters++
		}
	}
	delayUntil := l.delayUntil
	if g := l.holder; g != nil {
		if g.expiresAt > now {
			info.Lease = g.lease(l.name, now)
		} else if g.lockDelay > 0 {
			delayUntil = g.expiresAt + int64(g.lockDelay)
		}
	}
	if info.Lease == nil && delayUntil > now {
		info.LockDelayRemaining = time.Duration(delayUntil - now)
	}
	return info
}

func (m *impl) locks(prefix string, now int64) []LockInfo {
	now = max(now, m.clock)
	var names []string
	for name := range m.byName {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []LockInfo
	for _, name := range names {
		info := m.byName[name].info(now)
		if info.Lease != nil || info.Waiters > 0 || info.LockDelayRemaining > 0 {
			out = append(out, info)
		}
	}
	return out
}
