package state

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/fenceworks/fence"
)

// A snapshot is a SnapshotHeader and then SnapshotRecords
// (internal/statepb/state.proto), each length-prefixed, written in a fixed
// order (locks and resources by name, memories and idle locks oldest
// first, waiters in arrival order, sessions by id), so the same state
// always gives the same bytes (snapshot_stream.go). snapDoc and its parts
// are the records as Go values: what a snapshot view holds and what
// Restore checks before it builds a machine.

// snapshotFormat names the snapshot layout Snapshot writes and Restore
// reads, written in the header. Restore refuses any other (a later format
// it cannot apply, R2); the fields of a format are fixed (an unknown field
// is refused), and testdata/snapshot.golden pins the bytes.
//
// "fence-state/2" differs from "fence-state/1" only in its Op records (the
// compact id memory, docs/design.md): a remembered op_id is named by its
// 16-byte key instead of its resource and op_id, with a 12-byte payload
// hash and no token. Restore reads both (a backup or a raft snapshot of an
// older node stays restorable); Snapshot writes the newer.
const snapshotFormat = "fence-state/2"

// snapshotFormatV1 is the format before the compact id memory.
const snapshotFormatV1 = "fence-state/1"

// SnapshotFormat names the snapshot format this package writes (a backup
// file's header records it as state_format).
const SnapshotFormat = snapshotFormat

// ReadsSnapshotFormat reports whether Restore reads snapshots of format f:
// SnapshotFormat and "fence-state/1".
func ReadsSnapshotFormat(f string) bool { return f == snapshotFormat || f == snapshotFormatV1 }

// ErrBadSnapshot is matched (errors.Is) by every Restore error: a
// *DecodeError when the bytes are not a snapshot of this format, a wrapped
// error naming the inconsistency when the state they hold is not one.
var ErrBadSnapshot = errors.New("state: bad snapshot")

type snapDoc struct {
	Format     string
	Now        int64
	Decided    int64 // decision time (Command.Slack)
	MaxSlack   int64 // largest Slack applied
	Counter    fence.Token
	Config     *Config // the rules in force
	Configured bool    // an OpConfig was applied
	// a lowered MinIDRetention still held at its old value until server
	// time keep_min_until
	KeepMin      int64
	KeepMinUntil int64
	Locks        []snapLock
	Idle         []string      // idle lock names, oldest first
	Requests     []snapRequest // final outcomes, oldest first
	// A view's remembered op_ids are its id memory's live entries, as
	// they are (56 bytes each; snapshot_ops.go writes them), with their
	// principals by number; a decoded snapshot's are OpRecords, as read
	// (either format). Both oldest first; a doc has one or the other.
	Ops          []opEntry
	OpPrincipals []string
	OpRecords    []snapOp
	Resources    []snapResource
	// the last session id issued and the live sessions, by id
	SessionCounter uint64
	Sessions       []snapSession
	// the cluster id (absent when none)
	ClusterID string
	// the auth state (nil when empty)
	Auth *snapAuth
	// the signing keys, oldest first, and the cluster ids restored from
	// (snapshot_keys.go)
	Keys         []snapKey
	RestoredFrom []string
}

type snapLock struct {
	Name       string
	Holder     *snapGrant
	More       []snapGrant // holders after the first
	Permits    uint32
	Queue      []snapRequest
	LastToken  fence.Token
	LastOwner  string
	LastEnd    leaseEnd
	FreedAt    int64
	DelayUntil int64
	IdleSince  int64
}

type snapGrant struct {
	Owner     string
	Token     fence.Token
	TTL       int64
	ExpiresAt int64
	LockDelay int64
	Request   *snapRequest
	Session   uint64 // bound to it (TTL and ExpiresAt 0)
	Principal string
	Key       string // the id of the key that signs it ("" none)
	Mode      fence.Mode
	Set       []fence.LockSpec
	InSet     bool // a set's lease at a lock after its first: Token only
}

type snapRequest struct {
	ID        []byte
	Name      string
	Owner     string
	TTL       int64
	Wait      int64
	LockDelay int64
	Deadline  int64
	State     requestState
	Token     fence.Token
	Outcome   outcome
	At        int64 // when remembered
	Attempt   uint32
	Session   uint64 // session-bound
	Principal string
	Mode      fence.Mode
	Permits   uint32
	Set       []fence.LockSpec
	InSet     bool // a set's waiter at a lock after its first: ID only
}

type snapOp struct {
	Key      []byte // fence-state/2: opKey
	Resource string // fence-state/1: Resource, OpID, Token
	OpID     []byte
	At       int64
	Payload  []byte
	Token    fence.Token
	Version  uint64
	AddValue int64
	// Principal made the write ("" with authentication off).
	Principal string
}

