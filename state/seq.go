package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/plant"
)

// Exactly-once by sequence number (see doc.go, Sessions). A command with a
// Session and Seq > 0 is answered once: its Result is saved on the session
// until the client acknowledges it (a later command's Ack above its Seq),
// and a retry of the Seq gets the saved Result (Replayed) without applying
// anything; the remaining times of its lease or session are counted down
// by the server time passed since (a retry never extends what a client
// believes it holds). A saved acquire that was granted or queued refers to its
// request and answers a retry with the request's current outcome (as a
// request_id retry would), so a retry of a wait that was granted since
// gets the lease.

// savedResult is the answer to one sequenced command, kept on its session
// until acknowledged.
type savedResult struct {
	seq  uint64
	op   Op
	name string
	at   int64             // server time it was saved
	hash [seqHashSize]byte // seqPayloadHash of the command
	req  *request          // acquire granted or queued: answered with its current outcome
	res  Result            // otherwise: the result (no Events; a write's Resource without its value)
}

// takesSession reports whether op may carry a Session (and Seq and Ack).
func takesSession(op Op) bool {
	switch op {
	case OpAcquire, OpRenew, OpRelease, OpWrite, OpAdd, OpDelete, OpSessionKeepAlive, OpSessionClose:
		return true
	}
	return false
}

// sequenced checks cmd's session, applies its Ack, answers a retried Seq
// from the saved results, and otherwise dispatches cmd and saves its
// result when it is sequenced.
func (m *impl) sequenced(cmd Command) Result {
	if cmd.Session == 0 {
		switch {
		case cmd.Op == OpSessionKeepAlive || cmd.Op == OpSessionClose:
			return Result{Err: fence.Invalid("session", "a session id (not 0)", "0")}
		case cmd.Seq != 0:
			return Result{Err: fence.Invalid("seq", "0 without a session", u64toa(cmd.Seq))}
		case cmd.Ack != 0:
			return Result{Err: fence.Invalid("ack", "0 without a session", u64toa(cmd.Ack))}
		}
		return m.dispatch(cmd)
	}
	if !takesSession(cmd.Op) {
		return Result{Err: fence.Invalid("session", "0 for op "+itoa(int64(cmd.Op)), u64toa(cmd.Session))}
	}
	s, err := m.liveSession(cmd.Session)
	if err == nil {
		// Before the ack and the saved results: another principal's
		// command neither acknowledges nor reads nor takes a seq.
		err = owns(cmd, s.principal, "session", u64toa(s.id))
	}
	if err != nil {
		return Result{Err: err}
	}
	if cmd.Seq == 0 {
		m.acknowledge(s, cmd.Ack)
		return m.dispatch(cmd)
	}
	if cmd.Ack > cmd.Seq {
		return Result{Err: fence.Invalid("ack", "at most seq "+u64toa(cmd.Seq), u64toa(cmd.Ack))}
	}
	m.acknowledge(s, cmd.Ack)
	if cmd.Seq < s.floor {
		return Result{Err: fence.Invalid("seq", ">= "+u64toa(s.floor)+" (already acknowledged)", u64toa(cmd.Seq))}
	}
	if plant.On(plant.IDsForgotten) {
		m.plantForgetSaved(s)
	}
	if i, ok := s.find(cmd.Seq); ok {
		if res, done := m.replaySaved(s, i, cmd); done {
			return res
		}
	}
	if c := m.cfg.MaxSessionResults; c > 0 && len(s.results) >= c {
		return Result{Err: fence.Exhausted("saved results on session "+u64toa(s.id)+" (config.max_session_results)",
			"at most "+utoa(c), utoa(len(s.results)))}
	}
	if cmd.Op == OpAcquire && cmd.RequestID == "" {
		cmd.RequestID = SessionRequestID(s.id, cmd.Seq)
	}
	res := m.dispatch(cmd)
	if m.sessions[s.id] == s { // not when cmd ended it
		s.save(m.saved(cmd, res))
	}
	return res
}

