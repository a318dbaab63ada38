package fence

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Each request's Validate is the one judgement of its fields that the
// client (before sending), the server (before calling its Service) and the
// node (before proposing) make alike: the first bad field, in the order
// each method lists, is refused with an *InvalidError naming it (as the
// proto names it) and its bound, and nothing is sent, called or proposed.
// The order is a contract (testkit/servicetest pins it). The state
// machine judges each command again as it applies it, by the rules in the
// log (package state), so a command in the log is refused alike on every
// replica.

// FieldCheck replaces Validate's own check of one field with Err: a check
// that only the wire form of a request can make (a duration that does not
// parse; a ttl given as 0, which a request cannot tell from absent), or
// that the transport makes itself (Err nil: a stream's session binding,
// judged after the op's fields). Field is the name Validate's order gives
// the check: "session_ref" for a request's SessionRef, else the field's
// proto name.
type FieldCheck struct {
	Field string
	Err   error
}

// firstBad returns the first error of own, in order, each replaced by the
// wire check of the same Field when there is one.
func firstBad(wire []FieldCheck, own ...FieldCheck) error {
	for _, c := range own {
		err := c.Err
		for _, w := range wire {
			if w.Field == c.Field {
				err = w.Err
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckAs checks a request's binding to a session: Seq or Ack without a
// session is refused naming idField; Ack past Seq (when Seq is set) naming
// ackField (Ack is the lowest seq not yet answered, and this one is not).
func (r SessionRef) CheckAs(idField, ackField string) error {
	switch {
	case r.ID == 0 && (r.Seq != 0 || r.Ack != 0):
		return Invalid(idField, "set (the id SessionService.Open returned) when seq or ack is", "")
	case r.Seq != 0 && r.Ack > r.Seq:
		return Invalid(ackField, fmt.Sprintf("at most seq (%d): the lowest seq not yet answered", r.Seq), strconv.FormatUint(r.Ack, 10))
	}
	return nil
}

// TTLWithSession is the refusal of a ttl given (ttl, the value given) to
// an acquire bound to session: the lease lasts as long as the session, so
// the ttl would be ignored.
func TTLWithSession(session uint64, ttl time.Duration) error {
	return Invalid("ttl", fmt.Sprintf("absent for a lease bound to a session (a session's leases live as long as the session: "+
		"leave ttl out; KeepAlive changes session %d's TTL)", session), ttl.String())
}

// validateWireID checks a request_id or op_id: ValidateID's bound, and
// valid UTF-8 (every wire carries ids as strings).
func validateWireID(field, id string) error {
	if err := ValidateID(field, id); err != nil {
		return err
	}
	if !utf8.ValidString(id) {
		return Invalid(field, "valid UTF-8", "")
	}
	return nil
}

// optionalTTL checks a ttl that may be absent (0).
// retryLimits are the bounds a request that may be a retry is judged by
// before the store looks its id up: the format's, not the rules'.
var retryLimits = Limits{MaxTTL: LongestMaxTTL}

func optionalTTL(ttl time.Duration, l Limits) error {
	if ttl == 0 {
		return nil
	}
	return ValidateTTL(ttl, l.maxTTL())
}

// Validate checks an acquire, in this order: session_ref, name (or locks),
// mode, permits, owner, ttl, wait, lock_delay, request_id. An acquire names
// one lock (name, with its mode and permits) or a set (locks, with name
// empty and mode and permits at their defaults). An acquire bound to a session leaves
// ttl 0 (its lease lasts as long as the session); one without must set it.
//
// An acquire that may be the retry of one the store already decided (it
// has a request_id, or a session seq) is judged by the format's bounds
// only (retryLimits): the store checks its rules' bounds after it looked
// the id up, so that a retry of an acquire granted under higher bounds —
// the server restarted with a lower --max-ttl or --max-lock-delay since —
// learns its first outcome instead of a refusal.
func (r AcquireRequest) Validate(l Limits, wire ...FieldCheck) error {
	var ttl error
	rl := l
	if r.RequestID != "" || r.Session.Seq != 0 {
		rl = retryLimits
	}
	switch {
	case r.Session.ID == 0 && r.TTL == 0:
		ttl = Invalid("ttl", "set ("+l.ttlRange()+") unless the acquire is bound to a session (session.id)", "")
	case r.Session.ID != 0 && r.TTL != 0:
		ttl = TTLWithSession(r.Session.ID, r.TTL)
	default:
		ttl = optionalTTL(r.TTL, rl)
	}
	var name, mode, permits error
	switch {
	case len(r.Locks) > 0 && r.Name != "":
		name = Invalid("name", "absent when locks is set (a set names its locks in locks)", "")
	case len(r.Locks) > 0:
		name = ValidateLocks(r.Locks)
		if r.Mode != Exclusive {
			mode = Invalid("mode", "absent when locks is set (each lock of a set has its own)", r.Mode.String())
		}
		if r.Permits != 0 {
			permits = Invalid("permits", "absent when locks is set (each lock of a set has its own)", strconv.FormatUint(uint64(r.Permits), 10))
		}
	default:
		name = ValidateName("name", r.Name)
		if err := ValidateModePermits("", r.Mode, r.Permits); err != nil {
			if err.(*InvalidError).Field == "permits" {
				permits = err
			} else {
				mode = err
			}
		}
	}
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"name", name},
		FieldCheck{"mode", mode},
		FieldCheck{"permits", permits},
		FieldCheck{"owner", ValidateOwner(r.Owner)},
		FieldCheck{"ttl", ttl},
		FieldCheck{"wait", ValidateDuration("wait", r.Wait, MaxWait)},
		FieldCheck{"lock_delay", rl.ValidateLockDelay(r.LockDelay)},
		FieldCheck{"request_id", validateWireID("request_id", r.RequestID)},
	)
}

// Validate checks a renew: session_ref, name, token, ttl (0 keeps the
// lease's).
func (r RenewRequest) Validate(l Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"name", ValidateName("name", r.Name)},
		FieldCheck{"token", ValidateToken(r.Token)},
		FieldCheck{"ttl", optionalTTL(r.TTL, l)},
	)
}

