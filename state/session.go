package state

import (
	"container/heap"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fenceworks/fence"
)

// Sessions (see doc.go, Sessions). A session is opened with a TTL and
// lives until server time passes its last keepalive plus its TTL, as seen
// from the decision time (like a lease), or until it is closed. Leases
// acquired with the session (session-bound) have no expiry of their own:
// they end when the session does, all in the same apply, and each freed
// lock is handed to its next waiter in that apply. The session's queued
// acquires end with it (an Event with a *fence.SessionExpiredError).
//
// A session never outlives its expiry as of the decision time: every Apply
// first ends the sessions that are due (settleSessions), so no command's
// outcome depends on whether a Tick ran before it.

// sessionRequestPrefix starts every SessionRequestID: a request_id with it
// is reserved for the acquire it names.
const sessionRequestPrefix = "\x00s"

// SessionRequestID is the request_id of the session-bound acquire with
// sequence number seq on session: the machine gives such an acquire this
// id when it has none, and a node registers the acquire's waiter under it.
// It starts with a NUL byte, which no client request_id may contain.
func SessionRequestID(session, seq uint64) string {
	return sessionRequestPrefix + strconv.FormatUint(session, 10) + "." + strconv.FormatUint(seq, 10)
}

// session is one client session. Its memory is O(its leases + its queued
// acquires + its unacknowledged saved results): a few hundred bytes for the
// session, a map entry (about 60 bytes) per bound lease or queued acquire
// (the lease and the request are the lock's), and about 260 bytes per
// saved result (BenchmarkSessionBytes: 660 bytes for a session with one
// lease, its lock included), at most Config.MaxSessionResults of them.
// Nothing of a session outlives it.
type session struct {
	id        uint64
	ttl       time.Duration // the keepalive's extension
	expiresAt int64         // server time of the last keepalive + ttl; ends when the decision time reaches it
	openID    string        // the open's idempotency key ("" if none)
	openTTL   time.Duration // the TTL the open asked for (a retried open must ask the same)

	leases  map[fence.Token]*grant // leases bound to it, by token (nil when none)
	waiters map[string]*request    // its queued acquires, by request_id (nil when none)

	results []savedResult // unacknowledged results of sequenced commands, by seq
	floor   uint64        // every seq below it was acknowledged: refused

	heapIndex int // position in impl.sessionHeap, -1 when not there

	principal string // who opened it (auth.go): only it (or an admin) may use it

	// owner is the owner of the last lease bound to it: a lease of the
	// same owner shares its bytes (shareStrings; memory only, never
	// snapshotted, never decides anything).
	owner string
}

// info describes s at server time now.
func (s *session) info(now int64) *SessionInfo {
	return &SessionInfo{ID: s.id, TTL: s.ttl, Remaining: time.Duration(max(s.expiresAt-now, 0)), Leases: len(s.leases)}
}

// sessionHeap orders live sessions by (expiresAt, id): a total order, so
// which session ends first never depends on the heap's history.
type sessionHeap []*session

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	if h[i].expiresAt != h[j].expiresAt {
		return h[i].expiresAt < h[j].expiresAt
	}
	return h[i].id < h[j].id
}
func (h sessionHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *sessionHeap) Push(x any) {
	s := x.(*session)
	s.heapIndex = len(*h)
	*h = append(*h, s)
}
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.heapIndex = -1
	return s
}

// set files s at its expiresAt.
func (h *sessionHeap) set(s *session) {
	if s.heapIndex >= 0 {
		heap.Fix(h, s.heapIndex)
		return
	}
	heap.Push(h, s)
}

func (h *sessionHeap) remove(s *session) {
	if s.heapIndex >= 0 {
		heap.Remove(h, s.heapIndex)
	}
}

// liveSession returns session id if it is live, else the refusal.
func (m *impl) liveSession(id uint64) (*session, error) {
	if s := m.sessions[id]; s != nil {
		return s, nil
	}
	return nil, &fence.SessionExpiredError{Session: id}
}

