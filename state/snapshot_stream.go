package state

import (
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// Snapshot encoding, format "fence-state/2" (and "fence-state/1", read
// only; see snapshotFormat): a statepb.SnapshotHeader, then
// one statepb.SnapshotRecord per lock, idle lock name, remembered request,
// remembered op, resource and session, in that order of kinds; each
// message is preceded by its length as a uvarint and is in its one
// canonical encoding. Writing is streamed: at most snapChunk bytes (plus
// one record) are buffered before they go to the writer, so a snapshot
// needs memory for the view and one record, not for the whole encoding.
//
// Decoding refuses, before a machine is built from the records (R2): a
// length past the end, an undecodable message, a header of another format
// (checked first, so a later format is named as such), a field this binary
// does not know, a record with no member, records out of the order of
// kinds, and any message that is not exactly the encoding of what was
// decoded from it. fromSnapshot then checks the state's invariants.

// snapChunk is how much encoded output is buffered before it is written.
const snapChunk = 64 << 10

// snapStream writes length-prefixed messages to w through a snapChunk
// buffer, counting what it wrote.
type snapStream struct {
	w   io.Writer
	buf []byte
	n   int64
	err error
}

func (s *snapStream) msg(m proto.Message) {
	if s.err != nil {
		return
	}
	s.buf = protowire.AppendVarint(s.buf, uint64(deterministic.Size(m)))
	s.buf, s.err = sized.MarshalAppend(s.buf, m)
	if len(s.buf) >= snapChunk {
		s.flush()
	}
}

// idle writes an idle name's record, SnapshotRecord{idle: name}, encoded
// by hand: the same bytes as s.msg of that record (TestIdleRecordBytes),
// without a message and two passes of the protobuf runtime for each of up
// to 100,000 tombstones.
func (s *snapStream) idle(name string) {
	if s.err != nil {
		return
	}
	n := protowire.SizeTag(idleField) + protowire.SizeBytes(len(name))
	s.buf = protowire.AppendVarint(s.buf, uint64(n))
	s.buf = protowire.AppendTag(s.buf, idleField, protowire.BytesType)
	s.buf = protowire.AppendString(s.buf, name)
	if len(s.buf) >= snapChunk {
		s.flush()
	}
}

// idleField is SnapshotRecord's idle field number.
const idleField = 2

// freeLock writes the record of a lock with no holder and no queue,
// SnapshotRecord{lock: Lock{...}}, encoded by hand like idle: the same
// bytes as s.msg of that record (TestFreeLockRecordBytes).
func (s *snapStream) freeLock(l *snapLock) {
	if s.err != nil {
		return
	}
	var lb [64]byte
	in := appendStr(lb[:0], 1, l.Name)
	in = appendUint(in, 4, uint64(l.LastToken))
	in = appendStr(in, 5, l.LastOwner)
	in = appendUint(in, 6, uint64(uint32(l.LastEnd)))
	in = appendSint(in, 7, l.FreedAt)
	in = appendSint(in, 8, l.DelayUntil)
	in = appendSint(in, 9, l.IdleSince)
	n := protowire.SizeTag(lockField) + protowire.SizeBytes(len(in))
	s.buf = protowire.AppendVarint(s.buf, uint64(n))
	s.buf = protowire.AppendBytes(protowire.AppendTag(s.buf, lockField, protowire.BytesType), in)
	if len(s.buf) >= snapChunk {
		s.flush()
	}
}

// lockField is SnapshotRecord's lock field number.
const lockField = 1

func (s *snapStream) flush() {
	if s.err != nil || len(s.buf) == 0 {
		return
	}
	n, err := s.w.Write(s.buf)
	s.n += int64(n)
	s.err = err
	s.buf = s.buf[:0]
}

// writeSnapDoc writes doc's encoding to w, streamed.
func writeSnapDoc(w io.Writer, doc *snapDoc) (int64, error) {
	s := &snapStream{w: w, buf: make([]byte, 0, snapChunk+4<<10)}
	s.msg(pbHeader(doc))
	for i := range doc.Locks {
		if l := &doc.Locks[i]; l.Holder == nil && len(l.Queue) == 0 {
			s.freeLock(l) // most locks of a large state: tombstones
			continue
		}
		s.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Lock{Lock: pbLock(&doc.Locks[i])}})
	}
	for _, name := range doc.Idle {
		s.idle(name)
	}
	for i := range doc.Requests {
		s.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Request{Request: pbRequest(&doc.Requests[i])}})
	}
	for i := range doc.OpRecords {
		s.op(&doc.OpRecords[i])
	}
	for i := range doc.Ops {
		s.opEntry(&doc.Ops[i], doc.OpPrincipals)
	}
	for i := range doc.Resources {
		s.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Resource{Resource: pbResource(&doc.Resources[i])}})
	}
	for i := range doc.Sessions {
		s.msg(&statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Session{Session: pbSession(&doc.Sessions[i])}})
	}
	s.flush()
	return s.n, s.err
}