// Validate checks a release: session_ref, name, token.
func (r ReleaseRequest) Validate(_ Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"name", ValidateName("name", r.Name)},
		FieldCheck{"token", ValidateToken(r.Token)},
	)
}

// Validate checks a list: prefix (may be empty, else like a name), limit
// (1 or more), after (a name, or "" for the first page).
func (r ListRequest) Validate(_ Limits, wire ...FieldCheck) error {
	var prefix, limit, after error
	switch {
	case len(r.Prefix) > MaxNameBytes:
		prefix = Invalid("prefix", fmt.Sprintf("at most %d bytes", MaxNameBytes), fmt.Sprintf("(%d bytes)", len(r.Prefix)))
	case !utf8.ValidString(r.Prefix):
		prefix = Invalid("prefix", "valid UTF-8", "")
	}
	if r.Limit < 1 {
		limit = Invalid("limit", "1 or more", strconv.Itoa(r.Limit))
	}
	if r.After != "" {
		after = ValidateName("after", r.After)
	}
	return firstBad(wire, FieldCheck{"prefix", prefix}, FieldCheck{"limit", limit}, FieldCheck{"after", after})
}

// Validate checks a write: session_ref, resource, token, value, op_id.
func (r WriteRequest) Validate(_ Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"resource", ValidateName("resource", r.Resource)},
		FieldCheck{"token", ValidateToken(r.Token)},
		FieldCheck{"value", ValidateValue(r.Value)},
		FieldCheck{"op_id", validateWireID("op_id", r.OpID)},
		FieldCheck{"signed_token", validateSignedFor(r.Signed, r.Token)},
	)
}

