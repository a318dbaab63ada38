package fence

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every refusal Fence makes matches exactly one of them with
// errors.Is; the typed errors below carry the facts and are reached with
// errors.As.
var (
	// ErrBusy: the lock is held by someone else (or its lock-delay has not
	// passed, or it is free but queued requests come first, or a wait ran
	// out). *BusyError has the holder and remaining TTL, or the queue.
	ErrBusy = errors.New("fence: lock is busy")
	// ErrStaleToken: the token is older than one already accepted.
	// *StaleTokenError has both numbers.
	ErrStaleToken = errors.New("fence: stale token")
	// ErrNotHolder: the token does not hold this lock.
	ErrNotHolder = errors.New("fence: not the lock holder")
	// ErrLeaseExpired: the token held this lock, but its lease has expired.
	ErrLeaseExpired = errors.New("fence: lease expired")
	// ErrUnknownToken: the token was never issued by this store.
	ErrUnknownToken = errors.New("fence: token was never issued")
	// ErrOpConflict: an op_id (or request_id) already used with a different
	// payload.
	ErrOpConflict = errors.New("fence: op_id reused with a different payload")
	// ErrInvalid: a request field is out of bounds. *InvalidError names it.
	ErrInvalid = errors.New("fence: invalid argument")
	// ErrResourceExhausted: the store is at one of its configured limits
	// (waiters, resources, remembered ids). *ResourceExhaustedError names
	// the limit. Nothing was changed; the same request may succeed later.
	ErrResourceExhausted = errors.New("fence: resource exhausted")
	// ErrLeaseLost: the caller's lease ended before it was released (a
	// renewal was refused, or its safe deadline passed without one). The
	// Go client's lost-lease errors, and a call made under a lost lease's
	// context, match it (client.ErrLeaseLost is this value).
	ErrLeaseLost = errors.New("fence: lease lost")
	// ErrSessionExpired: the session named by the request has ended (it
	// expired, was closed, or was never opened). Every lease bound to it
	// is lost and its waits have ended. *SessionExpiredError names it.
	ErrSessionExpired = errors.New("fence: session expired")
	// ErrUnavailable: the request could not be served now, and its outcome
	// may be unknown (no leader, leadership lost, the node closing, a
	// connection broken after the request was sent). It is not a refusal:
	// retry, with the same request_id, op_id or session seq, and the retry
	// learns what happened. Service implementations wrap it.
	ErrUnavailable = errors.New("fence: unavailable")
	// ErrPermissionDenied: the caller's principal may not do this (its
	// roles grant no such permission on the name, or the lease or session
	// belongs to another principal). *PermissionDeniedError names what.
	ErrPermissionDenied = errors.New("fence: permission denied")
	// ErrUnauthenticated: authentication is on and the request carried no
	// credentials, or credentials the store does not accept (unknown,
	// revoked or expired token). *UnauthenticatedError says which.
	ErrUnauthenticated = errors.New("fence: unauthenticated")
	// ErrForgedToken: the token's proof does not show that this cluster
	// granted it for this lock (no proof where one is required, another
	// cluster's, an unknown key, a tampered token or another lock's
	// proof). Nothing was changed. *ForgedTokenError says why.
	ErrForgedToken = errors.New("fence: forged token")
	// ErrPermitsMismatch: an acquire named a permit count other than the
	// lock's current one. *PermitsMismatchError has both.
	ErrPermitsMismatch = errors.New("fence: permits mismatch")
)

// Reason is the stable machine-readable name of a refusal, as sent in API
// error details and printed by the CLI.
type Reason string

// The reasons. They never change meaning.
const (
	ReasonBusy         Reason = "BUSY"
	ReasonStaleToken   Reason = "STALE_TOKEN"
	ReasonNotHolder    Reason = "NOT_HOLDER"
	ReasonLeaseExpired Reason = "LEASE_EXPIRED"
	ReasonUnknownToken Reason = "UNKNOWN_TOKEN"
	ReasonOpConflict   Reason = "OP_CONFLICT"
	ReasonInvalid      Reason = "INVALID_ARGUMENT"
	// ReasonResourceExhausted shares its transport code with ReasonBusy
	// (Connect resource_exhausted, HTTP 429); the reason tells them apart.
	ReasonResourceExhausted Reason = "RESOURCE_EXHAUSTED"
	// ReasonSessionExpired: the request's session has ended; every lease
	// bound to it is lost.
	ReasonSessionExpired Reason = "SESSION_EXPIRED"
	// ReasonPermissionDenied: the principal lacks the permission named in
	// the refusal, or the lease or session is another principal's.
	ReasonPermissionDenied Reason = "PERMISSION_DENIED"
	// ReasonUnauthenticated: no credentials, or credentials not accepted.
	ReasonUnauthenticated Reason = "UNAUTHENTICATED"
	// ReasonForgedToken: the token's proof does not hold (ErrForgedToken).
	ReasonForgedToken Reason = "FORGED_TOKEN"
	// ReasonPermitsMismatch: the acquire's permit count is not the lock's
	// (ErrPermitsMismatch).
	ReasonPermitsMismatch Reason = "PERMITS_MISMATCH"
)