// nextMessage splits the first length-prefixed message off b.
func nextMessage(b []byte) (msg, rest []byte, err error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("truncated or bad length prefix")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// decodeSnapshot decodes a snapshot's messages into a snapDoc, checking
// the format (not yet the state's invariants: fromSnapshot does).
func decodeSnapshot(b []byte) (*snapDoc, error) { return decodeSnapshotWith(b, true) }

// decodeSnapshotWith is decodeSnapshot; with fastOps, an op record in
// its canonical encoding is read by readOpRecord, any other record (and
// every record without fastOps) by the protobuf runtime: the same
// outcome (TestOpRecordDecoding), the first about 10 times faster.
func decodeSnapshotWith(b []byte, fastOps bool) (*snapDoc, error) {
	msg, rest, err := nextMessage(b)
	if err != nil {
		return nil, badSnapshot(0, "%v", err)
	}
	var h statepb.SnapshotHeader
	if err := proto.Unmarshal(msg, &h); err != nil {
		return nil, badSnapshot(0, "%v", err)
	}
	if !ReadsSnapshotFormat(h.Format) {
		return nil, badSnapshot(0, "format %q, want %q", h.Format, snapshotFormat)
	}
	if err := knownFields(&h); err != nil {
		return nil, badSnapshot(0, "%v", err)
	}
	doc, err := headerDoc(&h)
	if err != nil {
		return nil, badSnapshot(0, "%v", err)
	}
	if err := canonical(msg, pbHeader(doc)); err != nil {
		return nil, badSnapshot(0, "%v", err)
	}
	if n := countOpRecords(rest); n > 0 {
		doc.OpRecords = make([]snapOp, 0, n) // not grown a million times over
	}
	last := 0 // the kind of the last record: its oneof field number
	for i := 1; len(rest) > 0; i++ {
		if msg, rest, err = nextMessage(rest); err != nil {
			return nil, badSnapshot(i, "%v", err)
		}
		if fastOps && last <= 4 {
			if o, ok := readOpRecord(msg); ok {
				doc.OpRecords = append(doc.OpRecords, o)
				last = opField
				continue
			}
		}
		var r statepb.SnapshotRecord
		if err := proto.Unmarshal(msg, &r); err != nil {
			return nil, badSnapshot(i, "%v", err)
		}
		if err := knownFields(&r); err != nil {
			return nil, badSnapshot(i, "%v", err)
		}
		var again proto.Message
		kind := 0
		switch x := r.Record.(type) {
		case *statepb.SnapshotRecord_Lock:
			kind = 1
			l, err := lockOf(x.Lock)
			if err != nil {
				return nil, badSnapshot(i, "%v", err)
			}
			doc.Locks = append(doc.Locks, l)
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Lock{Lock: pbLock(&doc.Locks[len(doc.Locks)-1])}}
		case *statepb.SnapshotRecord_Idle:
			kind = 2
			doc.Idle = append(doc.Idle, string(x.Idle))
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Idle{Idle: []byte(doc.Idle[len(doc.Idle)-1])}}
		case *statepb.SnapshotRecord_Request:
			kind = 3
			r, err := requestOf(x.Request)
			if err != nil {
				return nil, badSnapshot(i, "%v", err)
			}
			doc.Requests = append(doc.Requests, r)
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Request{Request: pbRequest(&doc.Requests[len(doc.Requests)-1])}}
		case *statepb.SnapshotRecord_Op:
			kind = 4
			doc.OpRecords = append(doc.OpRecords, opOf(x.Op))
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Op{Op: pbOp(&doc.OpRecords[len(doc.OpRecords)-1])}}
		case *statepb.SnapshotRecord_Resource:
			kind = 5
			doc.Resources = append(doc.Resources, resourceOf(x.Resource))
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Resource{Resource: pbResource(&doc.Resources[len(doc.Resources)-1])}}
		case *statepb.SnapshotRecord_Session:
			kind = 6
			ss, err := sessionOf(x.Session)
			if err != nil {
				return nil, badSnapshot(i, "%v", err)
			}
			doc.Sessions = append(doc.Sessions, ss)
			again = &statepb.SnapshotRecord{Record: &statepb.SnapshotRecord_Session{Session: pbSession(&doc.Sessions[len(doc.Sessions)-1])}}
		default:
			return nil, badSnapshot(i, "empty")
		}
		if kind < last {
			return nil, badSnapshot(i, "a %s after a later kind", r.ProtoReflect().WhichOneof(r.ProtoReflect().Descriptor().Oneofs().Get(0)).Name())
		}
		last = kind
		if err := canonical(msg, again); err != nil {
			return nil, badSnapshot(i, "%v", err)
		}
	}
	return doc, nil
}

