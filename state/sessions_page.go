package state

import (
	"cmp"
	"slices"
	"time"

	"github.com/fenceworks/fence"
)

// SessionView describes one live session for an operator (the operator
// page's session list): who opened it, its TTL, how long ago it was last
// kept alive and how long it has left, at a given server time, and the
// leases bound to it.
type SessionView struct {
	ID        uint64
	Principal string
	TTL       time.Duration
	// SinceKeepAlive is the server time since its last keepalive (or its
	// open); Remaining what is left before it expires, floored at 0.
	SinceKeepAlive time.Duration
	Remaining      time.Duration
	// Leases are the leases bound to it, one per lock they hold (a set's
	// lease once per lock, with the same token), sorted by name, then
	// token.
	Leases []SessionLease
}

// SessionLease is one lock a session's lease holds.
type SessionLease struct {
	Name  string
	Token fence.Token
	Mode  fence.Mode
	Owner string
}

// SessionsPage lists at most limit live sessions with ids above after (of
// principal only, unless principal is ""), by id, as of server time now (clamped to at least Now()); more reports
// whether sessions follow the last one listed. A session whose expiry the
// decision time has passed is not live (as Session judges). It reads and
// sorts every live session's id: O(sessions log sessions) a page.
func (m *Machine) SessionsPage(principal string, after uint64, limit int, now int64) (page []SessionView, more bool) {
	now = max(now, m.clock)
	d := m.expiryTime()
	ids := make([]uint64, 0, len(m.sessions))
	for id, s := range m.sessions {
		if id > after && s.expiresAt > d && (principal == "" || s.principal == principal) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if limit >= 0 && len(ids) > limit {
		ids, more = ids[:limit], true
	}
	page = make([]SessionView, 0, len(ids))
	for _, id := range ids {
		s := m.sessions[id]
		v := SessionView{ID: id, Principal: s.principal, TTL: s.ttl,
			SinceKeepAlive: time.Duration(max(now-(s.expiresAt-int64(s.ttl)), 0)),
			Remaining:      time.Duration(max(s.expiresAt-now, 0))}
		for _, g := range s.leases {
			for _, p := range g.parts() {
				v.Leases = append(v.Leases, SessionLease{Name: p.l.name, Token: g.token, Mode: p.mode, Owner: g.owner})
			}
		}
		slices.SortFunc(v.Leases, func(a, b SessionLease) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token))
		})
		page = append(page, v)
	}
	return page, more
}
