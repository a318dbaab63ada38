package state

import (
	"slices"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// acquire grants cmd's lock (cmd.Name, or the set cmd.Locks) when it is
// free for it, queues the request on every lock when cmd.Wait > 0, and is
// busy otherwise. A request_id seen before gets the outcome of its first
// attempt. With cmd.Session (live: sequenced checked it) the acquire is
// session-bound: its TTL is ignored, and the lease (or the wait) belongs
// to the session.
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
	var one [1]fence.LockSpec
	var lone [1]*lockEntry
	specs, ls := one[:], lone[:] // one lock: no allocation
	if len(cmd.Locks) > 0 {
		specs = fence.SortLocks(cmd.Locks)
		ls = make([]*lockEntry, len(specs))
	} else {
		one[0] = fence.LockSpec{Name: cmd.Name, Mode: cmd.Mode, Permits: cmd.Permits}
	}
	var res Result
	for i, sp := range specs {
		ls[i] = m.names.get(sp.Name)
	}
	m.settleLocks(ls, &res.Events)
	defer m.touchAll(ls) // ls as it is on return: locks made below included

	if cmd.RequestID != "" {
		if r := m.findRequest(cmd.RequestID); r != nil {
			if err := owns(cmd, r.principal, "request_id", cmd.RequestID); err != nil {
				res.Err = err
				return res
			}
			if !r.samePayload(cmd, specs) {
				res.Err = &fence.OpConflictError{Field: "request_id", ID: cmd.RequestID}
				return res
			}
			if r.state == reqDone && r.outcome == outcomeWaitedOut {
				// The wait ran out and nothing was granted under this id:
				// a retry is a new request (as after a try refused busy),
				// answered with the locks as they are now, not with the old
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
	for i, sp := range specs {
		if err := ls[i].permitsFor(sp); err != nil {
			res.Err = err
			return res
		}
	}
	free := true
	for i, sp := range specs {
		if !ls[i].freeFor(sp, m.expiryTime()) {
			free = false
			break
		}
	}
	if !free && len(specs) == 1 && plant.On(plant.GrantHeld) && m.plantGrantHeld(ls[0]) {
		free = true
	}
	if !free && len(specs) == 1 && specs[0].Mode == fence.Shared && plant.On(plant.SharedBeside) && m.plantSharedBeside(ls[0]) {
		free = true
	}
	switch {
	case free:
		if err := m.admitToken(); err != nil {
			res.Err = err
			return res
		}
		if err := first(m.admitLocks(ls, &res.Events), m.admitLockQuota(cmd.Principal, len(specs))); err != nil {
			res.Err = err
			return res
		}
		var req *request
		if cmd.RequestID != "" {
			if err := m.admitRequestID(cmd.RequestID, cmd.Principal); err != nil {
				res.Err = err
				return res
			}
			req = m.newRequest(cmd, specs, s)
		}
		for i, sp := range specs {
			if ls[i] == nil {
				ls[i] = m.lockFor(sp.Name)
			}
		}
		if req != nil {
			req.shareNames(ls) // share the bytes: remembered requests are many
		}
		g := m.grantTo(ls, specs, cmd.Owner, cmd.Principal, cmd.TTL, cmd.LockDelay, req, s)
		res.Lease = g.lease(m.clock)
		if req != nil {
			res.Attempt = req.attempt
		}
	case cmd.Wait > 0:
		// A wait could only end in a grant, which needs a token.
		if err := m.admitToken(); err != nil {
			res.Err = err
			return res
		}
		// A set's waiter makes the locks of it that do not exist yet
		// (held, delayed or with waiters: MaxLocks counts them).
		if err := first(m.admitWaiters(ls), m.admitLocks(ls, &res.Events), m.admitWaiterQuota(cmd.Principal),
			m.admitLockQuota(cmd.Principal, len(specs)), m.admitRequestID(cmd.RequestID, cmd.Principal)); err != nil {
			res.Err = err
			return res
		}
		for i, sp := range specs { // only once admitted: a refusal makes no lock
			if ls[i] == nil {
				ls[i] = m.lockFor(sp.Name)
			}
		}
		req := m.newRequest(cmd, specs, s)
		if s != nil {
			s.addWaiter(req)
		}
		req.shareNames(ls)
		req.state = reqQueued
		req.deadline = m.clock + int64(cmd.Wait)
		for i, l := range ls {
			if l.unused() {
				l.permits = specs[i].Permits
			}
			l.queue = append(l.queue, req)
			m.noteQueued(l, req)
		}
		m.addWaiterCount(req)
		m.setLive(req)
		res.Queued = true
		res.Attempt = req.attempt
	default:
		// A set names the lock that blocks it longest, so that a client
		// waiting Remaining before it retries does not retry in vain.
		var busy *fence.BusyError
		for i, sp := range specs {
			if !ls[i].freeFor(sp, m.expiryTime()) {
				if b := m.busyOf(ls[i], sp); busy == nil || b.Remaining > busy.Remaining {
					busy = b
				}
			}
		}
		if busy != nil {
			res.Err = busy
		}
	}
	return res
}

// touchAll files each lock of ls (nil ones skipped).
func (m *impl) touchAll(ls []*lockEntry) {
	for _, l := range ls {
		if l != nil {
			m.touch(l)
		}
	}
}

func (m *impl) newRequest(cmd Command, specs []fence.LockSpec, s *session) *request {
	r := &request{
		sess:      s,
		id:        cmd.RequestID,
		name:      specs[0].Name,
		mode:      specs[0].Mode,
		permits:   specs[0].Permits,
		owner:     cmd.Owner,
		ttl:       cmd.TTL,
		wait:      cmd.Wait,
		lockDelay: cmd.LockDelay,
		attempt:   1,
		principal: cmd.Principal,
	}
	if len(specs) > 1 {
		r.set = slices.Clone(specs)
		r.mode, r.permits = 0, 0
	}
	return r
}

// shareNames makes r's names the locks' own strings.
func (r *request) shareNames(ls []*lockEntry) {
	r.name = ls[0].name
	for i := range r.set {
		r.set[i].Name = ls[i].name
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
