package state

import (
	"io"
	"time"

	"github.com/fenceworks/fence"
)

// Op names a state change.
type Op uint8

// The operations. Their numbers are part of the log format: never renumber.
const (
	OpAcquire    Op = 1  // Name, Owner, TTL, Wait, RequestID, LockDelay
	OpRenew      Op = 2  // Name, Token, TTL (0: the lease's current TTL)
	OpRelease    Op = 3  // Name, Token
	OpCancelWait Op = 4  // Name, RequestID, Attempt: that attempt of the waiter gave up (its client went away)
	OpTick       Op = 5  // only Now: expire what is due, hand freed locks to waiters
	OpWrite      Op = 6  // Name (resource), Token, Value, OpID
	OpAdd        Op = 7  // Name (resource), Token, Delta, OpID
	OpBumpToken  Op = 8  // Token: raise the token and session counters so the next grant and session id are >= Token (restore floor)
	OpConfig     Op = 9  // Config: the rules for every later command (see Config)
	OpDelete     Op = 10 // Name (resource), Token, OpID: delete a fenced resource, fenced like a write
	// Sessions (see session.go).
	OpSessionOpen      Op = 11 // TTL, RequestID (optional: the open's idempotency key): Result.Session
	OpSessionKeepAlive Op = 12 // Session, TTL (0: the session's TTL): extend it to now + TTL
	OpSessionClose     Op = 13 // Session: end it; its leases are released and handed on, its waits end
	// Authentication (see auth.go).
	OpAuthBootstrap Op = 14 // Name (token id), Value (SHA-256 of its secret), Attempt (bootstraps so far, for a reset)
	OpAuthEnable    Op = 15 // Delta != 0: checking on; 0: off
	OpTokenCreate   Op = 16 // Name (id), Value (hash), Owner (description), Roles, TTL (0: no expiry)
	OpTokenRevoke   Op = 17 // Name (id)
	OpRoleGrant     Op = 18 // Name (role, created if new), Perms added
	OpRoleRevoke    Op = 19 // Name (role), Perms removed; none: the role removed
	OpRoleBind      Op = 20 // Name (role), Owner (a client certificate's CN or URI SAN), Delta != 0: bind, 0: unbind
	OpRoleQuota     Op = 21 // Name (role), Quota: the role's per-principal quotas (a zero field: the server's default)
)

