package state

// latestExpiry is the max expiresAt over held leases. The order does not
// matter: the max is the same whatever order the locks are visited in.
func (m *impl) latestExpiry() (at int64, ok bool) {
	m.names.each(func(l *lockEntry) {
		for _, g := range l.holders {
			if !ok || g.end() > at {
				at, ok = g.end(), true
			}
		}
	})
	return at, ok
}