// Validate checks an add: session_ref, resource, token, op_id.
func (r AddRequest) Validate(_ Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"resource", ValidateName("resource", r.Resource)},
		FieldCheck{"token", ValidateToken(r.Token)},
		FieldCheck{"op_id", validateWireID("op_id", r.OpID)},
		FieldCheck{"signed_token", validateSignedFor(r.Signed, r.Token)},
	)
}

// Validate checks a delete: session_ref, resource, token, op_id.
func (r DeleteRequest) Validate(_ Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", r.Session.CheckAs("session.id", "session.ack")},
		FieldCheck{"resource", ValidateName("resource", r.Resource)},
		FieldCheck{"token", ValidateToken(r.Token)},
		FieldCheck{"op_id", validateWireID("op_id", r.OpID)},
		FieldCheck{"signed_token", validateSignedFor(r.Signed, r.Token)},
	)
}

// Validate checks a session open: ttl (required), request_id.
// An open with a request_id is judged by the format's bounds only, as an
// acquire is (AcquireRequest.Validate): the store checks its MaxTTL after
// the id's lookup.
func (r OpenSessionRequest) Validate(l Limits, wire ...FieldCheck) error {
	rl := l
	if r.RequestID != "" {
		rl = retryLimits
	}
	ttl := optionalTTL(r.TTL, rl)
	if r.TTL == 0 {
		ttl = Invalid("ttl", "set ("+l.ttlRange()+")", "")
	}
	return firstBad(wire,
		FieldCheck{"ttl", ttl},
		FieldCheck{"request_id", validateWireID("request_id", r.RequestID)},
	)
}

// SessionID is the session a KeepAlive names: ID, or Session.ID when ID
// is 0.
func (r KeepAliveRequest) SessionID() uint64 { return sessionOf(r.ID, r.Session) }

// Validate checks a keepalive: session_ref (its id, when set, is ID; its
// seq and ack), session (set, as ID or Session.ID), ttl (0 keeps the
// session's).
func (r KeepAliveRequest) Validate(l Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", sessionBinding(r.ID, r.Session)},
		FieldCheck{"session", requireSession(r.SessionID())},
		FieldCheck{"ttl", optionalTTL(r.TTL, l)},
	)
}

// SessionID is the session a CloseSession names: ID, or Session.ID when
// ID is 0.
func (r CloseSessionRequest) SessionID() uint64 { return sessionOf(r.ID, r.Session) }

// Validate checks a close: session_ref and session, as KeepAlive's.
func (r CloseSessionRequest) Validate(_ Limits, wire ...FieldCheck) error {
	return firstBad(wire,
		FieldCheck{"session_ref", sessionBinding(r.ID, r.Session)},
		FieldCheck{"session", requireSession(r.SessionID())},
	)
}

func sessionOf(id uint64, ref SessionRef) uint64 {
	if id != 0 {
		return id
	}
	return ref.ID
}

// sessionBinding checks the SessionRef of a KeepAlive or Close of session
// id: its ID, when both are set, is id; its seq and ack are bound to the
// session.
func sessionBinding(id uint64, ref SessionRef) error {
	if id != 0 && ref.ID != 0 && id != ref.ID {
		return Invalid("session_ref.id", "0 or session ("+strconv.FormatUint(id, 10)+")", strconv.FormatUint(ref.ID, 10))
	}
	ref.ID = sessionOf(id, ref)
	return ref.CheckAs("session", "session_ref.ack")
}

// requireSession refuses session 0 where a session is required.
func requireSession(id uint64) error {
	if id == 0 {
		return Invalid("session", "set (the id SessionService.Open returned)", "")
	}
	return nil
}

// validateSignedFor checks a write's optional signed token: absent (zero),
// or for the write's own token.
func validateSignedFor(st SignedToken, token Token) error {
	if st.Token != 0 && st.Token != token {
		return Invalid("signed_token", "a signed form of token "+token.String(), st.Redacted())
	}
	return nil
}
