package state

import (
	"slices"
	"strconv"
	"strings"

	"github.com/fenceworks/fence"
)

// Quotas of one principal: so that no tenant starves the others, a
// principal at its quota is refused with a *fence.ResourceExhaustedError
// naming the quota and the principal, while the others are served up to
// the global caps. A quota binds every principal but "" (commands made
// with authentication off: one tenant, bounded by the global caps alone).
//
// What a quota is for a principal: the rules give the default
// (Config.MaxSessionsPerPrincipal, MaxWaitersPerPrincipal,
// MaxIDsPerPrincipal); a role may set its own (OpRoleQuota, Role.Quota),
// and a principal holding roles that set one gets the largest they set
// (a role that sets none leaves the default). The principal's roles are
// its token's ("token:<id>") or those bound to its certificate name
// ("cert:<name>"), as recorded in the log, so every replica decides alike
// (R1). Conns and Streams are not the machine's (a server counts
// connections and streams): they are kept here so that the server reads
// them with the rest.
//
// The machine counts, per principal, the live sessions it opened and the
// acquires it has queued (the principal recorded with each, auth.go), and
// the op_ids and request_ids it has remembered (memory.go keeps each
// principal's ids in order). The counts are derived state: a snapshot does
// not carry them, a restore recounts them. A decision looks up one
// principal's count, never iterates the map. As with the global caps, a
// quota is checked when something would grow: what a lowered quota
// already exceeds stays until it ends (ids: until they are forgotten).

// Quota is a role's per-principal quotas; 0 leaves a quota at the rules'
// default.
type Quota struct {
	Sessions int // live sessions
	Waiters  int // queued acquires
	IDs      int // remembered op_ids, and apart remembered request_ids
	Conns    int // open connections to one server (the server's flag is the default)
	Streams  int // open session streams on one server (the server's flag is the default)
	Locks    int // locks held or waited for (a set counts each of its locks)
}

// MaxQuota bounds each field of a Quota.
const MaxQuota = MaxIDMemory

// Validate checks q's fields: each 0 (the default) to MaxQuota.
func (q Quota) Validate() error {
	for i, v := range quotaInts(q) {
		if v < 0 || v > MaxQuota {
			return fence.Invalid("quota."+quotaNames[i], "between 0 and "+itoa(MaxQuota), itoa(v))
		}
	}
	return nil
}

var quotaNames = [lastQuotaField]string{"sessions", "waiters", "ids", "conns", "streams", "locks"}

// String lists the fields set, as "sessions=10 conns=5" ("" when none).
func (q Quota) String() string {
	var parts []string
	for i, v := range quotaInts(q) {
		if v != 0 {
			parts = append(parts, quotaNames[i]+"="+itoa(v))
		}
	}
	return strings.Join(parts, " ")
}

// principalUse is what one principal holds that a quota bounds (ids are
// counted by the memories themselves).
type principalUse struct {
	sessions int // live sessions it opened
	waiters  int // acquires it has queued
	locks    int // locks it holds or waits for (each lock of a set)
}

// useOf returns p's counts (zero when it holds nothing; never nil for a
// read).
func (m *impl) useOf(p string) principalUse {
	if u := m.use[p]; u != nil {
		return *u
	}
	return principalUse{}
}

// count adds ds sessions, dw waiters and dl locks to p's counts,
// forgetting p when it holds nothing. Principal "" is not counted.
func (m *impl) count(p string, ds, dw, dl int) {
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
	u.locks += dl
	if u.sessions == 0 && u.waiters == 0 && u.locks == 0 {
		delete(m.use, p)
	}
}

// QuotaOf is principal p's quotas: for each, the largest its roles set,
// else the rules' default (Conns, Streams: 0 when no role sets it — the
// server's flag applies). Principal "" has none (all 0).
func (m *Machine) QuotaOf(p string) Quota { return m.quotaOf(p) }

func (m *impl) quotaOf(p string) Quota {
	if p == "" {
		return Quota{}
	}
	var set Quota
	raise := func(r *Role) {
		if r == nil {
			return
		}
		set.Sessions, set.Waiters = max(set.Sessions, r.Quota.Sessions), max(set.Waiters, r.Quota.Waiters)
		set.IDs, set.Conns = max(set.IDs, r.Quota.IDs), max(set.Conns, r.Quota.Conns)
		set.Streams, set.Locks = max(set.Streams, r.Quota.Streams), max(set.Locks, r.Quota.Locks)
	}
	if id, ok := strings.CutPrefix(p, "token:"); ok {
		if t := m.auth.tokens[id]; t != nil {
			for _, r := range t.Roles {
				raise(m.auth.roles[r])
			}
		}
	} else if name, ok := strings.CutPrefix(p, "cert:"); ok {
		for _, r := range m.auth.roles {
			if _, ok := slices.BinarySearch(r.Certs, name); ok {
				raise(r)
			}
		}
	}
	or := func(v, def int) int {
		if v != 0 {
			return v
		}
		return def
	}
	return Quota{Sessions: or(set.Sessions, m.cfg.MaxSessionsPerPrincipal), Waiters: or(set.Waiters, m.cfg.MaxWaitersPerPrincipal),
		IDs: or(set.IDs, m.cfg.MaxIDsPerPrincipal), Conns: set.Conns, Streams: set.Streams, Locks: or(set.Locks, m.cfg.MaxLocksPerPrincipal)}
}

// exhausted is the refusal of principal p at quota c of what.
func exhausted(what, p, rule string, c, n int) error {
	return fence.Exhausted(what+" of principal "+strconv.Quote(p)+" ("+rule+" or its roles' quota)", "at most "+utoa(c), utoa(n))
}

// admitSessionQuota refuses principal p one more live session beyond its
// sessions quota.
func (m *impl) admitSessionQuota(p string) error {
	if p == "" {
		return nil
	}
	if c, n := m.quotaOf(p).Sessions, m.useOf(p).sessions; c > 0 && n >= c {
		return exhausted("sessions", p, "config.max_sessions_per_principal", c, n)
	}
	return nil
}

// admitWaiterQuota refuses principal p one more queued acquire beyond its
// waiters quota.
func (m *impl) admitWaiterQuota(p string) error {
	if p == "" {
		return nil
	}
	if c, n := m.quotaOf(p).Waiters, m.useOf(p).waiters; c > 0 && n >= c {
		return exhausted("waiters", p, "config.max_waiters_per_principal", c, n)
	}
	return nil
}

// admitLockQuota refuses principal p n more locks held or waited for
// beyond its locks quota.
func (m *impl) admitLockQuota(p string, n int) error {
	if p == "" {
		return nil
	}
	if c, u := m.quotaOf(p).Locks, m.useOf(p).locks; c > 0 && u+n > c {
		// Got says what the request would have made it: a set of 5 at 8 of
		// 12 is refused with "8, and 5 asked".
		return fence.Exhausted("locks held or waited for of principal "+strconv.Quote(p)+" (config.max_locks_per_principal or its roles' quota)",
			"at most "+utoa(c), utoa(u)+", and "+utoa(n)+" asked")
	}
	return nil
}

// addWaiterCount counts w, just put on its locks' queues.
func (m *impl) addWaiterCount(w *request) {
	m.waiting++
	m.count(w.principal, 0, 1, w.lockCount())
}

// dropWaiterCount counts w out, just taken off its locks' queues.
func (m *impl) dropWaiterCount(w *request) {
	m.waiting--
	m.count(w.principal, 0, -1, -w.lockCount())
}

// lockCount is the number of locks r asks for.
func (r *request) lockCount() int { return max(len(r.set), 1) }
