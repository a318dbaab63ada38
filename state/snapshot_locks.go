package state

import (
	"fmt"
	"slices"
	"time"

	"github.com/fenceworks/fence"
)

// lockRestorer rebuilds the locks of a snapshot, record by record (in name
// order), checking each. A set's lease is listed whole on each of its
// locks and a set's waiter in each of its queues: the first record makes
// it, the others must say the same and join it.
type lockRestorer struct {
	m        *impl
	session  func(uint64) (*session, error)
	attempt  func(*request) error
	grants   map[fence.Token]*grant   // sets' leases met so far
	setNames map[fence.Token][]string // their locks' names, sorted
	waiters  map[string]*request      // sets' waiters met so far, by request_id
}

// restore fills l (made from s's scalars) with s's holders and queue.
func (rl *lockRestorer) restore(l *lockEntry, s *snapLock) error {
	if s.LastEnd > endExpired {
		return fmt.Errorf("bad last_end %d", s.LastEnd)
	}
	var holders []*snapGrant
	if s.Holder != nil {
		holders = append(holders, s.Holder)
	} else if len(s.More) > 0 {
		return fmt.Errorf("more holders without a first")
	}
	for i := range s.More {
		holders = append(holders, &s.More[i])
	}
	l.permits = s.Permits
	if s.Permits > fence.MaxPermits || len(holders) > fence.MaxHolders {
		return fmt.Errorf("%d holders of %d permits: above the bounds", len(holders), s.Permits)
	}
	for i, sg := range holders {
		if sg.Token == 0 || sg.Token > s.LastToken || i > 0 && sg.Token <= holders[i-1].Token {
			return fmt.Errorf("holder %d: token %d not in grant order up to the last token %d", i, sg.Token, s.LastToken)
		}
		g, err := rl.grant(l, sg)
		if err != nil {
			return fmt.Errorf("holder %d: %v", sg.Token, err)
		}
		l.holders = append(l.holders, g)
	}
	if s.LastEnd == endNone && len(holders) > 0 && holders[len(holders)-1].Token != s.LastToken {
		return fmt.Errorf("held, but its last grant %d is not a holder", s.LastToken)
	}
	if s.LastEnd != endNone && len(holders) > 0 && holders[len(holders)-1].Token == s.LastToken {
		return fmt.Errorf("last grant %d both ended and held", s.LastToken)
	}
	if err := checkHolderModes(l); err != nil {
		return err
	}
	for i := range s.Queue {
		w, err := rl.waiter(l, &s.Queue[i])
		if err != nil {
			return err
		}
		l.queue = append(l.queue, w)
	}
	if l.unused() && l.permits != 0 {
		return fmt.Errorf("permits %d on a lock nobody holds or waits for", l.permits)
	}
	return nil
}

// checkHolderModes: a semaphore's holders hold one permit each
// (exclusive, at most permits of them); otherwise one exclusive holder or
// only shared ones.
func checkHolderModes(l *lockEntry) error {
	shared := 0
	for _, g := range l.holders {
		if g.modeOn(l) == fence.Shared {
			shared++
		}
	}
	n := len(l.holders)
	switch {
	case l.permits > 0 && (shared > 0 || n > int(l.permits)):
		return fmt.Errorf("%d holders (%d shared) of %d permits", n, shared, l.permits)
	case l.permits == 0 && n > 1 && shared != n:
		return fmt.Errorf("%d holders, %d shared: an exclusive holder beside another", n, shared)
	}
	return nil
}