type snapResource struct {
	Name      string
	Value     []byte
	LastToken fence.Token
	Version   uint64
	Deleted   bool
}

// SnapshotView is a copy of a machine's whole state, taken by
// Machine.SnapshotView, that shares nothing the machine changes: writing
// it (WriteTo, the encoding, the costly part) needs no lock and may
// run while the machine applies commands.
type SnapshotView struct{ doc *snapDoc }

// WriteTo writes the snapshot (the bytes Machine.Snapshot writes for the
// state when the view was taken) to w, streamed: it buffers one list
// element at a time, never the whole encoding (see snapshot_stream.go).
func (v *SnapshotView) WriteTo(w io.Writer) (int64, error) {
	return writeSnapDoc(w, v.doc)
}

// Format names the snapshot format WriteTo writes ("fence-state/2").
func (v *SnapshotView) Format() string { return v.doc.Format }

func (m *impl) snapshot(w io.Writer) error {
	_, err := m.snapshotView().WriteTo(w)
	return err
}

// snapshotView copies the state into plain slices: O(state), no encoding.
// Strings and resource values are shared (never changed in place).
func (m *impl) snapshotView() *SnapshotView {
	doc := &snapDoc{Format: snapshotFormat, Now: m.clock, Decided: m.decided, MaxSlack: int64(m.maxSlack), Counter: m.counter,
		Config: new(m.cfg), Configured: m.configured, KeepMin: int64(m.keepMin), KeepMinUntil: m.keepMinUntil}
	if n := m.names.len(); n > 0 {
		doc.Locks = make([]snapLock, 0, n)
	}
	m.names.each(func(l *lockEntry) { doc.Locks = append(doc.Locks, snapLockOf(l)) }) // in name order
	m.idle.each(func(l *lockEntry) { doc.Idle = append(doc.Idle, l.name) })
	if n := m.requests.len(); n > 0 {
		doc.Requests = make([]snapRequest, 0, n)
	}
	m.requests.each(func(id string, at int64, d doneRequest) {
		s := snapRequestOf(d.request(id, m.requests.principal(d.who)))
		s.At = at
		doc.Requests = append(doc.Requests, s)
	})
	doc.Ops, doc.OpPrincipals = m.ops.live(), m.ops.principals()
	names := make([]string, 0, len(m.resources))
	for name := range m.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > 0 {
		doc.Resources = make([]snapResource, 0, len(names))
	}
	for _, name := range names {
		r := m.resources[name]
		doc.Resources = append(doc.Resources, snapResource{Name: name, Value: r.value, LastToken: r.lastToken, Version: r.version, Deleted: r.deleted})
	}
	doc.SessionCounter = m.sessionCounter
	doc.Sessions = m.snapSessions()
	doc.ClusterID = m.clusterID
	doc.Auth = m.snapAuth()
	doc.Keys, doc.RestoredFrom = m.snapKeys()
	return &SnapshotView{doc: doc}
}

func snapLockOf(l *lockEntry) snapLock {
	s := snapLock{Name: l.name, LastToken: l.lastToken, LastOwner: l.lastOwner, LastEnd: l.lastEnd, FreedAt: l.freedAt, DelayUntil: l.delayUntil}
	if l.idleElem != nil {
		s.IdleSince = l.idleSince
	}
	s.Permits = l.permits
	for i, g := range l.holders {
		sg := snapGrantOf(l, g)
		if i == 0 {
			s.Holder = &sg
		} else {
			s.More = append(s.More, sg)
		}
	}
	for _, w := range l.queue {
		if len(w.set) > 0 && w.name != l.name { // listed whole at its first lock
			s.Queue = append(s.Queue, snapRequest{ID: []byte(w.id), InSet: true})
			continue
		}
		s.Queue = append(s.Queue, snapRequestOf(w))
	}
	return s
}

// snapGrantOf is the record of g, a holder of l: whole, or — a set's
// lease at a lock after its first — its token alone (a set is written once,
// not once per lock: an outside test made a 2 GB snapshot of 64-lock sets).
func snapGrantOf(l *lockEntry, g *grant) snapGrant {
	if g.isSet() && g.parts()[0].l != l {
		return snapGrant{Token: g.token, InSet: true}
	}
	sg := snapGrant{Owner: g.owner, Token: g.token, TTL: int64(g.ttl), ExpiresAt: g.expiresAt, LockDelay: int64(g.lockDelay), Principal: g.principal}
	if g.key != nil {
		sg.Key = g.key.id
	}
	if g.sess != nil {
		sg.Session = g.sess.id
	}
	if g.req != nil {
		r := snapRequestOf(g.req)
		sg.Request = &r
	}
	if g.isSet() {
		sg.Set = make([]fence.LockSpec, len(g.parts()))
		for i, p := range g.parts() {
			sg.Set[i] = fence.LockSpec{Name: p.l.name, Mode: p.mode}
		}
	} else {
		sg.Mode = g.modeOn(l)
	}
	return sg
}

