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
	OpAcquire    Op = 1 // Name, Owner, TTL, Wait, RequestID, LockDelay
	OpRenew      Op = 2 // Name, Token, TTL (0: the lease's current TTL)
	OpRelease    Op = 3 // Name, Token
	OpCancelWait Op = 4 // Name, RequestID: the waiter gave up (its client went away)
	OpTick       Op = 5 // only Now: expire what is due, hand freed locks to waiters
	OpWrite      Op = 6 // Name (resource), Token, Value, OpID
	OpAdd        Op = 7 // Name (resource), Token, Delta, OpID
	OpBumpToken  Op = 8 // Token: raise the counter so the next grant is >= Token (restore floor)
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
	// Replayed: the op_id (or request_id) was applied before and this is the
	// saved result; nothing was applied again.
	Replayed bool
	// AddValue is the integer value after an Add.
	AddValue int64
	// Events are the outcomes for queued acquirers that this apply decided:
	// a grant, or a wait that ran out. Any command may produce them (a
	// Release hands the lock to the next waiter in the same apply).
	Events []Event
}

// Event is the final outcome of a queued acquire.
type Event struct {
	RequestID string
	Lease     *fence.Lease // granted; Remaining is the full TTL
	Err       error        // *fence.BusyError with Waited: the wait ran out
}

// ResourceState is a fenced resource as stored.
type ResourceState struct {
	Resource  string
	Value     []byte
	LastToken fence.Token
	Version   uint64
}

// LockInfo describes one lock at a given server time.
type LockInfo struct {
	Name               string
	Lease              *fence.Lease // nil when free
	Waiters            int
	LockDelayRemaining time.Duration
	LastToken          fence.Token
}

// Config bounds what the machine accepts and remembers. The zero value means
// the defaults below. Every replica must use the same Config.
type Config struct {
	MaxTTL      time.Duration // default fence.DefaultMaxTTL
	MaxOps      int           // op_ids remembered, default 100000
	MaxRequests int           // request_ids remembered, default 100000
	IDRetention time.Duration // server-time age after which ids are forgotten, default 24h
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
// gets token 1), server time 0.
func New(cfg Config) *Machine { return newMachine(cfg) }

// Apply executes one command at server time max(Now(), cmd.Now).
func (m *Machine) Apply(cmd Command) Result { return m.apply(cmd) }

// Now is the machine's server time in nanoseconds.
func (m *Machine) Now() int64 { return m.now() }

// LastToken is the last token issued (0 if none).
func (m *Machine) LastToken() fence.Token { return m.lastToken() }

// NextDeadline is the earliest decision time at which an OpTick would change
// something (a lease expiry, a wait running out, a lock-delay ending for a
// lock with waiters). ok is false when nothing is pending. It is in decision
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

// Lock describes lock name at server time now.
func (m *Machine) Lock(name string, now int64) LockInfo { return m.lock(name, now) }

// Locks describes the locks whose names start with prefix, sorted by name,
// at server time now. A lock that is free, not delayed and has no waiters is
// not listed.
func (m *Machine) Locks(prefix string, now int64) []LockInfo { return m.locks(prefix, now) }

// Resource returns a fenced resource (the zero state with Resource set if it
// was never written).
func (m *Machine) Resource(name string) ResourceState { return m.resource(name) }

// Snapshot writes the whole state to w.
func (m *Machine) Snapshot(w io.Writer) error { return m.snapshot(w) }

// Restore replaces the whole state with one written by Snapshot.
func (m *Machine) Restore(r io.Reader) error { return m.restore(r) }

// MarshalBinary encodes c for the replicated log. The format is versioned
// (first byte) and stable.
func (c Command) MarshalBinary() ([]byte, error) { return encodeCommand(c) }

// UnmarshalBinary decodes what MarshalBinary wrote. It never panics on any
// input and refuses truncated, oversized or trailing data with an error.
func (c *Command) UnmarshalBinary(b []byte) error { return decodeCommand(c, b) }
