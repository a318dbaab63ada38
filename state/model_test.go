package state

import (
	"sort"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
)

// model is the reference: the rules of doc.go written as plainly as possible
// (no heap, no memories, no tombstones, no lock-delay, nothing forgotten,
// no caps). It is the rules after an OpConfig: retries of live requests make
// new attempts, and a cancel acts only on the attempt it names.
// Expiry (leases, waits) is decided at decided = max over commands of
// Now - Slack; grants and renewals start at now.
type model struct {
	now     int64
	decided int64
	counter fence.Token
	locks   map[string]*mLock
	reqs    map[string]*mReq
	res     map[string]*ResourceState
	ops     map[[2]string]mOp
}

type mLock struct {
	held           bool
	owner, rid     string
	token, lastTok fence.Token
	ttl            time.Duration
	exp, freedAt   int64
	lastOwner      string
	lastExpired    bool
	queue          []*mReq
}

type mReq struct {
	id, name, owner, state string // state: queued held expired released waited
	ttl                    time.Duration
	deadline               int64
	token                  fence.Token
	attempt                uint32
}

type mOp struct {
	c    Command
	last fence.Token
	ver  uint64
	sum  int64
}

func newModel() *model {
	return &model{locks: map[string]*mLock{}, reqs: map[string]*mReq{}, res: map[string]*ResourceState{}, ops: map[[2]string]mOp{}}
}

func (m *model) lock(name string) *mLock {
	if m.locks[name] == nil {
		m.locks[name] = &mLock{}
	}
	return m.locks[name]
}

func (m *model) busy(name string, l *mLock) *fence.BusyError {
	if l.held {
		return &fence.BusyError{Name: name, Holder: l.owner, Token: l.token, Remaining: time.Duration(max(l.exp-m.now, 0))}
	}
	return &fence.BusyError{Name: name, Holder: l.lastOwner, Token: l.lastTok}
}

func (m *model) grant(name string, l *mLock, owner string, ttl time.Duration, r *mReq) *fence.Lease {
	m.counter++
	*l = mLock{held: true, owner: owner, token: m.counter, lastTok: m.counter, lastOwner: owner, ttl: ttl, exp: m.now + int64(ttl), queue: l.queue}
	if r != nil {
		l.rid, r.state, r.token = r.id, "held", m.counter
	}
	return &fence.Lease{Name: name, Owner: owner, Token: m.counter, TTL: ttl, Remaining: ttl}
}

func (m *model) end(l *mLock, state string, at int64) {
	l.held, l.lastExpired, l.freedAt = false, state == "expired", at
	if l.rid != "" {
		m.reqs[l.rid].state = state
	}
}

// settle: expire the lease, hand on to waiters whose wait covered the
// instant the lock freed, then end the waits that ran out, all as of the
// decision time.
func (m *model) settle(name string, l *mLock, ev *[]Event) {
	if l.held && l.exp <= m.decided {
		m.end(l, "expired", l.exp)
	}
	for !l.held && len(l.queue) > 0 {
		w := l.queue[0]
		l.queue = l.queue[1:]
		if w.deadline <= l.freedAt {
			m.waited(name, l, w, ev)
		} else {
			*ev = append(*ev, Event{RequestID: w.id, Attempt: w.attempt, Lease: m.grant(name, l, w.owner, w.ttl, w)})
		}
	}
	var keep []*mReq
	for _, w := range l.queue {
		if w.deadline <= m.decided {
			m.waited(name, l, w, ev)
		} else {
			keep = append(keep, w)
		}
	}
	l.queue = keep
}

func (m *model) waited(name string, l *mLock, w *mReq, ev *[]Event) {
	w.state = "waited"
	b := m.busy(name, l)
	b.Waited = true
	*ev = append(*ev, Event{RequestID: w.id, Attempt: w.attempt, Err: b})
}