func snapRequestOf(r *request) snapRequest {
	return snapRequest{ID: []byte(r.id), Name: r.name, Owner: r.owner, TTL: int64(r.ttl), Wait: int64(r.wait), LockDelay: int64(r.lockDelay),
		Deadline: r.deadline, State: r.state, Token: r.token, Outcome: r.outcome, Attempt: r.attempt, Session: r.sessionID(), Principal: r.principal,
		Mode: r.mode, Permits: r.permits, Set: r.set}
}

func (s snapRequest) request() *request {
	return &request{id: string(s.ID), name: s.Name, owner: s.Owner, ttl: time.Duration(s.TTL), wait: time.Duration(s.Wait), lockDelay: time.Duration(s.LockDelay),
		deadline: s.Deadline, state: s.State, token: s.Token, outcome: s.Outcome, attempt: s.Attempt, principal: s.Principal,
		mode: s.Mode, permits: s.Permits, set: s.Set}
}

// restore decodes and checks a snapshot completely before it replaces
// anything: on any error the machine is unchanged.
func (m *impl) restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	doc, err := decodeSnapshot(b)
	if err != nil {
		return err // a *DecodeError: it is ErrBadSnapshot
	}
	n, err := fromSnapshot(doc)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	*m = *n
	return nil
}