// badSnapshot is a snapshot's DecodeError, of its header (0) or of its
// record i.
func badSnapshot(i int, format string, args ...any) error {
	return &DecodeError{Snapshot: true, Message: i, Reason: fmt.Sprintf(format, args...)}
}

// The conversions between the records as Go values and as messages. Each
// pair is exact both ways for every value a message can hold (a value out
// of a Go field's range converts back to another message and is refused
// as not canonical).

func pbHeader(d *snapDoc) *statepb.SnapshotHeader {
	h := &statepb.SnapshotHeader{Format: d.Format, Now: d.Now, Decided: d.Decided, MaxSlack: d.MaxSlack, Counter: uint64(d.Counter),
		Configured: d.Configured, KeepMin: d.KeepMin, KeepMinUntil: d.KeepMinUntil, SessionCounter: d.SessionCounter, ClusterId: bs(d.ClusterID)}
	if d.Config != nil {
		h.Config = configPB(*d.Config)
	}
	h.Auth = pbAuth(d.Auth)
	h.Keys, h.RestoredFrom = pbKeys(d.Keys, d.RestoredFrom)
	return h
}

func headerDoc(h *statepb.SnapshotHeader) (*snapDoc, error) {
	d := &snapDoc{Format: h.Format, Now: h.Now, Decided: h.Decided, MaxSlack: h.MaxSlack, Counter: fence.Token(h.Counter),
		Configured: h.Configured, KeepMin: h.KeepMin, KeepMinUntil: h.KeepMinUntil, SessionCounter: h.SessionCounter, ClusterID: string(h.ClusterId)}
	if h.Config != nil {
		c, err := configOfPB(h.Config)
		if err != nil {
			return nil, err
		}
		d.Config = &c
	}
	a, err := authOfPB(h.Auth)
	if err != nil {
		return nil, err
	}
	d.Auth = a
	d.Keys, d.RestoredFrom = keysOfPB(h.Keys, h.RestoredFrom)
	return d, nil
}

func pbLock(l *snapLock) *statepb.Lock {
	p := &statepb.Lock{Name: bs(l.Name), LastToken: uint64(l.LastToken), LastOwner: bs(l.LastOwner), LastEnd: uint32(l.LastEnd),
		FreedAt: l.FreedAt, DelayUntil: l.DelayUntil, IdleSince: l.IdleSince}
	if l.Holder != nil {
		p.Holder = pbGrant(l.Holder)
	}
	for i := range l.More {
		p.MoreHolders = append(p.MoreHolders, pbGrant(&l.More[i]))
	}
	p.Permits = l.Permits
	for i := range l.Queue {
		p.Queue = append(p.Queue, pbRequest(&l.Queue[i]))
	}
	return p
}

func pbGrant(g *snapGrant) *statepb.Grant {
	p := &statepb.Grant{Owner: bs(g.Owner), Token: uint64(g.Token), Ttl: g.TTL, ExpiresAt: g.ExpiresAt, LockDelay: g.LockDelay, Session: g.Session,
		Principal: bs(g.Principal), Key: bs(g.Key), Mode: uint32(g.Mode), Set: pbSpecs(g.Set), InSet: g.InSet}
	if g.Request != nil {
		p.Request = pbRequest(g.Request)
	}
	return p
}

