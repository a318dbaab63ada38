package state

import (
	"time"

	"github.com/fenceworks/fence"
)

// ChangeKind is what happened to a lock (Change).
type ChangeKind uint8

// The kinds of change. Their numbers are part of the Watch API: never
// renumber.
const (
	ChangeGranted   ChangeKind = 1 // a lease was granted (to a new acquire or to a waiter)
	ChangeReleased  ChangeKind = 2 // a lease was released (or its session closed, or its wait cancelled after the grant)
	ChangeExpired   ChangeKind = 3 // a lease's TTL (or its session's) ran out
	ChangeQueued    ChangeKind = 4 // an acquire joined the lock's queue
	ChangeLeftQueue ChangeKind = 5 // a waiter left the queue without a grant: its wait ran out, was cancelled or refused, or its session ended
	// Changes of the built-in store's fenced resources (Name is the
	// resource's): a write, add or delete accepted, and one refused for a
	// token older than the one the resource last accepted (what a paused
	// worker's late write looks like).
	ChangeWritten ChangeKind = 6
	ChangeRefused ChangeKind = 7
)

// String names the kind as the Watch API does ("granted", ...).
func (k ChangeKind) String() string {
	switch k {
	case ChangeGranted:
		return "granted"
	case ChangeReleased:
		return "released"
	case ChangeExpired:
		return "expired"
	case ChangeQueued:
		return "queued"
	case ChangeLeftQueue:
		return "left_queue"
	case ChangeWritten:
		return "written"
	case ChangeRefused:
		return "refused"
	}
	return "unknown"
}

// Change is one change of one lock, as Apply made it: what a watcher of
// the lock sees. A command's changes are in the order it made them
// (Result.Changes); the node numbers them with the command's log index.
// A set's grant, release or expiry is one change on each of its locks.
type Change struct {
	Kind ChangeKind
	Name string
	// The lease granted, released or expired (Granted, Released,
	// Expired): its token, owner, principal, mode, the lock's permits,
	// its session (0: none) and, for a grant, its TTL (a session-bound
	// lease: its session's).
	Token     fence.Token
	Owner     string
	Principal string
	Mode      fence.Mode
	Permits   uint32
	Session   uint64
	TTL       time.Duration
	// RequestID is the request_id of the acquire (Queued, LeftQueue, and a
	// grant to a waiter), "" if it had none.
	RequestID string
	// Holders and Waiters are the lock's holders and queue length after
	// the change.
	Holders int
	Waiters int
	// Version (Written) is the resource's version after the change;
	// LastAccepted (Refused) the token the resource last accepted, newer
	// than the refused Token.
	Version      uint64
	LastAccepted fence.Token
}

// noteWritten records that resource r accepted cmd; noteRefused that
// resource name refused token, older than lastAccepted.
func (m *impl) noteWritten(cmd Command, r *resource) {
	m.changes = append(m.changes, Change{Kind: ChangeWritten, Name: r.name, Token: cmd.Token, Principal: cmd.Principal, Version: r.version})
}

func (m *impl) noteRefused(name string, token, lastAccepted fence.Token) {
	m.changes = append(m.changes, Change{Kind: ChangeRefused, Name: name, Token: token, LastAccepted: lastAccepted})
}

// noteGrant records that g was granted lock l.
func (m *impl) noteGrant(l *lockEntry, g *grant) {
	c := m.leaseChange(ChangeGranted, l, g)
	c.TTL = g.ttl
	if g.sess != nil {
		c.TTL = g.sess.ttl
	}
	m.changes = append(m.changes, c)
}

// noteEnd records that g's lease of l ended how.
func (m *impl) noteEnd(l *lockEntry, g *grant, how leaseEnd) {
	kind := ChangeReleased
	if how == endExpired {
		kind = ChangeExpired
	}
	m.changes = append(m.changes, m.leaseChange(kind, l, g))
}

func (m *impl) leaseChange(kind ChangeKind, l *lockEntry, g *grant) Change {
	c := Change{Kind: kind, Name: l.name, Token: g.token, Owner: g.owner, Principal: g.principal,
		Mode: g.modeOn(l), Permits: l.permits, Holders: l.holderCount(), Waiters: len(l.queue)}
	if g.req != nil {
		c.RequestID = g.req.id
	}
	if g.sess != nil {
		c.Session = g.sess.id
	}
	return c
}

// noteQueued records that w joined l's queue (it is in it); noteLeft that
// it left it without a grant (it is no longer in it).
func (m *impl) noteQueued(l *lockEntry, w *request) { m.noteWaiter(ChangeQueued, l, w, len(l.queue)) }
func (m *impl) noteLeft(l *lockEntry, w *request)   { m.noteWaiter(ChangeLeftQueue, l, w, len(l.queue)) }

// noteWaiter records a change of w's place in l's queue, which holds
// waiters requests after it.
func (m *impl) noteWaiter(kind ChangeKind, l *lockEntry, w *request, waiters int) {
	c := Change{Kind: kind, Name: l.name, Owner: w.owner, Principal: w.principal, RequestID: w.id,
		Mode: w.modeOn(l.name), Permits: l.permits, Holders: l.holderCount(), Waiters: waiters}
	if w.sess != nil {
		c.Session = w.sess.id
	}
	m.changes = append(m.changes, c)
}

// holderCount is the number of leases holding l.
func (l *lockEntry) holderCount() int { return len(l.holders) }