// fromSnapshot builds a machine from doc, checking every invariant the
// machine relies on.
func fromSnapshot(doc *snapDoc) (*impl, error) {
	if !ReadsSnapshotFormat(doc.Format) {
		return nil, fmt.Errorf("format %q, want %q", doc.Format, snapshotFormat)
	}
	if doc.Config == nil {
		return nil, fmt.Errorf("no config")
	}
	cfg, configured := *doc.Config, doc.Configured
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// attempt checks a request's attempt: at least 1.
	attempt := func(r *request) error {
		if r.attempt == 0 {
			return fmt.Errorf("request %q: attempt 0", r.id)
		}
		return nil
	}
	if doc.ClusterID != "" {
		if err := ValidateClusterID(doc.ClusterID); err != nil {
			return nil, err
		}
	}
	if doc.KeepMin < 0 {
		return nil, fmt.Errorf("keep_min %d (until %d)", doc.KeepMin, doc.KeepMinUntil)
	}
	m := newImpl(cfg)
	m.configured = configured
	m.clusterID = doc.ClusterID
	if err := m.restoreAuth(doc.Auth); err != nil {
		return nil, err
	}
	if err := m.restoreKeys(doc); err != nil {
		return nil, err
	}
	m.keepMin, m.keepMinUntil = time.Duration(doc.KeepMin), doc.KeepMinUntil
	m.clock, m.counter = doc.Now, doc.Counter
	if doc.Decided < 0 || doc.Decided > max(doc.Now, 0) || doc.MaxSlack < 0 {
		return nil, fmt.Errorf("decided %d or max_slack %d out of range (0 <= decided <= now %d, max_slack >= 0)", doc.Decided, doc.MaxSlack, doc.Now)
	}
	m.decided, m.maxSlack = doc.Decided, time.Duration(doc.MaxSlack)
	if err := m.restoreSessions(doc); err != nil {
		return nil, err
	}
	// session returns the session a snapshot's grant or request names (nil
	// for 0), which must be live.
	session := func(id uint64) (*session, error) {
		if id == 0 {
			return nil, nil
		}
		if s := m.sessions[id]; s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("unknown session %d", id)
	}
	rl := &lockRestorer{m: m, session: session, attempt: attempt, grants: map[fence.Token]*grant{}, setNames: map[fence.Token][]string{}, waiters: map[string]*request{}}
	for i, s := range doc.Locks {
		if err := fence.ValidateName("lock name", s.Name); err != nil {
			return nil, err
		}
		if i > 0 && doc.Locks[i-1].Name >= s.Name {
			return nil, fmt.Errorf("locks not sorted or repeated at %q", s.Name)
		}
		if s.LastToken > m.counter {
			return nil, fmt.Errorf("lock %q: last token %d above counter %d", s.Name, s.LastToken, m.counter)
		}
		l := &lockEntry{name: s.Name, lastToken: s.LastToken, lastOwner: s.LastOwner, lastEnd: s.LastEnd, freedAt: s.FreedAt, delayUntil: s.DelayUntil, idleSince: s.IdleSince, heapIndex: -1}
		if s.LastEnd > endExpired {
			return nil, fmt.Errorf("lock %q: bad last_end %d", s.Name, s.LastEnd)
		}
		if err := rl.restore(l, &s); err != nil {
			return nil, fmt.Errorf("lock %q: %v", s.Name, err)
		}
		m.names.add(l)
		if at, ok := l.nextDeadline(); ok {
			m.deadlines.set(l, at)
		}
	}
	if err := rl.complete(); err != nil {
		return nil, err
	}
	for _, name := range doc.Idle {
		l := m.names.get(name)
		if l == nil || l.idleElem != nil || !l.unused() || l.delayUntil != 0 {
			return nil, fmt.Errorf("idle lock %q: unknown, repeated or not idle", name)
		}
		if b := m.idle.order.Back(); b != nil && b.Value.(*lockEntry).idleSince > l.idleSince {
			return nil, fmt.Errorf("idle lock %q: out of order", name)
		}
		m.idle.add(l, l.idleSince)
	}
	for _, s := range doc.Locks {
		if l := m.names.get(s.Name); l.idleElem == nil && l.unused() && l.delayUntil == 0 {
			return nil, fmt.Errorf("lock %q is idle but not listed as idle", s.Name)
		}
	}
	last := int64(0)
	m.requests.reserve(len(doc.Requests))
	m.ops.reserve(len(doc.OpRecords))
	for _, s := range doc.Requests {
		r := s.request()
		if r.state != reqDone || r.id == "" || m.findRequest(r.id) != nil || s.At < last || r.token > m.counter {
			return nil, fmt.Errorf("request %q: inconsistent, repeated or out of order", r.id)
		}
		if err := attempt(r); err != nil {
			return nil, err
		}
		last = s.At
		m.requests.put(r.id, r.done(), s.At, r.principal)
	}
	last = 0
	for _, s := range doc.OpRecords {
		k, rec, err := opOfSnap(doc.Format, &s)
		if err != nil {
			return nil, err
		}
		if s.At < last || !m.ops.putNew(k, rec, s.At, s.Principal) {
			return nil, fmt.Errorf("op %x: repeated or out of order", k)
		}
		last = s.At
	}
	for i, s := range doc.Resources {
		if i > 0 && doc.Resources[i-1].Name >= s.Name {
			return nil, fmt.Errorf("resources not sorted or repeated at %q", s.Name)
		}
		if s.LastToken > m.counter {
			return nil, fmt.Errorf("resource %q: last token %d above counter %d", s.Name, s.LastToken, m.counter)
		}
		if s.Deleted && len(s.Value) != 0 {
			return nil, fmt.Errorf("resource %q: deleted with a value", s.Name)
		}
		m.resources[s.Name] = &resource{name: s.Name, value: s.Value, lastToken: s.LastToken, version: s.Version, deleted: s.Deleted}
		m.resourceBytes += int64(len(s.Value))
	}
	if err := m.restoreResults(doc); err != nil {
		return nil, err
	}
	if err := m.checkKeyLeases(); err != nil {
		return nil, err
	}
	return m, nil
}

// opOfSnap is the key and record of op s of a snapshot of format f: in
// fence-state/1 its key is computed from its names, its payload hash cut
// to payloadSize, and its token dropped (the payload covers it).
func opOfSnap(f string, s *snapOp) (opKey, opRecord, error) {
	var k opKey
	rec := opRecord{version: s.Version, addValue: s.AddValue}
	payload := payloadSize
	if f == snapshotFormatV1 {
		payload = 16
	}
	if f == snapshotFormatV1 && (s.Key != nil || s.OpID == nil) || f != snapshotFormatV1 && (len(s.Key) != len(k) || s.Resource != "" || s.OpID != nil || s.Token != 0) || len(s.Payload) != payload {
		return k, rec, fmt.Errorf("op %q of %q (key %x): names, key or payload not those of %s", s.OpID, s.Resource, s.Key, f)
	}
	if f == snapshotFormatV1 {
		k = opKeyOf(s.Resource, string(s.OpID))
	} else {
		copy(k[:], s.Key)
	}
	copy(rec.payload[:], s.Payload)
	return k, rec, nil
}

func (m *impl) addLive(r *request) error {
	if r.id == "" || m.live[r.id] != nil {
		return fmt.Errorf("request %q: empty or repeated", r.id)
	}
	m.setLive(r)
	return nil
}