func grantOf(g *statepb.Grant) (snapGrant, error) {
	sg := snapGrant{Owner: string(g.Owner), Token: fence.Token(g.Token), TTL: g.Ttl, ExpiresAt: g.ExpiresAt, LockDelay: g.LockDelay, Session: g.Session,
		Principal: string(g.Principal), Key: string(g.Key), Mode: fence.Mode(g.Mode), InSet: g.InSet}
	if uint32(sg.Mode) != g.Mode {
		return sg, fmt.Errorf("grant %d: mode %d out of range", g.Token, g.Mode)
	}
	set, err := specsOf(g.Set)
	if err != nil {
		return sg, err
	}
	sg.Set = set
	if g.Request != nil {
		r, err := requestOf(g.Request)
		if err != nil {
			return sg, err
		}
		sg.Request = &r
	}
	return sg, nil
}

func pbSpecs(specs []fence.LockSpec) []*statepb.LockSpec {
	var out []*statepb.LockSpec
	for _, s := range specs {
		out = append(out, &statepb.LockSpec{Name: bs(s.Name), Mode: uint32(s.Mode), Permits: s.Permits})
	}
	return out
}

func specsOf(ps []*statepb.LockSpec) ([]fence.LockSpec, error) {
	var out []fence.LockSpec
	for _, p := range ps {
		s := fence.LockSpec{Name: string(p.Name), Mode: fence.Mode(p.Mode), Permits: p.Permits}
		if uint32(s.Mode) != p.Mode {
			return nil, fmt.Errorf("lock %q: mode %d out of range", s.Name, p.Mode)
		}
		out = append(out, s)
	}
	return out, nil
}

func lockOf(p *statepb.Lock) (snapLock, error) {
	l := snapLock{Name: string(p.Name), LastToken: fence.Token(p.LastToken), LastOwner: string(p.LastOwner), LastEnd: leaseEnd(p.LastEnd),
		FreedAt: p.FreedAt, DelayUntil: p.DelayUntil, IdleSince: p.IdleSince, Permits: p.Permits}
	if p.Holder != nil {
		g, err := grantOf(p.Holder)
		if err != nil {
			return l, err
		}
		l.Holder = &g
	}
	for _, q := range p.MoreHolders {
		g, err := grantOf(q)
		if err != nil {
			return l, err
		}
		l.More = append(l.More, g)
	}
	for _, q := range p.Queue {
		r, err := requestOf(q)
		if err != nil {
			return l, err
		}
		l.Queue = append(l.Queue, r)
	}
	return l, nil
}

func pbRequest(r *snapRequest) *statepb.Request {
	return &statepb.Request{Id: r.ID, Name: bs(r.Name), Owner: bs(r.Owner), Ttl: r.TTL, Wait: r.Wait, LockDelay: r.LockDelay, Deadline: r.Deadline,
		State: uint32(r.State), Token: uint64(r.Token), Outcome: uint32(r.Outcome), At: r.At, Attempt: r.Attempt, Session: r.Session, Principal: bs(r.Principal),
		Mode: uint32(r.Mode), Permits: r.Permits, Set: pbSpecs(r.Set), InSet: r.InSet}
}

func requestOf(p *statepb.Request) (snapRequest, error) {
	r := snapRequest{ID: p.Id, Name: string(p.Name), Owner: string(p.Owner), TTL: p.Ttl, Wait: p.Wait, LockDelay: p.LockDelay, Deadline: p.Deadline,
		State: requestState(p.State), Token: fence.Token(p.Token), Outcome: outcome(p.Outcome), At: p.At, Attempt: p.Attempt, Session: p.Session, Principal: string(p.Principal),
		Mode: fence.Mode(p.Mode), Permits: p.Permits, InSet: p.InSet}
	if uint32(r.Mode) != p.Mode {
		return r, fmt.Errorf("request %q: mode %d out of range", p.Id, p.Mode)
	}
	set, err := specsOf(p.Set)
	r.Set = set
	return r, err
}

func pbOp(o *snapOp) *statepb.Op {
	return &statepb.Op{Key: o.Key, Resource: bs(o.Resource), OpId: o.OpID, At: o.At, Payload: o.Payload, Token: uint64(o.Token), Version: o.Version, AddValue: o.AddValue, Principal: bs(o.Principal)}
}

func opOf(p *statepb.Op) snapOp {
	return snapOp{Key: p.Key, Resource: string(p.Resource), OpID: p.OpId, At: p.At, Payload: p.Payload, Token: fence.Token(p.Token), Version: p.Version, AddValue: p.AddValue, Principal: string(p.Principal)}
}

