package state

import (
	"strconv"

	"github.com/fenceworks/fence"
)

// Validation of each command's fields as it is applied, in a fixed order
// so the first bad field is the one reported. A refused command changes
// nothing. Requests are judged before they are proposed (their fence
// Validate, in the node); this is the check the log needs: a command in
// the log is applied or refused by these rules, the same way on every
// replica and at every replay (R1), whoever proposed it.

// validateAcquire checks an acquire's form: its ttl and lock_delay
// against the format's bounds only. The rules' bounds (Config.MaxTTL,
// MaxLockDelay) are acquireRules, checked after the request_id lookup: a
// retry of an acquire granted under higher bounds (the rules lowered
// since, by a restart with a lower --max-ttl) is answered with its first
// outcome, not refused — its client would never learn it holds the lock.
func (m *impl) validateAcquire(c Command) error {
	var ttl error
	if c.Session == 0 { // a session-bound lease lasts as long as its session
		ttl = fence.ValidateTTL(c.TTL, fence.LongestMaxTTL)
	}
	var name error
	switch {
	case len(c.Locks) > 0 && (c.Name != "" || c.Mode != fence.Exclusive || c.Permits != 0):
		name = fence.Invalid("name", "absent, with mode and permits, when locks is set", c.Name)
	case len(c.Locks) > 0:
		name = fence.ValidateLocks(c.Locks)
	default:
		name = first(fence.ValidateName("name", c.Name), fence.ValidateModePermits("", c.Mode, c.Permits))
	}
	return first(
		name,
		fence.ValidateOwner(c.Owner),
		ttl,
		fence.ValidateDuration("wait", c.Wait, fence.MaxWait),
		fence.Limits{}.ValidateLockDelay(c.LockDelay),
		fence.ValidateID("request_id", c.RequestID),
		requestIDForWait(c),
		reservedRequestID(c),
	)
}

// acquireRules checks a new acquire (not the retry of a remembered one)
// against the rules in force.
func (m *impl) acquireRules(c Command) error {
	var ttl error
	if c.Session == 0 {
		ttl = fence.ValidateTTL(c.TTL, m.cfg.MaxTTL)
	}
	return first(ttl, m.cfg.Limits().ValidateLockDelay(c.LockDelay))
}

// reservedRequestID refuses a request_id starting as a SessionRequestID
// unless it is exactly the one of this acquire's session and seq: no
// client may take over the id of another session's acquire.
func reservedRequestID(c Command) error {
	if generatedID(c.RequestID) && (c.Session == 0 || c.Seq == 0 || c.RequestID != SessionRequestID(c.Session, c.Seq)) {
		return fence.Invalid("request_id", "not starting with NUL 's' (reserved for session acquires)", strconv.Quote(c.RequestID))
	}
	return nil
}

func requestIDForWait(c Command) error {
	if c.Wait > 0 && c.RequestID == "" {
		return fence.Invalid("request_id", "not empty when wait > 0", "")
	}
	return nil
}

func (m *impl) validateRenew(c Command) error {
	var ttl error
	if c.TTL != 0 {
		ttl = fence.ValidateTTL(c.TTL, m.cfg.MaxTTL)
	}
	return first(fence.ValidateName("name", c.Name), fence.ValidateToken(c.Token), ttl)
}

func (m *impl) validateRelease(c Command) error {
	return first(fence.ValidateName("name", c.Name), fence.ValidateToken(c.Token))
}

func (m *impl) validateCancelWait(c Command) error {
	var empty error
	if c.RequestID == "" {
		empty = fence.Invalid("request_id", "not empty", "")
	}
	return first(fence.ValidateName("name", c.Name), empty, fence.ValidateID("request_id", c.RequestID))
}

func (m *impl) validateWrite(c Command) error {
	return first(
		fence.ValidateName("resource", c.Name),
		fence.ValidateToken(c.Token),
		fence.ValidateValue(c.Value),
		fence.ValidateID("op_id", c.OpID),
	)
}

func (m *impl) validateDelete(c Command) error {
	return first(
		fence.ValidateName("resource", c.Name),
		fence.ValidateToken(c.Token),
		fence.ValidateID("op_id", c.OpID),
	)
}

func (m *impl) validateAdd(c Command) error {
	return first(
		fence.ValidateName("resource", c.Name),
		fence.ValidateToken(c.Token),
		fence.ValidateID("op_id", c.OpID),
	)
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