// ReasonOf returns the reason of a Fence refusal, or "" if err is not one.
func ReasonOf(err error) Reason {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBusy):
		return ReasonBusy
	case errors.Is(err, ErrStaleToken):
		return ReasonStaleToken
	case errors.Is(err, ErrNotHolder):
		return ReasonNotHolder
	case errors.Is(err, ErrLeaseExpired):
		return ReasonLeaseExpired
	case errors.Is(err, ErrUnknownToken):
		return ReasonUnknownToken
	case errors.Is(err, ErrOpConflict):
		return ReasonOpConflict
	case errors.Is(err, ErrInvalid):
		return ReasonInvalid
	case errors.Is(err, ErrResourceExhausted):
		return ReasonResourceExhausted
	case errors.Is(err, ErrSessionExpired):
		return ReasonSessionExpired
	case errors.Is(err, ErrPermissionDenied):
		return ReasonPermissionDenied
	case errors.Is(err, ErrUnauthenticated):
		return ReasonUnauthenticated
	case errors.Is(err, ErrForgedToken):
		return ReasonForgedToken
	case errors.Is(err, ErrPermitsMismatch):
		return ReasonPermitsMismatch
	}
	return ""
}

// BusyError: the lock is held. Remaining is the holder's time left in server
// time when the refusal was made (0 when the lock is free but in lock-delay).
// A lock with no holder and no lock-delay is busy when requests are queued
// on it (strict FIFO: a set's waiter, or an exclusive waiter, keeps its
// place while it waits for its other locks or for shared holders to go):
// then Holder is "", Token 0 and Queued the number of requests ahead. A
// lock whose holders leave room for the request (shared holders and a
// shared request, permits to spare) but whose queue comes first names its
// first holder and sets Queued too.
type BusyError struct {
	Name      string
	Holder    string        // the holder's owner label ("" if free but delayed or queued)
	Token     Token         // the holder's token (0 if free but delayed or queued)
	Remaining time.Duration // holder's remaining TTL, or remaining lock-delay
	Delayed   bool          // the lock is free but still in its lock-delay
	Waited    bool          // the request waited and its wait ran out
	// Queued is the number of requests queued on the lock ahead of this
	// one when they, not its holders or a lock-delay, keep it from this
	// request (the lock is free, or its holders leave room); 0 otherwise.
	Queued int
}

func (e *BusyError) Error() string {
	left := e.Remaining.Round(time.Millisecond)
	switch {
	case e.Queued > 0 && e.Holder != "":
		return fmt.Sprintf("lock %q is held by %q (token %d, %s left) with room for this request, but %d queued request(s) come first%s", e.Name, e.Holder, e.Token, left, e.Queued, ranOut(e.Waited))
	case e.Queued > 0:
		return fmt.Sprintf("lock %q is free but %d queued request(s) come first%s", e.Name, e.Queued, ranOut(e.Waited))
	case e.Delayed:
		return fmt.Sprintf("lock %q is in lock-delay for %s more", e.Name, left)
	case e.Waited:
		return fmt.Sprintf("lock %q is held by %q (token %d, %s left); the wait ran out", e.Name, e.Holder, e.Token, left)
	}
	return fmt.Sprintf("lock %q is held by %q (token %d, %s left)", e.Name, e.Holder, e.Token, left)
}

func ranOut(waited bool) string {
	if waited {
		return "; the wait ran out"
	}
	return ""
}

// Is reports ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// StaleTokenError: Token is older than LastAccepted, the last token accepted
// for Resource (a fenced resource, a guard row, or a lock).
type StaleTokenError struct {
	Resource     string
	Token        Token
	LastAccepted Token
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("token %d is older than accepted token %d", e.Token, e.LastAccepted)
}

// Is reports ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// NotHolderError: Token does not hold lock Name.
type NotHolderError struct {
	Name  string
	Token Token
}

func (e *NotHolderError) Error() string {
	return fmt.Sprintf("token %d does not hold lock %q", e.Token, e.Name)
}

// Is reports ErrNotHolder.
func (e *NotHolderError) Is(target error) bool { return target == ErrNotHolder }

// LeaseExpiredError: Token held lock Name but its lease expired.
type LeaseExpiredError struct {
	Name  string
	Token Token
}

func (e *LeaseExpiredError) Error() string {
	return fmt.Sprintf("lease of lock %q with token %d has expired", e.Name, e.Token)
}

// Is reports ErrLeaseExpired.
func (e *LeaseExpiredError) Is(target error) bool { return target == ErrLeaseExpired }

// UnknownTokenError: Token is greater than any token the store has issued.
type UnknownTokenError struct {
	Token      Token
	LastIssued Token
}

