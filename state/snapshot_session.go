package state

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/fenceworks/fence"
)

// Sessions in snapshots (format 3): sorted by id, each with the names of
// the locks it holds (sorted; checked against the locks' holders on
// restore), and its saved results by seq. A saved result keeps its typed
// refusal as a type tag and the error's exported fields, so a restored
// machine replays identical results.

type snapSession struct {
	ID        uint64      `json:"id"`
	TTL       int64       `json:"ttl"`
	ExpiresAt int64       `json:"expires_at"`
	OpenID    []byte      `json:"open_id,omitempty"`
	OpenTTL   int64       `json:"open_ttl,omitempty"`
	Floor     uint64      `json:"floor,omitempty"`
	Leases    []string    `json:"leases,omitempty"`  // lock names, sorted
	Results   []snapSaved `json:"results,omitempty"` // by seq
}

type snapSaved struct {
	Seq      uint64         `json:"seq"`
	Op       Op             `json:"op"`
	Name     string         `json:"name,omitempty"`
	At       int64          `json:"at"`
	Hash     []byte         `json:"hash,omitempty"`
	Request  *snapRequest   `json:"request,omitempty"` // a granted or queued acquire: answered by the request's outcome
	Err      *snapError     `json:"err,omitempty"`
	Lease    *fence.Lease   `json:"lease,omitempty"`
	Queued   bool           `json:"queued,omitempty"`
	Resource *ResourceState `json:"resource,omitempty"`
	AddValue int64          `json:"add_value,omitempty"`
	Attempt  uint32         `json:"attempt,omitempty"`
	Session  *SessionInfo   `json:"session,omitempty"`

	// NameBytes holds the name instead of Name when it is not valid UTF-8
	// (a refused command's name is saved as it came): a JSON string would
	// turn it into U+FFFD, and a retry of the seq would then conflict on a
	// restored machine only. An older binary refuses the unknown field.
	NameBytes []byte `json:"name_bytes,omitempty"`
}

// snapError is a typed refusal: Type names its type (as in package fence),
// S, N and B hold its exported string (as bytes: they need not be UTF-8),
// integer and bool fields in declaration order.
type snapError struct {
	Type string   `json:"type"`
	S    [][]byte `json:"s,omitempty"`
	N    []int64  `json:"n,omitempty"`
	B    []bool   `json:"b,omitempty"`
}

// snapErrorTypes are the refusals a saved result may hold, by type name.
var snapErrorTypes = func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, e := range []error{&fence.BusyError{}, &fence.StaleTokenError{}, &fence.NotHolderError{}, &fence.LeaseExpiredError{},
		&fence.UnknownTokenError{}, &fence.OpConflictError{}, &fence.InvalidError{}, &fence.ResourceExhaustedError{}, &fence.SessionExpiredError{}} {
		t := reflect.TypeOf(e).Elem()
		out[t.Name()] = t
	}
	return out
}()

// snapErrorOf encodes err. An error of another type (none is returned by
// the machine) is kept as its message, with Type "".
func snapErrorOf(err error) *snapError {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || snapErrorTypes[v.Elem().Type().Name()] != v.Elem().Type() {
		return &snapError{S: [][]byte{[]byte(err.Error())}}
	}
	v = v.Elem()
	out := &snapError{Type: v.Type().Name()}
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			out.S = append(out.S, []byte(f.String()))
		case reflect.Bool:
			out.B = append(out.B, f.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out.N = append(out.N, f.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out.N = append(out.N, int64(f.Uint()))
		}
	}
	return out
}

// error decodes what snapErrorOf encoded, refusing a mismatch of fields.
func (s *snapError) error() (error, error) {
	if s.Type == "" {
		if len(s.S) != 1 || len(s.N) != 0 || len(s.B) != 0 {
			return nil, fmt.Errorf("untyped error with fields")
		}
		return errors.New(string(s.S[0])), nil
	}
	t := snapErrorTypes[s.Type]
	if t == nil {
		return nil, fmt.Errorf("unknown error type %q", s.Type)
	}
	p := reflect.New(t)
	v := p.Elem()
	S, N, B := s.S, s.N, s.B
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			if len(S) == 0 {
				return nil, fmt.Errorf("error %s: too few fields", s.Type)
			}
			f.SetString(string(S[0]))
			S = S[1:]
		case reflect.Bool:
			if len(B) == 0 {
				return nil, fmt.Errorf("error %s: too few fields", s.Type)
			}
			f.SetBool(B[0])
			B = B[1:]
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if len(N) == 0 || f.OverflowInt(N[0]) {
				return nil, fmt.Errorf("error %s: too few fields or out of range", s.Type)
			}
			f.SetInt(N[0])
			N = N[1:]
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if len(N) == 0 || f.OverflowUint(uint64(N[0])) {
				return nil, fmt.Errorf("error %s: too few fields or out of range", s.Type)
			}
			f.SetUint(uint64(N[0]))
			N = N[1:]
		}
	}
	if len(S)+len(N)+len(B) != 0 {
		return nil, fmt.Errorf("error %s: too many fields", s.Type)
	}
	return p.Interface().(error), nil
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
		ss := snapSession{ID: s.id, TTL: int64(s.ttl), ExpiresAt: s.expiresAt, OpenTTL: int64(s.openTTL), Floor: s.floor}
		if s.openID != "" {
			ss.OpenID = []byte(s.openID)
		}
		for name := range s.leases {
			ss.Leases = append(ss.Leases, name)
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
	if !utf8.ValidString(sv.name) {
		out.Name, out.NameBytes = "", []byte(sv.name)
	}
	if sv.hash != ([payloadSize]byte{}) {
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

func bytesOf(h [payloadSize]byte) []byte { return h[:] }

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
			floor: ss.Floor, heapIndex: -1}
		if s.openID != "" {
			if m.opens[s.openID] != nil {
				return fmt.Errorf("session %d: open id repeated", ss.ID)
			}
			m.opens[s.openID] = s
		}
		m.sessions[s.id] = s
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
		for i, name := range ss.Leases {
			if (i > 0 && ss.Leases[i-1] >= name) || s.leases[name] == nil {
				return fmt.Errorf("session %d: lease %q not sorted or not bound", s.id, name)
			}
		}
		for i, sv := range ss.Results {
			if sv.Seq == 0 || sv.Seq < s.floor || (i > 0 && ss.Results[i-1].Seq >= sv.Seq) {
				return fmt.Errorf("session %d: saved result %d below the floor or out of order", s.id, sv.Seq)
			}
			if sv.At > doc.Now {
				return fmt.Errorf("session %d: saved result %d after server time", s.id, sv.Seq)
			}
			r := savedResult{seq: sv.Seq, op: sv.Op, name: sv.Name, at: sv.At}
			if sv.NameBytes != nil {
				if sv.Name != "" || utf8.Valid(sv.NameBytes) {
					return fmt.Errorf("session %d: saved result %d: name_bytes with a name, or valid UTF-8", s.id, sv.Seq)
				}
				r.name = string(sv.NameBytes)
			}
			if sv.Hash != nil {
				if len(sv.Hash) != payloadSize {
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
					err, bad := sv.Err.error()
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