func (m *model) apply(c Command) (r Result) {
	m.now = max(m.now, c.Now)
	m.decided = max(m.decided, c.Now-int64(c.Slack))
	switch c.Op {
	case OpTick:
		type due struct {
			at   int64
			name string
		}
		var ds []due
		for name, l := range m.locks {
			at := int64(-1)
			if l.held {
				at = l.exp
			}
			for _, w := range l.queue {
				if at < 0 || w.deadline < at {
					at = w.deadline
				}
			}
			if at >= 0 && at <= m.decided {
				ds = append(ds, due{at, name})
			}
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i].at < ds[j].at || ds[i].at == ds[j].at && ds[i].name < ds[j].name })
		for _, d := range ds {
			m.settle(d.name, m.locks[d.name], &r.Events)
		}
	case OpAcquire:
		if c.Wait > 0 && c.RequestID == "" {
			return Result{Err: fence.Invalid("request_id", "not empty when wait > 0", "")}
		}
		l := m.lock(c.Name)
		m.settle(c.Name, l, &r.Events)
		if q := m.reqs[c.RequestID]; q != nil && q.state == "waited" && q.name == c.Name && q.owner == c.Owner && q.ttl == c.TTL {
			delete(m.reqs, c.RequestID) // never granted: a retry is a new request
		}
		if q := m.reqs[c.RequestID]; q != nil {
			r.Replayed = true
			if q.state == "queued" || q.state == "held" {
				q.attempt++
			}
			r.Attempt = q.attempt
			switch {
			case q.name != c.Name || q.owner != c.Owner || q.ttl != c.TTL:
				r.Replayed, r.Err, r.Attempt = false, &fence.OpConflictError{Field: "request_id", ID: q.id}, 0
				if q.state == "queued" || q.state == "held" {
					q.attempt--
				}
			case q.state == "queued":
				r.Queued = true
			case q.state == "held":
				r.Lease = &fence.Lease{Name: c.Name, Owner: l.owner, Token: l.token, TTL: l.ttl, Remaining: time.Duration(max(l.exp-m.now, 0))}
			case q.state == "expired":
				r.Err = &fence.LeaseExpiredError{Name: c.Name, Token: q.token}
			case q.state == "released":
				r.Err = &fence.NotHolderError{Name: c.Name, Token: q.token}
			default:
				b := m.busy(c.Name, l)
				b.Waited, r.Err = true, b
			}
			return r
		}
		var q *mReq
		if c.RequestID != "" {
			q = &mReq{id: c.RequestID, name: c.Name, owner: c.Owner, ttl: c.TTL, state: "queued", deadline: m.now + int64(c.Wait), attempt: 1}
			r.Attempt = 1
		}
		switch {
		case !l.held && len(l.queue) == 0:
			r.Lease = m.grant(c.Name, l, c.Owner, c.TTL, q)
		case c.Wait > 0:
			l.queue, r.Queued = append(l.queue, q), true
		default:
			return Result{Err: m.busy(c.Name, l), Events: r.Events}
		}
		if q != nil {
			m.reqs[q.id] = q
		}
	case OpRenew, OpRelease:
		l := m.lock(c.Name)
		m.settle(c.Name, l, &r.Events)
		switch {
		case c.Token > m.counter:
			r.Err = &fence.UnknownTokenError{Token: c.Token, LastIssued: m.counter}
		case l.held && l.token == c.Token && c.Op == OpRenew:
			if c.TTL != 0 {
				l.ttl = c.TTL
			}
			l.exp = m.now + int64(l.ttl)
			r.Lease = &fence.Lease{Name: c.Name, Owner: l.owner, Token: l.token, TTL: l.ttl, Remaining: l.ttl}
		case l.held && l.token == c.Token:
			m.end(l, "released", m.decided)
			m.settle(c.Name, l, &r.Events)
		case c.Token == l.lastTok && l.lastExpired:
			r.Err = &fence.LeaseExpiredError{Name: c.Name, Token: c.Token}
		case c.Token < l.lastTok:
			r.Err = &fence.StaleTokenError{Resource: c.Name, Token: c.Token, LastAccepted: l.lastTok}
		default:
			r.Err = &fence.NotHolderError{Name: c.Name, Token: c.Token}
		}
	case OpCancelWait:
		l := m.lock(c.Name)
		m.settle(c.Name, l, &r.Events)
		q := m.reqs[c.RequestID]
		if q == nil || q.name != c.Name || (c.Attempt != 0 && c.Attempt != q.attempt) {
			return r
		}
		switch q.state {
		case "queued":
			for i, w := range l.queue {
				if w == q {
					l.queue = append(l.queue[:i:i], l.queue[i+1:]...)
				}
			}
			delete(m.reqs, q.id)
		case "held":
			m.end(l, "released", m.decided)
			m.settle(c.Name, l, &r.Events)
		}
	case OpWrite, OpAdd, OpDelete:
		key := [2]string{c.Name, c.OpID}
		if op, ok := m.ops[key]; ok && c.OpID != "" {
			if op.c.Op != c.Op || op.c.Token != c.Token || string(op.c.Value) != string(c.Value) || op.c.Delta != c.Delta {
				return Result{Err: &fence.OpConflictError{Field: "op_id", ID: c.OpID}}
			}
			var v []byte
			switch c.Op {
			case OpAdd:
				v = []byte(strconv.FormatInt(op.sum, 10))
			case OpWrite:
				v = c.Value
			}
			return Result{Replayed: true, AddValue: op.sum, Resource: &ResourceState{Resource: c.Name, Value: v, LastToken: op.last, Version: op.ver, Deleted: c.Op == OpDelete}}
		}
		st := m.res[c.Name]
		if st == nil {
			st = &ResourceState{Resource: c.Name}
		}
		if c.Token > m.counter {
			return Result{Err: &fence.UnknownTokenError{Token: c.Token, LastIssued: m.counter}}
		}
		if c.Token < st.LastToken {
			return Result{Err: &fence.StaleTokenError{Resource: c.Name, Token: c.Token, LastAccepted: st.LastToken}}
		}
		var sum int64
		if c.Op == OpAdd {
			cur, err := strconv.ParseInt(string(st.Value), 10, 64)
			if err != nil && len(st.Value) > 0 {
				return Result{Err: fence.Invalid("value", "a decimal integer to add to", strconv.Quote(string(st.Value)))}
			}
			sum = cur + c.Delta
			st.Value = []byte(strconv.FormatInt(sum, 10))
		} else if c.Op == OpWrite {
			st.Value = c.Value
		} else {
			st.Value = nil
		}
		st.Deleted = c.Op == OpDelete
		st.LastToken, st.Version, m.res[c.Name] = c.Token, st.Version+1, st
		if c.OpID != "" {
			m.ops[key] = mOp{c: c, last: c.Token, ver: st.Version, sum: sum}
		}
		cp := *st
		return Result{Resource: &cp, AddValue: sum}
	}
	return r
}