// grant rebuilds holder sg of l: a lease of l alone, or of a set that
// names l (made at its first lock, joined at the others).
func (rl *lockRestorer) grant(l *lockEntry, sg *snapGrant) (*grant, error) {
	if sg.InSet { // a set's lease listed whole at its first lock
		g := rl.grants[sg.Token]
		if g == nil || !sg.isRef() {
			return nil, fmt.Errorf("a reference to set lease %d not listed at an earlier lock, or with more than its token", sg.Token)
		}
		k := slices.Index(rl.setNames[sg.Token], l.name)
		if k <= 0 || g.parts()[k].l != nil {
			return nil, fmt.Errorf("set lease %d does not name it, or names it twice", sg.Token)
		}
		g.parts()[k].l = l
		return g, nil
	}
	if len(sg.Set) > 0 {
		k := slices.IndexFunc(sg.Set, func(s fence.LockSpec) bool { return s.Name == l.name })
		if len(sg.Set) < 2 || len(sg.Set) > fence.MaxSetLocks || k < 0 || sg.Mode != fence.Exclusive {
			return nil, fmt.Errorf("set of %d locks that does not name it", len(sg.Set))
		}
		for i, s := range sg.Set {
			if s.Permits != 0 || s.Mode > fence.Shared || i > 0 && sg.Set[i-1].Name >= s.Name {
				return nil, fmt.Errorf("set not sorted, repeated, or with a bad mode or permits at %q", s.Name)
			}
		}
		if rl.grants[sg.Token] != nil || k != 0 {
			return nil, fmt.Errorf("a set's lease not listed at its first lock %q", sg.Set[0].Name)
		}
	} else if sg.Mode > fence.Shared {
		return nil, fmt.Errorf("mode %d", sg.Mode)
	}
	m := rl.m
	sess, err := rl.session(sg.Session)
	if err != nil {
		return nil, err
	}
	own := sg.TTL > 0 // a standalone lease has its own TTL; a bound one none
	if sess != nil {
		own = sg.TTL == 0 && sg.ExpiresAt == 0
	}
	if !own || sg.LockDelay < 0 {
		return nil, fmt.Errorf("inconsistent holder")
	}
	owner, principal := shareStrings(sg.Owner, sg.Principal, sess, l)
	if l.lastOwner == owner {
		l.lastOwner = owner // one copy for the lock and its holder
	}
	g := &grant{owner: owner, token: sg.Token, ttl: time.Duration(sg.TTL), expiresAt: sg.ExpiresAt, lockDelay: time.Duration(sg.LockDelay), sess: sess, principal: principal}
	if len(sg.Set) > 0 {
		g.setParts(len(sg.Set))
		for i, s := range sg.Set {
			g.parts()[i].mode = s.Mode
		}
		g.parts()[0].l = l
		rl.grants[sg.Token] = g
		rl.setNames[sg.Token] = make([]string, len(sg.Set))
		for i, s := range sg.Set {
			rl.setNames[sg.Token][i] = s.Name
		}
	} else {
		g.one[0] = part{l: l, mode: sg.Mode}
	}
	m.holders++
	m.count(g.principal, 0, 0, len(g.parts()))
	if err := m.restoreLeaseKey(g, sg.Key); err != nil {
		return nil, err
	}
	if sess != nil {
		if sess.leases[g.token] != nil {
			return nil, fmt.Errorf("token %d bound twice", g.token)
		}
		sess.bind(g)
	}
	if sg.Request != nil {
		req := sg.Request.request()
		sameSet := len(req.set) == len(sg.Set)
		for i := range req.set {
			sameSet = sameSet && req.set[i].Name == sg.Set[i].Name && req.set[i].Mode == sg.Set[i].Mode
		}
		if req.state != reqHeld || req.token != sg.Token || req.name != l.name || sg.Request.Session != sg.Session || !sameSet {
			return nil, fmt.Errorf("inconsistent holder request")
		}
		req.sess = sess
		if err := rl.attempt(req); err != nil {
			return nil, err
		}
		if err := m.addLive(req); err != nil {
			return nil, err
		}
		g.req = req
	}
	return g, nil
}