// replaySaved answers cmd from s.results[i]. done is false when the saved
// acquire's wait was cancelled (its client went away, nothing was
// granted): the entry is dropped and cmd is a new request.
func (m *impl) replaySaved(s *session, i int, cmd Command) (res Result, done bool) {
	sv := &s.results[i]
	conflict := sv.op != cmd.Op || sv.name != cmd.Name || sv.hash != seqPayloadHash(cmd)
	if conflict {
		return Result{Err: &fence.OpConflictError{Field: "seq", ID: u64toa(cmd.Seq)}}, true
	}
	if r := sv.req; r != nil {
		if r.state == reqDone && r.outcome == outcomeCancelled {
			s.results = slices.Delete(s.results, i, i+1) // zeroes the freed slot
			return Result{}, false
		}
		if l := m.names.get(r.name); l != nil {
			m.settle(l, &res.Events)
			defer m.touch(l)
		}
		out := m.replay(r)
		out.Events = res.Events
		return out, true
	}
	out := cloneResult(sv.res)
	out.Replayed = true
	// Remaining times count from now, as every reply's do: a client turns
	// them into deadlines from when it sent the retry.
	elapsed := time.Duration(m.clock - sv.at)
	if out.Lease != nil {
		out.Lease.Remaining = max(out.Lease.Remaining-elapsed, 0)
	}
	if out.Session != nil {
		out.Session.Remaining = max(out.Session.Remaining-elapsed, 0)
	}
	if cmd.Op == OpWrite && out.Resource != nil {
		out.Resource.Value = bytes.Clone(cmd.Value) // not kept: the retry carries it
	}
	return out, true
}

// saved is what s keeps of cmd's result res.
func (m *impl) saved(cmd Command, res Result) savedResult {
	sv := savedResult{seq: cmd.Seq, op: cmd.Op, name: cmd.Name, at: m.clock, hash: seqPayloadHash(cmd)}
	if cmd.Op == OpAcquire && (res.Lease != nil || res.Queued) {
		if r := m.live[cmd.RequestID]; r != nil {
			sv.req = r
			return sv
		}
	}
	sv.res = cloneResult(res)
	sv.res.Events = nil
	sv.res.Replayed = false
	if cmd.Op == OpWrite && sv.res.Resource != nil {
		sv.res.Resource.Value = nil
	}
	return sv
}

// cloneResult copies r's pointers so the saved copy and the caller's do not
// share anything mutable (Events are shared: saved results have none).
func cloneResult(r Result) Result {
	if r.Lease != nil {
		l := *r.Lease
		r.Lease = &l
	}
	if r.Resource != nil {
		st := *r.Resource
		st.Value = bytes.Clone(st.Value)
		r.Resource = &st
	}
	if r.Session != nil {
		si := *r.Session
		r.Session = &si
	}
	return r
}

// find returns the index of seq in s.results.
func (s *session) find(seq uint64) (int, bool) {
	i := sort.Search(len(s.results), func(i int) bool { return s.results[i].seq >= seq })
	return i, i < len(s.results) && s.results[i].seq == seq
}

// save files sv by its seq (not present yet).
func (s *session) save(sv savedResult) {
	i, _ := s.find(sv.seq)
	s.results = append(s.results, savedResult{})
	copy(s.results[i+1:], s.results[i:])
	s.results[i] = sv
}

// acknowledge forgets the saved results below ack and raises the floor
// to it: a seq below the floor is refused from now on. A forgotten
// acquire's request that holds its lock is dropped too (answered).
func (m *impl) acknowledge(s *session, ack uint64) {
	if ack <= s.floor {
		return
	}
	s.floor = ack
	i, _ := s.find(ack)
	for _, sv := range s.results[:i] {
		m.answered(sv.req)
	}
	clear(s.results[:i])
	s.results = s.results[i:]
	if len(s.results) == 0 {
		s.results = nil
	}
}