func pbResource(r *snapResource) *statepb.Resource {
	return &statepb.Resource{Name: bs(r.Name), Value: r.Value, LastToken: uint64(r.LastToken), Version: r.Version, Deleted: r.Deleted}
}

func resourceOf(p *statepb.Resource) snapResource {
	return snapResource{Name: string(p.Name), Value: p.Value, LastToken: fence.Token(p.LastToken), Version: p.Version, Deleted: p.Deleted}
}

func pbSession(s *snapSession) *statepb.Session {
	p := &statepb.Session{Id: s.ID, Ttl: s.TTL, ExpiresAt: s.ExpiresAt, OpenId: s.OpenID, OpenTtl: s.OpenTTL, Floor: s.Floor, Principal: bs(s.Principal)}
	for _, name := range s.Leases {
		p.Leases = append(p.Leases, []byte(name))
	}
	for i := range s.Results {
		p.Results = append(p.Results, pbSaved(&s.Results[i]))
	}
	return p
}

func sessionOf(p *statepb.Session) (snapSession, error) {
	s := snapSession{ID: p.Id, TTL: p.Ttl, ExpiresAt: p.ExpiresAt, OpenID: p.OpenId, OpenTTL: p.OpenTtl, Floor: p.Floor, Principal: string(p.Principal)}
	for _, name := range p.Leases {
		s.Leases = append(s.Leases, string(name))
	}
	for _, r := range p.Results {
		sv, err := savedOf(r)
		if err != nil {
			return s, err
		}
		s.Results = append(s.Results, sv)
	}
	return s, nil
}

func pbSaved(s *snapSaved) *statepb.Saved {
	p := &statepb.Saved{Seq: s.Seq, Op: uint32(s.Op), Name: bs(s.Name), At: s.At, Hash: s.Hash, Err: s.Err, Queued: s.Queued,
		AddValue: s.AddValue, Attempt: s.Attempt}
	if s.Request != nil {
		p.Request = pbRequest(s.Request)
	}
	if l := s.Lease; l != nil {
		p.Lease = &statepb.Lease{Name: bs(l.Name), Owner: bs(l.Owner), Token: uint64(l.Token), Ttl: int64(l.TTL), Remaining: int64(l.Remaining),
			Mode: uint32(l.Mode), Permits: l.Permits, Locks: pbSpecs(l.Locks)}
	}
	if r := s.Resource; r != nil {
		p.Resource = &statepb.ResourceState{Resource: bs(r.Resource), Value: r.Value, LastToken: uint64(r.LastToken), Version: r.Version, Deleted: r.Deleted}
	}
	if i := s.Session; i != nil {
		p.Session = &statepb.SessionInfo{Id: i.ID, Ttl: int64(i.TTL), Remaining: int64(i.Remaining), Leases: int64(i.Leases)}
	}
	return p
}

func savedOf(p *statepb.Saved) (snapSaved, error) {
	s := snapSaved{Seq: p.Seq, Op: Op(p.Op), Name: string(p.Name), At: p.At, Hash: p.Hash, Err: p.Err, Queued: p.Queued,
		AddValue: p.AddValue, Attempt: p.Attempt}
	if p.Request != nil {
		r, err := requestOf(p.Request)
		if err != nil {
			return s, err
		}
		s.Request = &r
	}
	if l := p.Lease; l != nil {
		s.Lease = &fence.Lease{Name: string(l.Name), Owner: string(l.Owner), Token: fence.Token(l.Token), TTL: time.Duration(l.Ttl), Remaining: time.Duration(l.Remaining),
			Mode: fence.Mode(l.Mode), Permits: l.Permits}
		if uint32(s.Lease.Mode) != l.Mode {
			return s, fmt.Errorf("saved lease: mode %d out of range", l.Mode)
		}
		locks, err := specsOf(l.Locks)
		if err != nil {
			return s, err
		}
		s.Lease.Locks = locks
	}
	if r := p.Resource; r != nil {
		s.Resource = &ResourceState{Resource: string(r.Resource), Value: r.Value, LastToken: fence.Token(r.LastToken), Version: r.Version, Deleted: r.Deleted}
	}
	if i := p.Session; i != nil {
		s.Session = &SessionInfo{ID: i.Id, TTL: time.Duration(i.Ttl), Remaining: time.Duration(i.Remaining), Leases: int(i.Leases)}
	}
	return s, nil
}
