package reqcheck

import (
	"fmt"
	"time"

	"github.com/fenceworks/fence"
)

// SessionRef checks a request's binding to a session: seq or ack without a
// session is refused naming sessionField; ack past seq (when seq is set)
// naming ackField (ack is the lowest seq not yet answered, and this one is
// not).
func SessionRef(ref fence.SessionRef, sessionField, ackField string) error {
	switch {
	case ref.ID == 0 && (ref.Seq != 0 || ref.Ack != 0):
		return fence.Invalid(sessionField, "set (the id SessionService.Open returned) when seq or ack is", "")
	case ref.Seq != 0 && ref.Ack > ref.Seq:
		return fence.Invalid(ackField, fmt.Sprintf("at most seq (%d): the lowest seq not yet answered", ref.Seq), fmt.Sprint(ref.Ack))
	}
	return nil
}

// TTLRequired is the refusal of a session open that sets no ttl.
func TTLRequired(maxTTL time.Duration) error {
	return fence.Invalid("ttl", fmt.Sprintf("set (between %s and %s)", fence.MinTTL, maxTTL), "")
}

// AcquireTTLRequired is the refusal of an acquire without a session that
// sets no ttl (one bound to a session may: its lease lasts as long as the
// session).
func AcquireTTLRequired(maxTTL time.Duration) error {
	return fence.Invalid("ttl", fmt.Sprintf("set (between %s and %s) unless the acquire is bound to a session (session.id)", fence.MinTTL, maxTTL), "")
}

// AcquireTTLWithSession is the refusal of an acquire bound to session
// that also sets a ttl: the lease lasts as long as the session, so the ttl
// would be ignored (Renew refuses the same in the machine). ttl is the
// value given.
func AcquireTTLWithSession(session uint64, ttl time.Duration) error {
	return fence.Invalid("ttl", fmt.Sprintf("absent for a lease bound to a session (a session's leases live as long as the session: "+
		"leave ttl out; KeepAlive changes session %d's TTL)", session), ttl.String())
}

// Session refuses session 0 where a session is required (KeepAlive,
// Close).
func Session(id uint64) error {
	if id == 0 {
		return fence.Invalid("session", "set (the id SessionService.Open returned)", "")
	}
	return nil
}