// Command is one state change. The node that proposes it (the raft leader)
// sets Now, the server time in nanoseconds of the leader clock (docs/design.md §2);
// the machine keeps now = max(now, cmd.Now) and never reads a clock.
//
// Slack (>= 0) is how far behind Now this command's expiry decisions are
// made: it expires leases, ends waits and lock-delays as of the decision
// time max(previous decision time, Now - Slack), while the grants and
// renewals it makes start at now. The node sets it to cover the commit lag
// (see doc.go, Time), so no lease ends before its TTL has passed since it
// was committed (G3).
type Command struct {
	Op        Op
	Now       int64
	Slack     time.Duration
	Name      string
	Owner     string
	TTL       time.Duration
	Wait      time.Duration
	LockDelay time.Duration
	RequestID string
	Token     fence.Token
	Value     []byte
	Delta     int64
	OpID      string
	// Attempt (OpCancelWait) is the attempt of the request that gave up, as
	// reported in Result.Attempt or Event.Attempt; the cancel is a no-op
	// unless it is still the request's current attempt. 0 cancels whatever
	// attempt is current; a node always sends the attempt.
	Attempt uint32
	// Config (OpConfig) is the complete new configuration.
	Config Config
	// Session binds the command to a live session (0: none); a command
	// naming a session that is not live is refused with
	// *fence.SessionExpiredError. Only acquire, renew, release, write, add,
	// delete, keepalive and close take one. An OpAcquire with a Session is
	// session-bound: its TTL is ignored (it may be 0) and the lease lives
	// as long as the session (see doc.go, Sessions).
	Session uint64
	// Seq (> 0, with Session) makes the command exactly-once: a retry with
	// the same Seq returns the saved Result (Replayed) and applies nothing;
	// a Seq below the session's acknowledged floor is refused. A
	// session-bound acquire with a Seq and no RequestID gets
	// SessionRequestID(Session, Seq).
	Seq uint64
	// Ack (with Session; at most Seq when Seq > 0) is the lowest Seq whose
	// reply the client has not received: every saved result with a lower
	// Seq is forgotten, and lower Seqs are refused from then on.
	Ack uint64
	// ClusterID (OpConfig only; see clusterid.go) is recorded as the
	// store's cluster id if it has none yet, and ignored otherwise. The
	// node that first takes office chooses it; the machine never makes one.
	ClusterID string
	// Principal is who made the command, as the server authenticated it
	// ("" when authentication is off): recorded with every lease, queued
	// request and session it creates, and compared with theirs on every
	// later command on them (auth.go).
	Principal string
	// Admin: the server found the principal an admin (or authentication
	// off): ownership is not checked, and token and role changes are
	// allowed.
	Admin bool
	// Roles (OpTokenCreate) are the new token's roles.
	Roles []string
	// Perms (OpRoleGrant, OpRoleRevoke) are the permissions added or
	// removed.
	Perms []Permission
	// Quota (OpRoleQuota) is the role's new quotas, replacing its old ones.
	Quota Quota
	// Mode and Permits (OpAcquire) say how Name is held (fence.LockSpec).
	Mode    fence.Mode
	Permits uint32
	// Locks (OpAcquire, Name empty) is a set acquire: every lock granted
	// at once or none (locks.go). Any order; the machine holds them sorted.
	Locks []fence.LockSpec
}

// Result is what Apply returns for one command.
type Result struct {
	// Err is nil or a typed refusal from package fence (*fence.BusyError,
	// *fence.StaleTokenError, *fence.InvalidError, ...). A refused command
	// changes nothing but server time (and what Events report).
	Err error
	// Lease is set by a granted Acquire and by Renew.
	Lease *fence.Lease
	// Queued is set by an Acquire with Wait > 0 that could not be granted
	// now: its answer comes later, as an Event with its RequestID.
	Queued bool
	// Resource is set by Write and Add (the state after the operation, or the
	// saved result of a replayed op_id).
	Resource *ResourceState
	// Replayed: the op_id (or request_id, or the session's Seq, or the
	// open's RequestID) was applied before and this is the saved result;
	// nothing was applied again.
	Replayed bool
	// AddValue is the integer value after an Add.
	AddValue int64
	// Attempt is set by every Acquire with a RequestID that is granted,
	// queued or replayed: the request's attempt generation. The first
	// attempt is 1; each applied retry of a request still queued or holding
	// its lock makes a new attempt (+1). A cancel names the attempt it
	// cancels (Command.Attempt).
	Attempt uint32
	// Session is set by OpSessionOpen and OpSessionKeepAlive, and by a
	// Renew of a session-bound lease (which keeps its session alive).
	Session *SessionInfo
	// KeyID is set by OpKeyRotate (the new signing key's id) and
	// OpKeyRetire (the retired key's id); see keys.go.
	KeyID string
	// KeyLeases is set by a forced OpKeyRetire (Delta != 0): the live
	// leases the dropped key signed, now signed by the signing key.
	KeyLeases int
	// Events are the outcomes for queued acquirers that this apply decided:
	// a grant, or a wait that ran out. Any command may produce them (a
	// Release hands the lock to the next waiter in the same apply).
	Events []Event
	// Changes are the changes of locks this apply made, in order: what
	// watchers see (changes.go).
	Changes []Change
}