func u64toa(n uint64) string { return strconv.FormatUint(n, 10) }

// answered drops the request of a session-bound acquire whose saved result
// was acknowledged, when it holds its lock under its SessionRequestID: the
// lease stays (bound to its session, released by token, ended with the
// session), only the record of the acquire goes (about 190 bytes a held
// lease: the request, its impl.live entry and its id). Nothing can name it
// any more: its seq is refused below the floor, no client request_id starts
// with the reserved prefix, a generated id is never remembered once final,
// and the client that acknowledged had the reply, so no cancel of the
// attempt it waited with comes (a cancel of an older attempt was a no-op
// already). A queued request stays: its grant is yet to be told.
func (m *impl) answered(r *request) {
	if r == nil || r.state != reqHeld || r.sess == nil || !generatedID(r.id) {
		return
	}
	l := m.names.get(r.name)
	if l == nil {
		return
	}
	g := l.holderWith(r.token)
	if g == nil || g.req != r {
		return
	}
	g.req = nil
	m.unsetLive(r.id)
}

// seqPayloadHash digests everything of cmd that a retry of the same seq
// must repeat, beyond its op and name: the token, the delta, the value, the
// op_id, the owner, the lock-delay, and the TTL of a renew or keepalive. A
// retry that differs in any of them is OP_CONFLICT, never the saved result
// of another request (a renew retried with another ttl was answered with
// the first one's lease). Left out: an acquire's wait (a retry may send
// what is left of it), its ttl (ignored on a session), and its request_id
// (the machine fills it in for a session acquire).
// seqHashSize is how much of the SHA-256 of a sequenced command a saved
// result keeps (128 bits; saved results are few, bounded by
// acknowledgement, so they keep the width the format began with).
const seqHashSize = 16

func seqPayloadHash(c Command) [seqHashSize]byte {
	h := sha256.New()
	var b [1 + 4*binary.MaxVarintLen64]byte
	n := copy(b[:], []byte{byte(c.Op)})
	n += binary.PutUvarint(b[n:], uint64(c.Token))
	n += binary.PutVarint(b[n:], c.Delta)
	n += binary.PutVarint(b[n:], int64(c.LockDelay))
	ttl := c.TTL
	if c.Op == OpAcquire {
		ttl = 0
	}
	n += binary.PutVarint(b[n:], int64(ttl))
	h.Write(b[:n])
	for _, f := range [][]byte{c.Value, []byte(c.OpID), []byte(c.Owner)} {
		var l [binary.MaxVarintLen64]byte
		h.Write(l[:binary.PutUvarint(l[:], uint64(len(f)))])
		h.Write(f)
	}
	// An acquire's lock boundaries: its mode and permits, or its set
	// (sorted: the order a set is listed in is not part of it). Written only
	// when set, so the hash of a one-lock exclusive acquire is what it was
	// before they existed (saved hashes in snapshots stay valid).
	if c.Op == OpAcquire && (c.Mode != 0 || c.Permits != 0 || len(c.Locks) > 0) {
		var l [1 + 2*binary.MaxVarintLen64]byte
		l[0] = 0xb0 // a marker no earlier field ends with ambiguity around
		n := 1 + binary.PutUvarint(l[1:], uint64(c.Mode))
		n += binary.PutUvarint(l[n:], uint64(c.Permits))
		h.Write(l[:n])
		for _, sp := range fence.SortLocks(c.Locks) {
			var e [2*binary.MaxVarintLen64 + 1]byte
			k := binary.PutUvarint(e[:], uint64(len(sp.Name)))
			h.Write(e[:k])
			h.Write([]byte(sp.Name))
			k = binary.PutUvarint(e[:], uint64(sp.Mode))
			k += binary.PutUvarint(e[k:], uint64(sp.Permits))
			h.Write(e[:k])
		}
	}
	var sum [seqHashSize]byte
	copy(sum[:], h.Sum(nil))
	return sum
}
