package state

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// Sessions in snapshots: sorted by id, each with the names of
// the locks it holds (sorted; checked against the locks' holders on
// restore), and its saved results by seq. A saved result keeps its typed
// refusal as an explicit record (snapshot_refusal.go), so a restored
// machine replays identical results.

type snapSession struct {
	ID        uint64
	TTL       int64
	ExpiresAt int64
	OpenID    []byte
	OpenTTL   int64
	Floor     uint64
	Leases    []string    // lock names, sorted
	Results   []snapSaved // by seq
	Principal string
}

type snapSaved struct {
	Seq      uint64
	Op       Op
	Name     string
	At       int64
	Hash     []byte
	Request  *snapRequest // a granted or queued acquire: answered by the request's outcome
	Err      *statepb.Refusal
	Lease    *fence.Lease
	Queued   bool
	Resource *ResourceState
	AddValue int64
	Attempt  uint32
	Session  *SessionInfo
}

// snapSessions copies the live sessions, by id.
func (m *impl) snapSessions() []snapSession {
	if len(m.sessions) == 0 {
		return nil
	}
	ids := make([]uint64, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]snapSession, 0, len(ids))
	for _, id := range ids {
		s := m.sessions[id]
		ss := snapSession{ID: s.id, TTL: int64(s.ttl), ExpiresAt: s.expiresAt, OpenTTL: int64(s.openTTL), Floor: s.floor, Principal: s.principal}
		if s.openID != "" {
			ss.OpenID = []byte(s.openID)
		}
		for _, g := range s.leases {
			ss.Leases = append(ss.Leases, g.name())
		}
		sort.Strings(ss.Leases)
		for _, sv := range s.results {
			ss.Results = append(ss.Results, snapSavedOf(sv))
		}
		out = append(out, ss)
	}
	return out
}

func snapSavedOf(sv savedResult) snapSaved {
	out := snapSaved{Seq: sv.seq, Op: sv.op, Name: sv.name, At: sv.at}
	if sv.hash != ([seqHashSize]byte{}) {
		out.Hash = bytesOf(sv.hash)
	}
	if sv.req != nil {
		r := snapRequestOf(sv.req)
		out.Request = &r
		return out
	}
	res := cloneResult(sv.res)
	if res.Err != nil {
		out.Err = snapErrorOf(res.Err)
	}
	out.Lease, out.Queued, out.Resource, out.AddValue, out.Attempt, out.Session = res.Lease, res.Queued, res.Resource, res.AddValue, res.Attempt, res.Session
	return out
}

func bytesOf(h [seqHashSize]byte) []byte { return h[:] }

// restoreSessions creates the sessions of doc (before its locks, which
// refer to them).
func (m *impl) restoreSessions(doc *snapDoc) error {
	for i, ss := range doc.Sessions {
		if i > 0 && doc.Sessions[i-1].ID >= ss.ID {
			return fmt.Errorf("sessions not sorted or repeated at %d", ss.ID)
		}
		if ss.ID == 0 || ss.ID > doc.SessionCounter || ss.TTL <= 0 || ss.OpenTTL < 0 {
			return fmt.Errorf("session %d: id above counter %d or bad ttl", ss.ID, doc.SessionCounter)
		}
		s := &session{id: ss.ID, ttl: time.Duration(ss.TTL), expiresAt: ss.ExpiresAt, openID: string(ss.OpenID), openTTL: time.Duration(ss.OpenTTL),
			floor: ss.Floor, heapIndex: -1, principal: ss.Principal}
		if s.openID != "" {
			if m.opens[s.openID] != nil {
				return fmt.Errorf("session %d: open id repeated", ss.ID)
			}
			m.opens[s.openID] = s
		}
		m.sessions[s.id] = s
		m.count(s.principal, 1, 0, 0)
		m.sessionHeap.set(s)
	}
	m.sessionCounter = doc.SessionCounter
	return nil
}

// restoreResults checks each session's leases against the locks and
// restores its saved results (after the locks: a saved acquire still
// queued or held is the lock's request).
func (m *impl) restoreResults(doc *snapDoc) error {
	for _, ss := range doc.Sessions {
		s := m.sessions[ss.ID]
		if len(ss.Leases) != len(s.leases) {
			return fmt.Errorf("session %d: %d leases listed, %d bound", s.id, len(ss.Leases), len(s.leases))
		}
		bound := make([]string, 0, len(s.leases))
		for _, g := range s.leases {
			bound = append(bound, g.name())
		}
		sort.Strings(bound)
		if !slices.Equal(bound, ss.Leases) {
			return fmt.Errorf("session %d: leases %q listed, %q bound", s.id, ss.Leases, bound)
		}
		for i, sv := range ss.Results {
			if sv.Seq == 0 || sv.Seq < s.floor || (i > 0 && ss.Results[i-1].Seq >= sv.Seq) {
				return fmt.Errorf("session %d: saved result %d below the floor or out of order", s.id, sv.Seq)
			}
			if sv.At > doc.Now {
				return fmt.Errorf("session %d: saved result %d after server time", s.id, sv.Seq)
			}
			r := savedResult{seq: sv.Seq, op: sv.Op, name: sv.Name, at: sv.At}
			if sv.Hash != nil {
				if len(sv.Hash) != seqHashSize {
					return fmt.Errorf("session %d: saved result %d: bad hash", s.id, sv.Seq)
				}
				copy(r.hash[:], sv.Hash)
			}
			if sv.Request != nil {
				req := sv.Request.request()
				switch req.state {
				case reqQueued, reqHeld:
					live := m.live[req.id]
					if live == nil || live.sess != s || live.state != req.state || live.name != req.name {
						return fmt.Errorf("session %d: saved result %d: request %q not live on it", s.id, sv.Seq, req.id)
					}
					req = live
				case reqDone:
					if sv.Request.Session != s.id {
						return fmt.Errorf("session %d: saved result %d: request of session %d", s.id, sv.Seq, sv.Request.Session)
					}
					req.sess = s
				default:
					return fmt.Errorf("session %d: saved result %d: bad request state", s.id, sv.Seq)
				}
				if sv.Err != nil || sv.Lease != nil || sv.Queued || sv.Resource != nil || sv.Session != nil {
					return fmt.Errorf("session %d: saved result %d: both a request and a result", s.id, sv.Seq)
				}
				r.req = req
			} else {
				r.res = Result{Lease: sv.Lease, Queued: sv.Queued, Resource: sv.Resource, AddValue: sv.AddValue, Attempt: sv.Attempt, Session: sv.Session}
				if sv.Err != nil {
					err, bad := refusalError(sv.Err)
					if bad != nil {
						return fmt.Errorf("session %d: saved result %d: %v", s.id, sv.Seq, bad)
					}
					r.res.Err = err
				}
			}
			s.results = append(s.results, r)
		}
	}
	return nil
}