func (e *UnknownTokenError) Error() string {
	return fmt.Sprintf("token %d was never issued (last issued token is %d)", e.Token, e.LastIssued)
}

// Is reports ErrUnknownToken.
func (e *UnknownTokenError) Is(target error) bool { return target == ErrUnknownToken }

// OpConflictError: ID (an op_id or request_id) was already used with a
// different payload.
type OpConflictError struct {
	Field string // "op_id" or "request_id"
	ID    string
}

func (e *OpConflictError) Error() string {
	return fmt.Sprintf("%s %q was already used with a different payload", e.Field, e.ID)
}

// Is reports ErrOpConflict.
func (e *OpConflictError) Is(target error) bool { return target == ErrOpConflict }

// InvalidError: Field is out of bounds. Bound says the rule, e.g.
// "at least 10ms", "at most 512 bytes", "valid UTF-8", "not empty".
type InvalidError struct {
	Field string
	Bound string
	Value string // the offending value, shortened for display ("" if not useful)
}

func (e *InvalidError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("invalid %s %s: must be %s", e.Field, e.Value, e.Bound)
	}
	return fmt.Sprintf("invalid %s: must be %s", e.Field, e.Bound)
}

// Is reports ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns an *InvalidError.
func Invalid(field, bound, value string) error {
	return &InvalidError{Field: field, Bound: bound, Value: value}
}

// ResourceExhaustedError: a request was refused because the store is at a
// configured limit. Limit names it (for example `waiters on lock "x"` or
// "remembered op_ids"), Bound states it ("at most 1024"), Got is what the
// store holds now ("" if not useful). Nothing was changed.
type ResourceExhaustedError struct {
	Limit string
	Bound string
	Got   string
}

func (e *ResourceExhaustedError) Error() string {
	if e.Got != "" {
		return fmt.Sprintf("resource exhausted: %s: %s (now %s)", e.Limit, e.Bound, e.Got)
	}
	return fmt.Sprintf("resource exhausted: %s: %s", e.Limit, e.Bound)
}

// Is reports ErrResourceExhausted.
func (e *ResourceExhaustedError) Is(target error) bool { return target == ErrResourceExhausted }

// Exhausted returns a *ResourceExhaustedError.
func Exhausted(limit, bound, got string) error {
	return &ResourceExhaustedError{Limit: limit, Bound: bound, Got: got}
}

// SessionExpiredError: Session has ended (expired, closed, or never
// opened). Every lease bound to it has been released or has expired, and
// its queued acquires have ended.
type SessionExpiredError struct {
	Session uint64
}

func (e *SessionExpiredError) Error() string {
	return fmt.Sprintf("session %d has expired or was closed; its leases are lost", e.Session)
}

// Is reports ErrSessionExpired.
func (e *SessionExpiredError) Is(target error) bool { return target == ErrSessionExpired }

// PermissionDeniedError: Principal may not do What on Name. What is a
// permission ("lock", "read", "write", "admin") when a role is missing, or
// "lease", "session", "request_id" or "op_id" when the lease, session,
// request or write belongs to another principal.
type PermissionDeniedError struct {
	Principal string
	What      string
	Name      string
}

func (e *PermissionDeniedError) Error() string {
	p := e.Principal
	if p == "" {
		p = "(anonymous)"
	}
	switch e.What {
	case "lease", "session", "request_id", "op_id":
		return fmt.Sprintf("permission denied: %s %q belongs to another principal than %s", e.What, e.Name, p)
	}
	if e.Name == "" {
		return fmt.Sprintf("permission denied: principal %s has no %s permission", p, e.What)
	}
	return fmt.Sprintf("permission denied: principal %s has no %s permission on %q", p, e.What, e.Name)
}

// Is reports ErrPermissionDenied.
func (e *PermissionDeniedError) Is(target error) bool { return target == ErrPermissionDenied }

// UnauthenticatedError: the request was not authenticated; Reason says
// why ("no credentials", "unknown token", "revoked token", "expired token",
// "malformed token", ...). It never holds a secret.
type UnauthenticatedError struct {
	Reason string
}

func (e *UnauthenticatedError) Error() string { return "unauthenticated: " + e.Reason }

// Is reports ErrUnauthenticated.
func (e *UnauthenticatedError) Is(target error) bool { return target == ErrUnauthenticated }

// ForgedTokenError: Token, offered for lock Name, carries no proof that
// this cluster granted it for that lock; Reason says what failed (it never
// holds the signature).
type ForgedTokenError struct {
	Token  Token
	Name   string
	Reason string
}

func (e *ForgedTokenError) Error() string {
	return fmt.Sprintf("forged token: token %d for %q: %s", e.Token, e.Name, e.Reason)
}

// Is reports ErrForgedToken.
func (e *ForgedTokenError) Is(target error) bool { return target == ErrForgedToken }