// waiter rebuilds waiter sw of l: a waiter of l alone, or of a set (made
// at its first lock, joined at the others).
func (rl *lockRestorer) waiter(l *lockEntry, sw *snapRequest) (*request, error) {
	if sw.InSet { // a set's waiter listed whole at its first lock
		prev := rl.waiters[string(sw.ID)]
		if prev == nil || len(sw.ID) == 0 || !sw.isRef() {
			return nil, fmt.Errorf("a reference to set waiter %q not listed at an earlier lock, or with more than its id", sw.ID)
		}
		if !prev.names(l.name) || prev.name == l.name || slices.Contains(l.queue, prev) {
			return nil, fmt.Errorf("set waiter %q does not name it, or is listed twice", sw.ID)
		}
		if prev.permitsOn(l.name) != l.permits {
			return nil, fmt.Errorf("waiter %q asks for %d permits of a lock of %d", prev.id, prev.permitsOn(l.name), l.permits)
		}
		return prev, nil
	}
	w := sw.request()
	if w.state != reqQueued || w.id == "" || w.mode > fence.Shared || w.permits > fence.MaxPermits {
		return nil, fmt.Errorf("inconsistent waiter")
	}
	if w.permitsOn(l.name) != l.permits {
		return nil, fmt.Errorf("waiter %q asks for %d permits of a lock of %d", w.id, w.permitsOn(l.name), l.permits)
	}
	if len(w.set) > 0 {
		if len(w.set) < 2 || len(w.set) > fence.MaxSetLocks || w.name != w.set[0].Name || w.mode != 0 || w.permits != 0 {
			return nil, fmt.Errorf("inconsistent set waiter %q", w.id)
		}
		for i, s := range w.set {
			if s.Mode > fence.Shared || s.Permits > fence.MaxPermits || i > 0 && w.set[i-1].Name >= s.Name {
				return nil, fmt.Errorf("set waiter %q: not sorted, repeated, or a bad mode or permits at %q", w.id, s.Name)
			}
		}
		if !w.names(l.name) {
			return nil, fmt.Errorf("set waiter %q does not name it", w.id)
		}
		if rl.waiters[w.id] != nil || w.name != l.name {
			return nil, fmt.Errorf("set waiter %q not listed at its first lock", w.id)
		}
		rl.waiters[w.id] = w
	} else if w.name != l.name {
		return nil, fmt.Errorf("inconsistent waiter")
	}
	sess, err := rl.session(sw.Session)
	if err != nil {
		return nil, fmt.Errorf("waiter: %v", err)
	}
	if w.sess = sess; sess != nil {
		sess.addWaiter(w)
	}
	if err := rl.attempt(w); err != nil {
		return nil, err
	}
	rl.m.addWaiterCount(w)
	if err := rl.m.addLive(w); err != nil {
		return nil, err
	}
	return w, nil
}

// permitsOn is the permit count r asks for on lock name.
func (r *request) permitsOn(name string) uint32 {
	for _, s := range r.set {
		if s.Name == name {
			return s.Permits
		}
	}
	return r.permits
}

// complete checks, after every lock, that each set's lease and waiter was
// listed on every lock of its set.
func (rl *lockRestorer) complete() error {
	for t, g := range rl.grants {
		for _, p := range g.parts() {
			if p.l == nil {
				return fmt.Errorf("the set lease of token %d is not listed on each of its locks", t)
			}
		}
	}
	for id, w := range rl.waiters {
		for _, s := range w.set {
			if l := rl.m.names.get(s.Name); l == nil || !slices.Contains(l.queue, w) {
				return fmt.Errorf("set waiter %q is not queued on %q", id, s.Name)
			}
		}
	}
	return nil
}

// isRef reports whether r is only a reference to a set's waiter: its id
// and InSet, nothing else.
func (r *snapRequest) isRef() bool {
	ref := snapRequest{ID: r.ID, InSet: true}
	return r.Name == ref.Name && r.Owner == "" && r.TTL == 0 && r.Wait == 0 && r.LockDelay == 0 && r.Deadline == 0 && r.State == 0 &&
		r.Token == 0 && r.Outcome == 0 && r.At == 0 && r.Attempt == 0 && r.Session == 0 && r.Principal == "" && r.Mode == 0 && r.Permits == 0 && len(r.Set) == 0
}

// isRef reports whether g is only a reference to a set's lease: its token
// and InSet, nothing else.
func (g *snapGrant) isRef() bool {
	return g.InSet && g.Owner == "" && g.TTL == 0 && g.ExpiresAt == 0 && g.LockDelay == 0 && g.Request == nil && g.Session == 0 &&
		g.Principal == "" && g.Key == "" && g.Mode == 0 && len(g.Set) == 0
}
