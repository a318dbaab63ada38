package state

import (
	"strconv"
	"time"

	"github.com/fenceworks/fence"
)

// Config holds every rule that can change the outcome of a command: the
// largest TTL, how ids are remembered, and the caps on waiters and fenced
// resources. It is part of the replicated state, never a flag of one
// process: a machine starts from DefaultConfig, an OpConfig in the log
// replaces it for the commands after it, and snapshots carry it (see the
// package doc, Config). A zero cap (MaxWaitersPerLock, MaxWaiters,
// MaxResources, MaxResourceBytes, MaxLocks, MaxSessions,
// MaxSessionResults, MaxSessionsPerPrincipal, MaxWaitersPerPrincipal,
// MaxIDsPerPrincipal, MaxLocksPerPrincipal) means no cap; a zero MinIDRetention means
// ids may be forgotten by count at any age; a zero MaxLockDelay means
// fence.MaxLockDelay (a rule recorded before the field existed is read so).
type Config struct {
	MaxTTL            time.Duration // greatest TTL of an acquire or renew
	MaxOps            int           // op_ids remembered (see Retention)
	MaxRequests       int           // request_ids with a final outcome remembered; also idle-lock tombstones
	IDRetention       time.Duration // server-time age at which an id is forgotten
	MinIDRetention    time.Duration // no id younger than this is forgotten; a new id is refused instead
	MaxWaitersPerLock int           // queued acquires on one lock
	MaxWaiters        int           // queued acquires on all locks
	MaxResources      int           // fenced resources, deleted ones (tombstones) included
	MaxResourceBytes  int64         // total bytes of the values of all fenced resources
	MaxLocks          int           // locks that exist: held, delayed or with waiters (idle tombstones are bounded by MaxIdleLocks)
	MaxSessions       int           // live sessions
	MaxSessionResults int           // saved unacknowledged results of sequenced commands, per session
	MaxLockDelay      time.Duration // greatest lock_delay of an acquire (0: fence.MaxLockDelay, the format's bound)
	// Quotas of one principal (quota.go): live sessions it opened and
	// acquires it has queued. They bind every principal but "" (no
	// authentication); 0 means no quota.
	MaxSessionsPerPrincipal int
	MaxWaitersPerPrincipal  int
	// MaxIDsPerPrincipal bounds the op_ids, and apart the request_ids, one
	// principal has remembered (quota.go): beyond it its own oldest are
	// forgotten once MinIDRetention old, and a new one is refused while
	// they are younger. 0 means no quota.
	MaxIDsPerPrincipal int
	// MaxLocksPerPrincipal bounds the locks one principal holds or waits
	// for (quota.go): a set counts each of its locks, a shared or permit
	// lease its lock. 0 means no quota.
	MaxLocksPerPrincipal int
}

// MaxIdleLocks bounds the tombstones of idle locks whatever MaxRequests is:
// a constant of the log format.
const MaxIdleLocks = 100_000

// Bounds Validate enforces.
const (
	MaxIDMemory       = 10_000_000          // greatest MaxOps and MaxRequests
	LongestRetention  = 30 * 24 * time.Hour // greatest IDRetention
	ShortestRetention = time.Second         // least IDRetention
)

// DefaultConfig is the configuration of a machine before any OpConfig has
// been applied (a constant of the log format) and the one a node proposes
// (with OpConfig) when the operator sets no flag: ids remembered at least 3 minutes and at most
// 24 hours, up to a million of each, and caps on waiters and resources.
// Its MaxLockDelay is 0 (fence.MaxLockDelay): the field came after the
// format's first rules, and a machine's first rules do not change with a
// release; `fence serve` proposes fence.DefaultMaxLockDelay (daemon).
// 3 minutes at 5,000 id-bearing operations per second is 900,000 ids, so
// the stated load fits in MaxOps and MaxRequests.
func DefaultConfig() Config {
	return Config{
		MaxTTL:            fence.DefaultMaxTTL,
		MaxOps:            1_000_000,
		MaxRequests:       1_000_000,
		IDRetention:       24 * time.Hour,
		MinIDRetention:    3 * time.Minute,
		MaxWaitersPerLock: 1024,
		MaxWaiters:        100_000,
		MaxResources:      100_000,
		MaxResourceBytes:  256 << 20,
		MaxLocks:          1_000_000,
		MaxSessions:       100_000,
		MaxSessionResults: 4_096,
	}
}

