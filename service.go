package fence

import (
	"context"
	"time"
)

// Service is Fence's API as Go calls: the operations of one Fence endpoint,
// in the package's own vocabulary. The server (package server) is written
// against it, not against a node, and three things implement it:
//
//   - the local node (node.Node.Service): proposes the operation to raft
//     and answers with its applied result — only when the node leads
//     (otherwise errors matching both node.ErrNotLeader and ErrUnavailable:
//     nothing was proposed). It judges each request by its Validate
//     before proposing it (against the rules recorded in the log), and the
//     state machine judges each command again as it applies it;
//   - the remote client (client.NewService): the same calls over the
//     network to a Fence server (Connect, protobuf);
//   - the leader forwarder (cluster.Forwarder): the local node when it
//     leads, else the remote client of the current leader.
//
// Contract, for every implementation:
//
//   - A bad field is a *InvalidError naming the field (as the proto names
//     it: "ttl", "request_id", "session.id") and its bound (errors.Is
//     ErrInvalid), and changes nothing: the first bad one in the order the
//     request's Validate states (request_validate.go). The server
//     validates every request before it calls a Service, so nothing bad it
//     is sent is proposed.
//   - A refusal is one of the typed errors of this package (*BusyError,
//     *StaleTokenError, *NotHolderError, ...), with its facts, whichever
//     implementation answered: a forwarded call returns exactly what the
//     leader returned. The value returned with an error is zero, except
//     that its Replayed field may report a refusal that is the saved result
//     of a retried session Seq (every implementation reports it; the wire
//     carries it as ErrorDetail.replayed).
//   - An error that is not a refusal means the outcome is unknown (the node
//     lost leadership, the connection broke, the context ended after the
//     request was sent): the caller retries with the same RequestID, OpID
//     or session Seq, and the retry learns what happened. Such errors wrap
//     ErrUnavailable.
//   - A waiting acquire (Wait > 0) returns when granted, when the wait runs
//     out (*BusyError with Waited), or when ctx ends; when ctx ends first the
//     queued request is withdrawn (or, if the grant won the race, the lease
//     is released), so nothing waits for a caller that has gone.
//   - Methods are safe for concurrent use.
type Service interface {
	// Acquire takes lock Name, now or within Wait (FIFO).
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)
	// Renew extends a lease held by Token.
	Renew(ctx context.Context, req RenewRequest) (Grant, error)
	// Release gives up a lease held by Token.
	Release(ctx context.Context, req ReleaseRequest) (Released, error)
	// Get describes one lock, linearizably.
	Get(ctx context.Context, name string) (LockInfo, error)
	// List returns up to req.Limit locks whose names start with Prefix and
	// sort after After, linearizably, and the name to pass as After for the
	// next page ("" when there is none).
	List(ctx context.Context, req ListRequest) (LockPage, error)

	// Write, Add and Delete are the built-in fenced store's writes.
	Write(ctx context.Context, req WriteRequest) (Written, error)
	Add(ctx context.Context, req AddRequest) (Written, error)
	Delete(ctx context.Context, req DeleteRequest) (Written, error)
	// Read returns a fenced resource, linearizably.
	Read(ctx context.Context, resource string) (ResourceState, error)

	// OpenSession, KeepAlive and CloseSession manage client sessions.
	OpenSession(ctx context.Context, req OpenSessionRequest) (SessionGrant, error)
	KeepAlive(ctx context.Context, req KeepAliveRequest) (SessionGrant, error)
	CloseSession(ctx context.Context, req CloseSessionRequest) (Released, error)
}

// SessionRef binds a request to a client session (ID 0: none). Seq, when
// set, makes the request exactly-once: a retry with the same Seq gets the
// saved result. Ack is the lowest Seq whose reply the client has not yet
// received; the server may forget saved results below it.
type SessionRef struct {
	ID  uint64
	Seq uint64
	Ack uint64
}

// AcquireRequest asks for lock Name.
type AcquireRequest struct {
	Name string
	// Mode and Permits say how Name is held (see LockSpec): Exclusive (the
	// default) or Shared; Permits > 0 makes it a semaphore of that many
	// permits.
	Mode    Mode
	Permits uint32
	// Locks, instead of Name, Mode and Permits, names a set of up to
	// MaxSetLocks locks, granted all at once or not at all under one lease
	// with one token (in any order: the set is held sorted by name). A set
	// waiter keeps its place in the queue of every lock it names. A set of
	// one lock is that lock.
	Locks []LockSpec
	Owner string
	// TTL of the lease; 0 only for a session-bound acquire (the lease then
	// lasts as long as its session).
	TTL time.Duration
	// Wait > 0 queues the request (FIFO) for up to Wait; 0 is a try.
	Wait time.Duration
	// LockDelay keeps the lock from being granted again for this long
	// after the lease ends without a release.
	LockDelay time.Duration
	// RequestID makes the acquire idempotent: a retry gets the same lease.
	RequestID string
	Session   SessionRef
}

