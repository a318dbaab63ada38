package state

import (
	"time"

	"github.com/fenceworks/fence"
)

type requestState uint8

const (
	reqQueued requestState = iota + 1 // waiting in a lock's queue
	reqHeld                           // granted and its lease still held
	reqDone                           // outcome final: see outcome
)

type outcome uint8

const (
	outcomeNone         outcome = iota
	outcomeReleased             // granted, then released (or given up)
	outcomeExpired              // granted, then its lease expired
	outcomeWaitedOut            // queued, and the wait ran out
	outcomeSessionEnded         // queued, and its session ended (never remembered: nothing was granted)
	outcomeCancelled            // queued, and cancelled (never remembered: nothing was granted)
)

// request is an acquire that carried a request_id. While queued or held it
// is live (impl.live); once its outcome is final it moves to the bounded
// request memory, so a retry learns that outcome instead of a second grant.
type request struct {
	id   string
	name string // its lock, or its set's first (by name)
	// mode and permits are how it asks for its one lock; set (nil for one
	// lock) are a set's locks, sorted by name.
	mode      fence.Mode
	permits   uint32
	set       []fence.LockSpec
	owner     string
	ttl       time.Duration
	wait      time.Duration
	lockDelay time.Duration
	deadline  int64 // queued: server time the wait runs out
	state     requestState
	token     fence.Token // granted: the lease's token
	outcome   outcome
	attempt   uint32   // attempt generation: 1, then +1 per applied retry while live
	sess      *session // session-bound: the session it was made on (nil: none)
	principal string   // who asked (auth.go)
}

// retry makes a new attempt of a live request (saturating: after 2^32-1
// retries the last attempt stays current).
func (m *impl) retry(r *request) {
	if r.attempt < 1<<32-1 {
		r.attempt++
	}
}

// samePayload reports whether cmd is a retry of r. The wait is not part of
// the payload: a client retrying may send only what is left of it. A
// session-bound acquire has TTL 0 (its TTL is ignored) and, while live,
// must come on the same session.
func (r *request) samePayload(cmd Command, specs []fence.LockSpec) bool {
	return sameSpecs(r, specs) && r.owner == cmd.Owner && r.ttl == cmd.TTL && r.lockDelay == cmd.LockDelay &&
		(r.state == reqDone || r.sessionID() == cmd.Session) // a remembered outcome does not keep its session
}

// sameSpecs reports whether r asked for exactly specs (sorted).
func sameSpecs(r *request, specs []fence.LockSpec) bool {
	var buf [1]fence.LockSpec
	mine := r.specs(&buf)
	if len(mine) != len(specs) {
		return false
	}
	for i := range mine {
		if mine[i] != specs[i] {
			return false
		}
	}
	return true
}

// modeOn is the mode r asks for lock name in.
func (r *request) modeOn(name string) fence.Mode {
	for _, s := range r.set {
		if s.Name == name {
			return s.Mode
		}
	}
	return r.mode
}

// sessionID is the id of r's session, 0 if none.
func (r *request) sessionID() uint64 {
	if r.sess == nil {
		return 0
	}
	return r.sess.id
}

// doneRequest is a request whose outcome is final, as remembered: only
// what a retry is compared with and answered from, held inline in the
// request memory (no allocation of its own beyond its strings).
type doneRequest struct {
	name, owner string
	mode        fence.Mode
	permits     uint32
	set         []fence.LockSpec
	ttl         time.Duration
	lockDelay   time.Duration
	token       fence.Token
	attempt     uint32
	outcome     outcome
	who         uint32 // the principal that asked (its memory's number; 0 none)
}

func (d doneRequest) by() uint32 { return d.who }

func (d doneRequest) ownedBy(id uint32) doneRequest { d.who = id; return d }

func (r *request) done() doneRequest {
	return doneRequest{name: r.name, mode: r.mode, permits: r.permits, set: r.set, owner: r.owner, ttl: r.ttl, lockDelay: r.lockDelay, token: r.token, attempt: r.attempt, outcome: r.outcome}
}

// request rebuilds the request d, made by principal, remembers (state
// reqDone).
func (d doneRequest) request(id, principal string) *request {
	return &request{id: id, name: d.name, mode: d.mode, permits: d.permits, set: d.set, owner: d.owner, ttl: d.ttl, lockDelay: d.lockDelay, token: d.token, attempt: d.attempt,
		outcome: d.outcome, state: reqDone, principal: principal}
}

// findRequest returns the live or remembered request with this id. A
// remembered one is a copy: changing it changes nothing.
func (m *impl) findRequest(id string) *request {
	if r := m.live[id]; r != nil {
		return r
	}
	if d, ok := m.requests.get(id); ok {
		return d.request(id, m.requests.principal(d.who))
	}
	return nil
}

// finish makes r's outcome final and moves it from live to memory. A
// request with a SessionRequestID is not remembered there: only its
// session's saved result refers to it (it is answered by seq).
func (m *impl) finish(r *request, out outcome) {
	r.state = reqDone
	r.outcome = out
	r.deadline = 0
	m.unsetLive(r.id)
	if r.sess != nil && r.sess.waiters != nil {
		delete(r.sess.waiters, r.id)
	}
	if !generatedID(r.id) {
		m.requests.put(r.id, r.done(), m.clock, r.principal)
		m.rememberedBy(r.principal)
	}
}

// replay answers a retried acquire with the outcome of its first attempt.
// A retry of a request still queued or holding its lock is a new attempt:
// from now on only a cancel naming this attempt ends it. The lock r names
// has been settled.
func (m *impl) replay(r *request) Result {
	res := m.replayOutcome(r)
	res.Attempt = r.attempt
	return res
}

func (m *impl) replayOutcome(r *request) Result {
	switch r.state {
	case reqQueued:
		m.retry(r)
		return Result{Queued: true, Replayed: true}
	case reqHeld:
		m.retry(r)
		g := m.names.get(r.name).holderWith(r.token)
		return Result{Lease: g.lease(m.clock), Replayed: true}
	}
	switch r.outcome {
	case outcomeExpired:
		return Result{Err: &fence.LeaseExpiredError{Name: r.name, Token: r.token}, Replayed: true}
	case outcomeReleased:
		return Result{Err: &fence.NotHolderError{Name: r.name, Token: r.token}, Replayed: true}
	case outcomeSessionEnded:
		return Result{Err: &fence.SessionExpiredError{Session: r.sessionID()}, Replayed: true}
	}
	err := &fence.BusyError{Name: r.name, Waited: true}
	if l := m.names.get(r.name); l != nil {
		err = m.busy(l)
		err.Waited = true
	}
	return Result{Err: err, Replayed: true}
}

// setLive records r as queued or holding its lock. A live request_id is
// remembered when its request ends, so it counts toward its principal's
// quota of ids from now on (admitRequest): an outside test had a principal
// hold 20 leases with request_ids under a quota of 5 and, as they ended,
// fill the whole id memory.
func (m *impl) setLive(r *request) {
	if _, ok := m.live[r.id]; !ok && r.principal != "" && !generatedID(r.id) {
		m.liveBy[r.principal]++
	}
	m.live[r.id] = r
}

// unsetLive forgets live request id (setLive's count with it).
func (m *impl) unsetLive(id string) {
	r, ok := m.live[id]
	if !ok {
		return
	}
	if r.principal != "" && !generatedID(r.id) {
		if m.liveBy[r.principal]--; m.liveBy[r.principal] <= 0 {
			delete(m.liveBy, r.principal)
		}
	}
	delete(m.live, id)
}