// openSession opens a session with cmd.TTL. A retried open (the same
// RequestID) while its session is live gets that session (Replayed).
func (m *impl) openSession(cmd Command) Result {
	// The ttl against the rules' MaxTTL only for a new open, after the
	// request_id lookup (as an acquire's, validateAcquire): a retry of an
	// open made under a higher bound learns its session.
	if err := first(fence.ValidateTTL(cmd.TTL, fence.LongestMaxTTL), fence.ValidateID("request_id", cmd.RequestID)); err != nil {
		return Result{Err: err}
	}
	if cmd.RequestID != "" {
		if s := m.opens[cmd.RequestID]; s != nil {
			if err := owns(cmd, s.principal, "session", u64toa(s.id)); err != nil {
				return Result{Err: err}
			}
			if s.openTTL != cmd.TTL {
				return Result{Err: &fence.OpConflictError{Field: "request_id", ID: cmd.RequestID}}
			}
			return Result{Session: s.info(m.clock), Replayed: true}
		}
	}
	if err := fence.ValidateTTL(cmd.TTL, m.cfg.MaxTTL); err != nil {
		return Result{Err: err}
	}
	if c := m.cfg.MaxSessions; c > 0 && len(m.sessions) >= c {
		return Result{Err: fence.Exhausted("sessions (config.max_sessions)", "at most "+utoa(c), utoa(len(m.sessions)))}
	}
	if err := m.admitSessionQuota(cmd.Principal); err != nil {
		return Result{Err: err}
	}
	m.sessionCounter++
	s := &session{id: m.sessionCounter, ttl: cmd.TTL, expiresAt: m.clock + int64(cmd.TTL), openID: cmd.RequestID, openTTL: cmd.TTL, heapIndex: -1, principal: cmd.Principal}
	m.sessions[s.id] = s
	m.count(s.principal, 1, 0, 0)
	m.sessionHeap.set(s)
	if s.openID != "" {
		m.opens[s.openID] = s
	}
	return Result{Session: s.info(m.clock)}
}

// keepAlive extends live session s to now + ttl (ttl 0: its own TTL; cut
// to MaxTTL as a renewal is). ttl has been validated.
func (m *impl) keepAlive(s *session, ttl time.Duration) {
	if ttl != 0 {
		s.ttl = ttl
	}
	if s.ttl > m.cfg.MaxTTL {
		s.ttl = m.cfg.MaxTTL
	}
	s.expiresAt = m.clock + int64(s.ttl)
	m.sessionHeap.set(s)
}

// sessionKeepAlive applies OpSessionKeepAlive.
func (m *impl) sessionKeepAlive(cmd Command) Result {
	s, err := m.liveSession(cmd.Session)
	if err == nil && cmd.TTL != 0 {
		err = fence.ValidateTTL(cmd.TTL, m.cfg.MaxTTL)
	}
	if err != nil {
		return Result{Err: err}
	}
	m.keepAlive(s, cmd.TTL)
	return Result{Session: s.info(m.clock)}
}

// sessionClose applies OpSessionClose: the session ends as if each of its
// leases were released (no lock-delay).
func (m *impl) sessionClose(cmd Command) Result {
	s, err := m.liveSession(cmd.Session)
	if err != nil {
		return Result{Err: err}
	}
	var res Result
	m.endSession(s, false, &res.Events)
	return res
}

// settleSessions ends every session due at the decision time, in
// (expiresAt, id) order. It runs at the start of every Apply.
func (m *impl) settleSessions(events *[]Event) {
	for len(m.sessionHeap) > 0 && m.sessionHeap[0].expiresAt <= m.expiryTime() {
		m.endSession(m.sessionHeap[0], true, events)
	}
}