// Validate reports the first field out of bounds as a *fence.InvalidError
// naming it (as "config.max_ttl", ...) and its bound.
func (c Config) Validate() error {
	d := func(field string, v, lo, hi time.Duration) error {
		if v < lo || v > hi {
			return fence.Invalid("config."+field, "between "+lo.String()+" and "+hi.String(), v.String())
		}
		return nil
	}
	n := func(field string, v, lo, hi int64) error {
		if v < lo || v > hi {
			return fence.Invalid("config."+field, "between "+itoa(lo)+" and "+itoa(hi), itoa(v))
		}
		return nil
	}
	const unbounded = 1<<63 - 1
	return first(
		d("max_ttl", c.MaxTTL, fence.MinTTL, fence.LongestMaxTTL),
		n("max_ops", int64(c.MaxOps), 1, MaxIDMemory),
		n("max_requests", int64(c.MaxRequests), 1, MaxIDMemory),
		d("id_retention", c.IDRetention, ShortestRetention, LongestRetention),
		d("min_id_retention", c.MinIDRetention, 0, c.IDRetention),
		n("max_waiters_per_lock", int64(c.MaxWaitersPerLock), 0, unbounded),
		n("max_waiters", int64(c.MaxWaiters), 0, unbounded),
		n("max_resources", int64(c.MaxResources), 0, unbounded),
		n("max_resource_bytes", c.MaxResourceBytes, 0, unbounded),
		n("max_locks", int64(c.MaxLocks), 0, unbounded),
		n("max_sessions", int64(c.MaxSessions), 0, unbounded),
		n("max_session_results", int64(c.MaxSessionResults), 0, unbounded),
		d("max_lock_delay", c.MaxLockDelay, 0, fence.MaxLockDelay),
		n("max_sessions_per_principal", int64(c.MaxSessionsPerPrincipal), 0, unbounded),
		n("max_waiters_per_principal", int64(c.MaxWaitersPerPrincipal), 0, unbounded),
		n("max_ids_per_principal", int64(c.MaxIDsPerPrincipal), 0, MaxIDMemory),
		n("max_locks_per_principal", int64(c.MaxLocksPerPrincipal), 0, unbounded),
	)
}

// Limits are the request bounds these rules set (fence.Request Validate).
func (c Config) Limits() fence.Limits {
	return fence.Limits{MaxTTL: c.MaxTTL, MaxLockDelay: c.MaxLockDelay}
}

// withDefaults fills the zero fields of c that cannot be zero from
// DefaultConfig (NewWithConfig).
func (c Config) withDefaults() Config { return c.WithRequiredFrom(DefaultConfig()) }

// WithRequiredFrom is c with each field that cannot be zero (MaxTTL,
// MaxOps, MaxRequests, IDRetention) taken from d where c's is zero. The
// other fields keep their value, zero included (no cap; ids forgotten by
// count at any age).
func (c Config) WithRequiredFrom(d Config) Config {
	if c.MaxTTL == 0 {
		c.MaxTTL = d.MaxTTL
	}
	if c.MaxOps == 0 {
		c.MaxOps = d.MaxOps
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = d.MaxRequests
	}
	if c.IDRetention == 0 {
		c.IDRetention = d.IDRetention
	}
	return c
}

// setConfig applies an OpConfig: the new rules hold for later commands. It
// changes nothing already decided (a lease granted with a TTL above the new
// MaxTTL keeps its remaining time, though its renewals are cut to the new
// bound; ids and waiters above a new cap stay until they end).
func (m *impl) setConfig(cmd Command) Result {
	if err := cmd.Config.Validate(); err != nil {
		return Result{Err: err}
	}
	// An id accepted under the old minimum retention was promised it: a
	// lower minimum applies to ids accepted from now on, so the old one
	// still holds until every id accepted before now has had it.
	if old := m.minRetention(); cmd.Config.MinIDRetention < old {
		m.keepMin, m.keepMinUntil = old, m.clock+int64(old)
	}
	m.cfg = cmd.Config
	m.configured = true
	if m.clusterID == "" {
		m.clusterID = cmd.ClusterID // checked by dispatch; "" records nothing
	}
	return Result{}
}

// minRetention is the minimum retention in force now: Config.MinIDRetention,
// or a larger one an OpConfig lowered less than that long ago.
func (m *impl) minRetention() time.Duration {
	if m.clock < m.keepMinUntil {
		return max(m.cfg.MinIDRetention, m.keepMin)
	}
	return m.cfg.MinIDRetention
}

func utoa(n int) string { return strconv.Itoa(n) }