// Event is the final outcome of a queued acquire.
type Event struct {
	RequestID string
	Attempt   uint32       // the request's attempt when the outcome was decided
	Lease     *fence.Lease // granted; Remaining is the full TTL (a session-bound lease: its session's remaining time)
	Err       error        // *fence.BusyError with Waited: the wait ran out; *fence.SessionExpiredError: its session ended; *fence.ResourceExhaustedError: no token left to grant it (the counter is at fence.MaxTokenJSONInt)
}

// SessionInfo describes a live session at a given server time.
type SessionInfo struct {
	ID        uint64
	TTL       time.Duration // extended by this much by every keepalive
	Remaining time.Duration // left in server time, floored at 0
	Leases    int           // leases bound to it
}

// ResourceState is a fenced resource as stored.
type ResourceState struct {
	Resource  string
	Value     []byte
	LastToken fence.Token
	Version   uint64
	// Deleted: the resource was deleted (OpDelete) and not written since;
	// Value is empty, LastToken and Version are kept.
	Deleted bool
}

// LockInfo describes one lock at a given server time.
type LockInfo struct {
	Name  string
	Lease *fence.Lease // nil when free
	// Principal is the principal that holds Lease ("" when free, or
	// granted with authentication off): whom its proof may be handed to.
	Principal string
	// Holders are every lease holding the lock, in grant order (Lease is
	// the first), and Principals their principals; Permits the lock's
	// permit count while held or waited for (0: not a semaphore).
	Holders            []fence.Lease
	Principals         []string
	Permits            uint32
	Waiters            int
	LockDelayRemaining time.Duration
	LastToken          fence.Token
	// Free: an acquire applied now would be granted (no lease held, no
	// lock-delay running and nobody queued as of the machine's decision
	// time, which is what Apply judges by).
	Free bool
}

// ProofFor reports whether a caller (fence.PrincipalFrom: p, and whether
// it has one) may be handed the proof of li's lease: its holder, an admin,
// or a caller with no principal (an embedded node). A proof is a bearer
// credential at every guard; a reader who is not the holder sees the token
// but gets nothing to write with.
func (li LockInfo) ProofFor(p fence.Principal, ok bool) bool {
	return !ok || p.Admin || p.Name == li.Principal
}

// ProofForHolder is ProofFor for li.Holders[i]: each holder's proof is
// its own principal's.
func (li LockInfo) ProofForHolder(i int, p fence.Principal, ok bool) bool {
	return !ok || p.Admin || p.Name == li.Principals[i]
}

// QueuedRequest is a waiting acquire: its lock, request_id and current
// attempt.
type QueuedRequest struct {
	Name      string
	RequestID string
	Attempt   uint32
}

// Machine is the deterministic state of one Fence store: locks and their
// FIFO waiters, the global token counter, fenced resources, and the op_id and
// request_id memories.
//
// Contract (as hashicorp/raft's FSM):
//   - Apply must be deterministic: the same sequence of commands from the same
//     starting state gives the same results and state on every replica. It
//     reads no clock, does no I/O, starts no goroutine, and uses no map
//     iteration order in anything it decides or returns.
//   - Machine is not safe for concurrent use: the node serialises Apply,
//     Snapshot, Restore and the read methods (reads under a read lock are
//     fine when Apply holds the write lock).
//   - Read methods never change state; they take the caller's view of server
//     time, clamped to at least Now().
type Machine struct {
	impl
}

// New returns an empty machine: no locks, token counter at 0 (the first grant
// gets token 1), server time 0, and DefaultConfig, the rules of the log
// format before any OpConfig. The only legal way to change the rules of a
// running store is an OpConfig in its log.
//
// New(cfg) is the old form, the same as NewWithConfig(cfg): it is kept only
// so that a caller that still builds its machine from flags compiles until
// it proposes an OpConfig instead, and will be removed. A replica built
// that way breaks the contract (its rules are not in its log).
func New(cfg ...Config) *Machine {
	if len(cfg) > 0 {
		return NewWithConfig(cfg[0])
	}
	return newMachine(DefaultConfig(), false)
}

