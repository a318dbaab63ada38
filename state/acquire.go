package state

import (
	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// acquire grants lock cmd.Name when it is free, queues the request when
// cmd.Wait > 0, and is busy otherwise. A request_id seen before gets the
// outcome of its first attempt. With cmd.Session (live: sequenced checked
// it) the acquire is session-bound: its TTL is ignored, and the lease (or
// the wait) belongs to the session.
func (m *impl) acquire(cmd Command) Result {
	var s *session
	if cmd.Session != 0 {
		cmd.TTL = 0
		var err error
		if s, err = m.liveSession(cmd.Session); err != nil {
			return Result{Err: err}
		}
	}
	if err := m.validateAcquire(cmd); err != nil {
		return Result{Err: err}
	}
	var res Result
	l := m.byName[cmd.Name]
	if l != nil {
		m.settle(l, &res.Events)
		defer m.touch(l)
	}

	if cmd.RequestID != "" {
		if r := m.findRequest(cmd.RequestID); r != nil {
			if err := owns(cmd, r.principal, "request_id", cmd.RequestID); err != nil {
				res.Err = err
				return res
			}
			if !r.samePayload(cmd) {
				res.Err = &fence.OpConflictError{Field: "request_id", ID: cmd.RequestID}
				return res
			}
			if r.state == reqDone && r.outcome == outcomeWaitedOut {
				// The wait ran out and nothing was granted under this id:
				// a retry is a new request (as after a try refused busy),
				// answered with the lock as it is now, not with the old
				// BUSY. No id is granted twice: it never was granted.
				m.requests.remove(cmd.RequestID)
			} else {
				out := m.replay(r)
				out.Events = res.Events
				return out
			}
		}
	}

	if err := m.acquireRules(cmd); err != nil {
		res.Err = err
		return res
	}
	switch {
	case l == nil || l.free(m.expiryTime()) || plant.On(plant.GrantHeld) && m.plantGrantHeld(l):
		if err := m.admitToken(); err != nil {
			res.Err = err
			return res
		}
		if err := m.admitLock(l, &res.Events); err != nil {
			res.Err = err
			return res
		}
		var req *request
		if cmd.RequestID != "" {
			if err := m.admitRequestID(cmd.RequestID, cmd.Principal); err != nil {
				res.Err = err
				return res
			}
			req = m.newRequest(cmd, s)
		}
		if l == nil {
			l = m.lockFor(cmd.Name)
			defer m.touch(l)
		}
		if req != nil {
			req.name = l.name // share the bytes: remembered requests are many
		}
		g := m.grantTo(l, cmd.Owner, cmd.Principal, cmd.TTL, cmd.LockDelay, req, s)
		res.Lease = g.lease(l.name, m.clock)
		if req != nil {
			res.Attempt = req.attempt
		}
	case cmd.Wait > 0:
		// A wait could only end in a grant, which needs a token.
		if err := m.admitToken(); err != nil {
			res.Err = err
			return res
		}
		if err := first(m.admitWaiter(l), m.admitWaiterQuota(cmd.Principal), m.admitRequestID(cmd.RequestID, cmd.Principal)); err != nil {
			res.Err = err
			return res
		}
		req := m.newRequest(cmd, s)
		if s != nil {
			s.addWaiter(req)
		}
		req.name = l.name
		req.state = reqQueued
		req.deadline = m.clock + int64(cmd.Wait)
		l.queue = append(l.queue, req)
		m.noteQueued(l, req)
		m.addWaiterCount(req)
		m.setLive(req)
		res.Queued = true
		res.Attempt = req.attempt
	default:
		res.Err = m.busy(l)
	}
	return res
}

func (m *impl) newRequest(cmd Command, s *session) *request {
	return &request{
		sess:      s,
		id:        cmd.RequestID,
		name:      cmd.Name,
		owner:     cmd.Owner,
		ttl:       cmd.TTL,
		wait:      cmd.Wait,
		lockDelay: cmd.LockDelay,
		attempt:   1,
		principal: cmd.Principal,
	}
}

// admitRequestID is admitRequest for id, except that a SessionRequestID is
// never remembered in the request memory (its session's saved result
// answers its retries), so it needs no room there.
func (m *impl) admitRequestID(id, principal string) error {
	if generatedID(id) {
		return nil
	}
	return m.admitRequest(principal)
}
