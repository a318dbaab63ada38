package state

import (
	"strconv"

	"github.com/fenceworks/fence"
)

// Quotas of one principal (Config.MaxSessionsPerPrincipal,
// Config.MaxWaitersPerPrincipal): so that no tenant starves the others, a
// principal at its quota is refused with a *fence.ResourceExhaustedError
// naming the quota and the principal, while the others are served up to
// the global caps. A quota binds every principal but "" (commands made
// with authentication off: one tenant, bounded by the global caps alone).
//
// The machine counts, per principal, the live sessions it opened and the
// acquires it has queued (the principal recorded with each, auth.go). The
// counts are derived state: a snapshot does not carry them, a restore
// recounts them from the sessions and waiters it restores. A decision
// looks up one principal's count, never iterates the map. As with the
// global caps, a quota is checked when something would grow: what a
// lowered quota already exceeds stays until it ends.

// principalUse is what one principal holds that a quota bounds.
type principalUse struct {
	sessions int // live sessions it opened
	waiters  int // acquires it has queued
}

// useOf returns p's counts (zero when it holds nothing; never nil for a
// read).
func (m *impl) useOf(p string) principalUse {
	if u := m.use[p]; u != nil {
		return *u
	}
	return principalUse{}
}

// count adds ds sessions and dw waiters to p's counts, forgetting p when
// it holds nothing. Principal "" is not counted.
func (m *impl) count(p string, ds, dw int) {
	if p == "" {
		return
	}
	u := m.use[p]
	if u == nil {
		if m.use == nil {
			m.use = map[string]*principalUse{}
		}
		u = &principalUse{}
		m.use[p] = u
	}
	u.sessions += ds
	u.waiters += dw
	if u.sessions == 0 && u.waiters == 0 {
		delete(m.use, p)
	}
}

// admitSessionQuota refuses principal p one more live session beyond
// MaxSessionsPerPrincipal.
func (m *impl) admitSessionQuota(p string) error {
	if c, n := m.cfg.MaxSessionsPerPrincipal, m.useOf(p).sessions; c > 0 && n >= c {
		return fence.Exhausted("sessions of principal "+strconv.Quote(p)+" (config.max_sessions_per_principal)", "at most "+utoa(c), utoa(n))
	}
	return nil
}

// admitWaiterQuota refuses principal p one more queued acquire beyond
// MaxWaitersPerPrincipal.
func (m *impl) admitWaiterQuota(p string) error {
	if c, n := m.cfg.MaxWaitersPerPrincipal, m.useOf(p).waiters; c > 0 && n >= c {
		return fence.Exhausted("waiters of principal "+strconv.Quote(p)+" (config.max_waiters_per_principal)", "at most "+utoa(c), utoa(n))
	}
	return nil
}

// addWaiterCount counts w, just put on its lock's queue.
func (m *impl) addWaiterCount(w *request) {
	m.waiting++
	m.count(w.principal, 0, 1)
}

// dropWaiterCount counts w out, just taken off its lock's queue.
func (m *impl) dropWaiterCount(w *request) {
	m.waiting--
	m.count(w.principal, 0, -1)
}