// NewWithConfig returns an empty machine with cfg (its zero fields that
// cannot be zero taken from DefaultConfig, Config.WithRequiredFrom). It is for tests and for tools that build a store
// from nothing; a replica must start with New and learn its rules from the
// log. It panics if the result does not pass Config.Validate.
func NewWithConfig(cfg Config) *Machine {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		panic("state.NewWithConfig: " + err.Error())
	}
	return newMachine(cfg, true)
}

// Config returns the rules in force: DefaultConfig, or what the last
// applied OpConfig (or restored snapshot) set.
func (m *Machine) Config() Config { return m.cfg }

// Configured reports whether the log ever recorded rules (an OpConfig was
// applied, or the machine was made with NewWithConfig). A node proposes an
// OpConfig when this is false even if the rules it wants equal
// DefaultConfig, so that the log records them.
func (m *Machine) Configured() bool { return m.configured }

// Queued lists the queued acquires, by lock name and then in arrival order;
// a set's waiter once, under its first lock.
func (m *Machine) Queued() []QueuedRequest { return m.queued() }

// Waiting is the number of queued acquires on all locks, len(Queued())
// without listing them (the count config.max_waiters caps).
func (m *Machine) Waiting() int { return m.waiting }

// OldestIDAge is how long ago, in server time now (clamped to at least
// Now()), the oldest remembered op_id or request_id was remembered; 0 when
// none is. Ids are forgotten at Config.IDRetention, or earlier (by count)
// once older than Config.MinIDRetention.
func (m *Machine) OldestIDAge(now int64) time.Duration { return m.oldestIDAge(now) }

// Apply executes one command at server time max(Now(), cmd.Now).
func (m *Machine) Apply(cmd Command) Result { return m.apply(cmd) }

// Now is the machine's server time in nanoseconds.
func (m *Machine) Now() int64 { return m.now() }

// LastToken is the last token issued (0 if none).
func (m *Machine) LastToken() fence.Token { return m.lastToken() }

// NextDeadline is the earliest decision time at which an OpTick would change
// something (a lease expiry, a session expiry, a wait running out, a
// lock-delay ending for a lock with waiters), or an auth token's expiry still
// ahead of server time (a tick then moves server time past it, which the
// server judges a token's expiry by). ok is false when nothing is pending. It is in decision
// time (see Command.Slack): a tick stamped with Now and Slack acts on it only
// when Now - Slack >= at, so the node proposes the tick once its clock minus
// the slack it stamps has reached at.
func (m *Machine) NextDeadline() (at int64, ok bool) { return m.nextDeadline() }

// MaxSlack is the largest Slack any applied command carried (0 if none). A
// new leader charges it until LatestExpiry() + MaxSlack(), so a lag charged
// by an earlier leader still protects the leases held across a change of
// leader or a restart.
func (m *Machine) MaxSlack() time.Duration { return m.maxSlack }

// LatestExpiry is the latest expiry, in decision time, among the leases the
// machine still holds (a lease past its expiry that no command has settled
// yet counts too); ok is false when no lock is held. A new leader keeps its
// slack at MaxSlack until its clock passes at + MaxSlack, so lags charged by
// earlier leaders protect the leases they granted and no others. It scans
// every lock (O(locks)): meant for taking office, not for hot paths.
func (m *Machine) LatestExpiry() (at int64, ok bool) { return m.latestExpiry() }

// Lock describes lock name as Apply would judge it now: leases, lock-delays
// and waits are judged at the machine's decision time (as Apply does);
// now (server time, clamped to at least Now()) only counts the remaining
// times reported.
func (m *Machine) Lock(name string, now int64) LockInfo { return m.lock(name, now) }

// Locks describes the locks whose names start with prefix, sorted by name,
// as Lock does. A free lock (LockInfo.Free) is not listed.
func (m *Machine) Locks(prefix string, now int64) []LockInfo {
	out, _ := m.locksPage(prefix, "", 0, now, false)
	return out
}