// RenewRequest extends the lease of lock Name held by Token; TTL 0 keeps
// the lease's TTL.
type RenewRequest struct {
	Name    string
	Token   Token
	TTL     time.Duration
	Session SessionRef
}

// ReleaseRequest releases the lease of lock Name held by Token.
type ReleaseRequest struct {
	Name    string
	Token   Token
	Session SessionRef
}

// ListRequest pages through locks by name.
type ListRequest struct {
	Prefix string
	After  string // "" for the first page
	Limit  int    // 1 or more
}

// WriteRequest sets Resource's value, fenced by Token.
type WriteRequest struct {
	Resource string
	Token    Token
	Value    []byte
	OpID     string // makes the write idempotent per resource
	Session  SessionRef
	// Signed, optional, is Token with its proof (Lease.Signed): the
	// serving node verifies it against the cluster's key set, for the lock
	// of Resource's name, before it proposes the write (a proof that does
	// not hold: *ForgedTokenError, nothing changed). Its Token must be
	// Token.
	Signed SignedToken
}

// AddRequest adds Delta to Resource's integer value, fenced by Token.
type AddRequest struct {
	Resource string
	Token    Token
	Delta    int64
	OpID     string
	Session  SessionRef
	Signed   SignedToken // optional: Token with its proof, verified first (see WriteRequest)
}

// DeleteRequest deletes Resource, fenced by Token (its last token stays).
type DeleteRequest struct {
	Resource string
	Token    Token
	OpID     string
	Session  SessionRef
	Signed   SignedToken // optional: Token with its proof, verified first (see WriteRequest)
}

// OpenSessionRequest opens a session whose keepalives must come within TTL.
type OpenSessionRequest struct {
	TTL       time.Duration
	RequestID string // makes the open idempotent
}

// KeepAliveRequest extends session ID by its TTL (or by TTL, when set).
type KeepAliveRequest struct {
	ID      uint64
	TTL     time.Duration
	Session SessionRef // Seq and Ack, on a stream; ID must equal Session.ID when both are set
}

// CloseSessionRequest ends session ID: its leases are released and its
// waiters dropped.
type CloseSessionRequest struct {
	ID      uint64
	Session SessionRef
}

// Grant is an acquired or renewed lease.
type Grant struct {
	Lease Lease
	// Replayed: this answers a retry (RequestID or Seq) from the saved
	// result; nothing was granted again.
	Replayed bool
	// Session is the lease's session after a session-bound renew (which
	// keeps its session alive), else nil.
	Session *SessionInfo
}

// Released answers a Release or CloseSession.
type Released struct {
	Replayed bool
}

// Written is a fenced resource after a Write, Add or Delete.
type Written struct {
	State ResourceState
	// Value is the integer value after an Add.
	Value    int64
	Replayed bool
}

// SessionGrant is a session after Open or KeepAlive.
type SessionGrant struct {
	Session  SessionInfo
	Replayed bool
}

// ResourceState is a fenced resource as stored.
type ResourceState struct {
	Resource  string
	Value     []byte
	LastToken Token  // the last token accepted for it
	Version   uint64 // accepted writes, adds and deletes
	// Deleted: deleted and not written since; Value is empty, LastToken
	// still fences stale writers.
	Deleted bool
}

// LockInfo describes one lock.
type LockInfo struct {
	Name  string
	Lease *Lease // nil when free; else the first of Holders
	// Holders are the leases that hold the lock, in the order they were
	// granted: one exclusive holder, or shared or permit holders. A set's
	// lease is listed on each of its locks.
	Holders []Lease
	// Permits is the lock's permit count while it is held or waited for
	// (0: not a semaphore).
	Permits            uint32
	Waiters            int
	LockDelayRemaining time.Duration
	LastToken          Token // the token of the lock's last grant
}

// LockPage is one page of List.
type LockPage struct {
	Locks []LockInfo
	Next  string // pass as After for the next page; "" at the end
}

// SessionInfo is a client session as the server reports it.
type SessionInfo struct {
	ID        uint64
	TTL       time.Duration // each keepalive extends it by this much
	Remaining time.Duration // left in server time when the reply was made
	Leases    int           // leases bound to it
}
