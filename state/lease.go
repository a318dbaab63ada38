package state

import "github.com/fenceworks/fence"

// renew extends the lease of the current holder of cmd.Name by cmd.TTL (or
// its own TTL when cmd.TTL is 0, cut to MaxTTL), counted from now. The
// renewal of a session-bound lease is a keepalive of its session with the
// session's own TTL, and reports the session too. A TTL on such a renewal
// is refused: it would change the TTL of every lease of the session, and
// the session's client, which tracks one deadline for all of them, would
// not know (a renew of one lease with 500ms ended its neighbours 29s
// before the client's deadline for them). KeepAlive changes a session's
// TTL.
func (m *impl) renew(cmd Command) Result {
	if err := m.validateRenew(cmd); err != nil {
		return Result{Err: err}
	}
	var res Result
	l := m.names.get(cmd.Name)
	if l != nil {
		m.settle(l, &res.Events)
	}
	g, err := m.holding(l, cmd.Name, cmd.Token)
	if err == nil {
		err = owns(cmd, g.principal, "lease", cmd.Name)
	}
	if err != nil {
		res.Err = err
		return res
	}
	// The lease's end moves on every lock it holds.
	defer func() {
		for _, p := range g.parts() {
			m.touch(p.l)
		}
	}()
	if g.sess != nil {
		if cmd.TTL != 0 {
			res.Err = fence.Invalid("ttl", "absent for a lease bound to a session (it lasts as long as session "+u64toa(g.sess.id)+"; KeepAlive changes the session's TTL)", cmd.TTL.String())
			return res
		}
		m.keepAlive(g.sess, 0)
		m.signIfUnsigned(g)
		res.Lease = g.lease(m.clock)
		res.Session = g.sess.info(m.clock)
		return res
	}
	if cmd.TTL != 0 {
		g.ttl = cmd.TTL
	}
	// A lease granted under a higher MaxTTL keeps the time it has left, but
	// each renewal is cut to the bound in force (else TTL 0 would renew it
	// above the bound forever).
	if g.ttl > m.cfg.MaxTTL {
		g.ttl = m.cfg.MaxTTL
	}
	g.expiresAt = m.clock + int64(g.ttl)
	m.signIfUnsigned(g)
	res.Lease = g.lease(m.clock)
	return res
}

// release ends the lease of cmd.Name held with cmd.Token — on every lock
// of its set — and hands each lock to its next waiters in the same apply.
// A release starts no lock-delay.
func (m *impl) release(cmd Command) Result {
	if err := m.validateRelease(cmd); err != nil {
		return Result{Err: err}
	}
	var res Result
	l := m.names.get(cmd.Name)
	if l != nil {
		m.settle(l, &res.Events)
	}
	g, err := m.holding(l, cmd.Name, cmd.Token)
	if err == nil {
		err = owns(cmd, g.principal, "lease", cmd.Name)
	}
	if err != nil {
		res.Err = err
		return res
	}
	work := m.newWork()
	m.endLease(g, endReleased, m.expiryTime(), &work)
	m.settleWork(&work, &res.Events)
	return res
}

// holding returns the lease of lock l (settled, possibly nil) if token holds
// it, or the refusal that says why not.
func (m *impl) holding(l *lockEntry, name string, token fence.Token) (*grant, error) {
	if token > m.counter {
		return nil, &fence.UnknownTokenError{Token: token, LastIssued: m.counter}
	}
	if l != nil {
		if g := l.holderWith(token); g != nil {
			return g, nil
		}
		switch {
		case token == l.lastToken && l.lastEnd == endExpired:
			return nil, &fence.LeaseExpiredError{Name: name, Token: token}
		case token < l.lastToken:
			return nil, &fence.StaleTokenError{Resource: name, Token: token, LastAccepted: l.lastToken}
		}
	}
	return nil, &fence.NotHolderError{Name: name, Token: token}
}

// cancelWait: the client of one attempt of a waiting acquire went away. If
// that attempt is still the request's current one (or cmd.Attempt is 0:
// whatever attempt is current), a queued waiter is removed and a waiter already granted
// whose lease is still held is released (it never saw the grant) and the
// lock passes on. Otherwise nothing: a newer attempt owns the request.
func (m *impl) cancelWait(cmd Command) Result {
	if err := m.validateCancelWait(cmd); err != nil {
		return Result{Err: err}
	}
	var res Result
	l := m.names.get(cmd.Name)
	if l == nil {
		return res
	}
	m.settle(l, &res.Events)
	r := m.live[cmd.RequestID]
	if r == nil || !r.names(cmd.Name) || (cmd.Attempt != 0 && cmd.Attempt != r.attempt) {
		return res
	}
	work := m.newWork()
	switch r.state {
	case reqQueued:
		m.unqueue(r, &work)
		m.unsetLive(r.id)
		if r.sess != nil && r.sess.waiters != nil {
			delete(r.sess.waiters, r.id)
		}
		// Not remembered (nothing was granted); a session's saved result
		// may still refer to it: a retry of its seq is a new request.
		r.state, r.outcome, r.deadline = reqDone, outcomeCancelled, 0
	case reqHeld:
		if g := m.names.get(r.name).holderWith(r.token); g != nil {
			m.endLease(g, endReleased, m.expiryTime(), &work)
		}
	}
	m.settleWork(&work, &res.Events)
	return res
}

// names reports whether r asks for lock name.
func (r *request) names(name string) bool {
	var buf [1]fence.LockSpec
	for _, s := range r.specs(&buf) {
		if s.Name == name {
			return true
		}
	}
	return false
}