// endSession ends s: its queued acquires end with a SessionExpiredError
// event (by lock name, then arrival order), then each lease it holds ends
// (by lock name) — as expired at s.expiresAt, starting its lock-delay, when
// expired is set, else as released now — and the lock is handed on. Its
// saved results are forgotten. O(k log k) for k leases and waiters (plus
// the queues of the locks it waits on), never a scan of all locks.
func (m *impl) endSession(s *session, expired bool, events *[]Event) {
	delete(m.sessions, s.id)
	m.count(s.principal, -1, 0, 0)
	m.sessionHeap.remove(s)
	if s.openID != "" && m.opens[s.openID] == s {
		delete(m.opens, s.openID)
	}
	work := m.newWork()
	if len(s.waiters) > 0 {
		ws := make([]*request, 0, len(s.waiters))
		for _, w := range s.waiters {
			ws = append(ws, w)
		}
		// By lock name, then arrival order (a lock's queue order; requests
		// of one session on one lock are queued in id order only by chance,
		// so the queue decides).
		sort.Slice(ws, func(i, j int) bool {
			if ws[i].name != ws[j].name {
				return ws[i].name < ws[j].name
			}
			q := m.names.get(ws[i].name).queue
			return slices.Index(q, ws[i]) < slices.Index(q, ws[j])
		})
		for _, w := range ws {
			m.unqueue(w, &work)
			m.sessionEndedWait(w, events)
		}
	}
	s.waiters = nil
	if len(s.leases) > 0 {
		gs := make([]*grant, 0, len(s.leases))
		for _, g := range s.leases {
			gs = append(gs, g)
		}
		// By lease name, then token.
		sort.Slice(gs, func(i, j int) bool {
			if a, b := gs[i].name(), gs[j].name(); a != b {
				return a < b
			}
			return gs[i].token < gs[j].token
		})
		for _, g := range gs {
			if expired {
				m.endLease(g, endExpired, s.expiresAt, &work)
			} else {
				m.endLease(g, endReleased, m.expiryTime(), &work)
			}
		}
	}
	m.settleWork(&work, events)
	s.leases = nil
	clear(s.results)
	s.results = nil
}

// sessionEndedWait ends queued acquire w (already out of its lock's queue
// and counted out of m.waiting) because its session ended. Nothing was
// granted under its id, so it is not remembered (as a wait that ran out).
func (m *impl) sessionEndedWait(w *request, events *[]Event) {
	s := w.sess
	m.unsetLive(w.id)
	if s.waiters != nil {
		delete(s.waiters, w.id)
	}
	w.state, w.outcome, w.deadline = reqDone, outcomeSessionEnded, 0
	*events = append(*events, Event{RequestID: w.id, Attempt: w.attempt, Err: &fence.SessionExpiredError{Session: s.id}})
}

// bind records that s holds lease g; unbind that it no longer does.
func (s *session) bind(g *grant) {
	if s.leases == nil {
		s.leases = map[fence.Token]*grant{}
	}
	s.leases[g.token] = g
}

func (s *session) unbind(g *grant) {
	delete(s.leases, g.token)
}

// addWaiter records that s waits with r.
func (s *session) addWaiter(r *request) {
	if s.waiters == nil {
		s.waiters = map[string]*request{}
	}
	s.waiters[r.id] = r
}

// generatedID reports whether id is reserved for session acquires.
func generatedID(id string) bool { return strings.HasPrefix(id, sessionRequestPrefix) }

func (m *impl) sessionInfo(id uint64, now int64) (SessionInfo, bool) {
	s := m.sessions[id]
	if s == nil || s.expiresAt <= m.expiryTime() {
		return SessionInfo{}, false
	}
	return *s.info(max(now, m.clock)), true
}

func (m *impl) sessionCount() int { return len(m.sessions) }

// nextSessionDeadline is the earliest expiry of a live session.
func (m *impl) nextSessionDeadline() (int64, bool) {
	if len(m.sessionHeap) == 0 {
		return 0, false
	}
	return m.sessionHeap[0].expiresAt, true
}