// LocksPage is Locks one page at a time: the listed locks whose names are
// after after (all when after is ""), at most limit of them (no limit when
// limit <= 0). next is the name to pass as after for the next page, "" when
// this page is the last.
func (m *Machine) LocksPage(prefix, after string, limit int, now int64) (locks []LockInfo, next string) {
	return m.locksPage(prefix, after, limit, now, false)
}

// LocksHeldPage is LocksPage with the locks described as the machine holds
// them, not as the next command would settle them: a lease or a wait
// whose time has run out but whose end no command has applied yet (a
// lock's expiry is applied by a tick or a command on it) is still listed,
// 0 left. This is the state a watch starts from: the changes applied
// after it (expired, left_queue, granted) are exactly the ones that end
// what it lists. LockHeld is the same for one lock.
func (m *Machine) LocksHeldPage(prefix, after string, limit int, now int64) (locks []LockInfo, next string) {
	return m.locksPage(prefix, after, limit, now, true)
}

// LockHeld describes one lock as LocksHeldPage does.
func (m *Machine) LockHeld(name string, now int64) LockInfo {
	l := m.names.get(name)
	if l == nil {
		return LockInfo{Name: name, Free: true}
	}
	return m.describe(l, max(now, m.clock), true)
}

// Session describes live session id as of server time now (clamped to at
// least Now()); ok is false if it is not live (never opened, closed, or
// expired as of the decision time).
func (m *Machine) Session(id uint64, now int64) (info SessionInfo, ok bool) {
	return m.sessionInfo(id, now)
}

// Sessions is the number of live sessions the machine holds (every Apply
// ends the sessions due at its decision time first, so none is past its
// expiry as of Apply's decision time).
func (m *Machine) Sessions() int { return m.sessionCount() }

// Resource returns a fenced resource (the zero state with Resource set if it
// was never written).
func (m *Machine) Resource(name string) ResourceState { return m.resource(name) }

// ResourceValueSize is the size of a fenced resource's value (0 if it was
// never written or is deleted), without copying it: what a Read of it
// would copy out.
func (m *Machine) ResourceValueSize(name string) int {
	if r := m.resources[name]; r != nil {
		return len(r.value)
	}
	return 0
}

// Snapshot writes the whole state to w, format "fence-state/2": the same
// state always gives the same bytes (snapshot_stream.go).
func (m *Machine) Snapshot(w io.Writer) error { return m.snapshot(w) }

// SnapshotView copies the whole state into a value that shares nothing
// the machine changes, without encoding it: call it where Snapshot would
// be called (under the lock that serialises Apply), then write the view
// with its WriteTo outside that lock, while Apply goes on. The bytes
// written are those Snapshot would have written at the time of the copy.
func (m *Machine) SnapshotView() *SnapshotView { return m.snapshotView() }

// Restore replaces the whole state with one written by Snapshot. Input
// that is not a consistent snapshot of this format is refused with an
// error wrapping ErrBadSnapshot, and the machine is then unchanged.
func (m *Machine) Restore(r io.Reader) error { return m.restore(r) }

// MarshalBinary encodes c for the replicated log: CommandVersion, then a
// statepb.Command (codec.go). The format is stable; equal commands encode
// to equal bytes.
func (c Command) MarshalBinary() ([]byte, error) { return encodeCommand(c) }

// AppendBinary appends the encoding MarshalBinary returns to b
// (encoding.BinaryAppender): a caller that encodes many commands reuses
// one buffer.
func (c Command) AppendBinary(b []byte) ([]byte, error) { return appendEncodedCommand(b, c) }

// UnmarshalBinary decodes what MarshalBinary wrote. It never panics on any
// input and refuses, with an error wrapping ErrBadCommand and the reason,
// anything MarshalBinary would not have written: another version,
// truncated, oversized or trailing data, unknown fields, a non-canonical
// encoding.
func (c *Command) UnmarshalBinary(b []byte) error { return decodeCommand(c, b) }
