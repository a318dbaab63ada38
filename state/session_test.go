package state

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

func openSess(now int64, ttl time.Duration) Command {
	return Command{Op: OpSessionOpen, Now: now, TTL: ttl}
}

func keepAlive(now int64, sess uint64, ttl time.Duration) Command {
	return Command{Op: OpSessionKeepAlive, Now: now, Session: sess, TTL: ttl}
}

func closeSess(now int64, sess uint64) Command {
	return Command{Op: OpSessionClose, Now: now, Session: sess}
}

// sAcq is a session-bound acquire with seq (its TTL is ignored).
func sAcq(now int64, sess, seq uint64, name, owner string, wait time.Duration) Command {
	return Command{Op: OpAcquire, Now: now, Name: name, Owner: owner, Wait: wait, Session: sess, Seq: seq}
}

// mustOpen opens a session and returns its id.
func mustOpen(t *testing.T, m *Machine, c Command) uint64 {
	t.Helper()
	r := mustOK(t, m, c)
	if r.Session == nil || r.Session.ID == 0 {
		t.Fatalf("%+v: no session in %s", c, describe(r))
	}
	return r.Session.ID
}

// eventsByID indexes events by request id, failing on a repeated id.
func eventsByID(t *testing.T, evs []Event) map[string]Event {
	t.Helper()
	out := map[string]Event{}
	for _, e := range evs {
		if _, dup := out[e.RequestID]; dup {
			t.Fatalf("two events for %q", e.RequestID)
		}
		out[e.RequestID] = e
	}
	return out
}

func TestSessionOpenIDsAndInfo(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	a := mustOpen(t, m, openSess(0, 5*time.Second))
	b := mustOpen(t, m, openSess(0, 7*time.Second))
	if a != 1 || b != 2 {
		t.Fatalf("ids %d, %d, want 1, 2", a, b)
	}
	mustOK(t, m, closeSess(sec, a))
	if c := mustOpen(t, m, openSess(sec, 5*time.Second)); c != 3 {
		t.Fatalf("id after a close %d, want 3 (never reused)", c)
	}
	info, ok := m.Session(b, 2*sec)
	if !ok || info.TTL != 7*time.Second || info.Remaining != 5*time.Second {
		t.Fatalf("session %d at 2s: %+v %v, want ttl 7s remaining 5s", b, info, ok)
	}
	if _, ok := m.Session(a, 2*sec); ok {
		t.Fatalf("closed session %d reads live", a)
	}
	if m.Sessions() != 2 {
		t.Fatalf("Sessions() = %d, want 2", m.Sessions())
	}
	for _, ttl := range []time.Duration{0, fence.MinTTL - 1, DefaultConfig().MaxTTL + 1} {
		if e := errAs[*fence.InvalidError](t, m.Apply(openSess(2*sec, ttl)).Err); e.Field != "ttl" {
			t.Fatalf("open with ttl %s: field %q", ttl, e.Field)
		}
	}
}

func TestSessionOpenIdempotent(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	c := openSess(0, 5*time.Second)
	c.RequestID = "nonce"
	id := mustOpen(t, m, c)
	c.Now = sec
	r := mustOK(t, m, c)
	if !r.Replayed || r.Session.ID != id || r.Session.Remaining != 4*time.Second {
		t.Fatalf("retried open: %s %+v, want session %d replayed with 4s left", describe(r), r.Session, id)
	}
	c.TTL = 6 * time.Second
	errAs[*fence.OpConflictError](t, m.Apply(c).Err)
	c.TTL = 5 * time.Second
	mustOK(t, m, closeSess(sec, id))
	if again := mustOpen(t, m, c); again == id {
		t.Fatalf("open after its session ended got the ended session %d", id)
	}
}

// TestSessionExpiryOneApply: one tick at the session's expiry ends every
// lease it holds and hands each lock to its waiter, all in that apply; the
// lease with a lock-delay delays its lock instead.
func TestSessionExpiryOneApply(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	for i, name := range []string{"c", "a", "b", "d"} {
		c := sAcq(0, s, uint64(i+1), name, "S", 0)
		if name == "d" {
			c.LockDelay = 2 * time.Second
		}
		mustGrant(t, m, c, fence.Token(i+1))
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if r := mustOK(t, m, waitAcq(sec, name, "W", 10*time.Second, time.Minute, "w-"+name)); !r.Queued {
			t.Fatalf("waiter on %s not queued: %s", name, describe(r))
		}
	}
	if at, ok := m.NextDeadline(); !ok || at != 5*sec {
		t.Fatalf("NextDeadline %d %v, want the session's expiry 5s", at, ok)
	}
	if r := m.Apply(tick(5*sec - 1)); len(r.Events) != 0 {
		t.Fatalf("tick before the expiry: %s", describe(r))
	}
	r := mustOK(t, m, tick(5*sec))
	if len(r.Events) != 3 {
		t.Fatalf("tick at expiry: %s, want 3 grants in one apply", describe(r))
	}
	for i, name := range []string{"a", "b", "c"} { // by lock name
		e := r.Events[i]
		if e.RequestID != "w-"+name || e.Lease == nil || e.Lease.Name != name || e.Lease.Owner != "W" {
			t.Fatalf("event %d: %+v, want the grant of %s to W", i, e, name)
		}
	}
	if info := m.Lock("d", 5*sec); info.LockDelayRemaining != 2*time.Second || info.Lease != nil {
		t.Fatalf("lock d after its session expired: %+v, want 2s of lock-delay", info)
	}
	if _, ok := m.Session(s, 5*sec); ok || m.Sessions() != 0 {
		t.Fatalf("session %d still live after its expiry", s)
	}
	r = mustOK(t, m, tick(7*sec))
	if len(r.Events) != 1 || r.Events[0].RequestID != "w-d" || r.Events[0].Lease == nil {
		t.Fatalf("tick at the lock-delay's end: %s, want the grant of d", describe(r))
	}
}

// TestSessionCloseNoLockDelay: a close releases (no lock-delay) and hands on
// in the same apply.
func TestSessionCloseNoLockDelay(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	c := sAcq(0, s, 1, "a", "S", 0)
	c.LockDelay = 3 * time.Second
	mustGrant(t, m, c, 1)
	mustOK(t, m, waitAcq(0, "a", "W", 10*time.Second, time.Minute, "w"))
	r := mustOK(t, m, closeSess(sec, s))
	if len(r.Events) != 1 || r.Events[0].Lease == nil || r.Events[0].Lease.Token != 2 {
		t.Fatalf("close: %s, want the grant to w in the same apply", describe(r))
	}
	errAs[*fence.SessionExpiredError](t, m.Apply(closeSess(sec, s)).Err)
}

// TestSessionWaiterEnds: a session's queued acquire ends with the session
// (SESSION_EXPIRED event), out of its lock's queue and the waiting count.
func TestSessionWaiterEnds(t *testing.T) {
	for _, closed := range []bool{false, true} {
		m := NewWithConfig(DefaultConfig())
		mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
		s := mustOpen(t, m, openSess(0, 5*time.Second))
		r := mustOK(t, m, sAcq(0, s, 1, "a", "S", time.Minute))
		if !r.Queued || m.Waiting() != 1 {
			t.Fatalf("session acquire: %s, waiting %d", describe(r), m.Waiting())
		}
		if q := m.Queued(); len(q) != 1 || q[0].RequestID != SessionRequestID(s, 1) {
			t.Fatalf("queued %+v, want the session's request id", q)
		}
		if closed {
			r = mustOK(t, m, closeSess(sec, s))
		} else {
			r = mustOK(t, m, tick(5*sec))
		}
		if len(r.Events) != 1 || r.Events[0].RequestID != SessionRequestID(s, 1) {
			t.Fatalf("end (closed %v): %s, want the waiter's end", closed, describe(r))
		}
		if e := errAs[*fence.SessionExpiredError](t, r.Events[0].Err); e.Session != s || !errors.Is(r.Events[0].Err, fence.ErrSessionExpired) {
			t.Fatalf("event error %v", r.Events[0].Err)
		}
		if m.Waiting() != 0 || len(m.Queued()) != 0 || m.Lock("a", 5*sec).Waiters != 0 {
			t.Fatalf("waiter still counted: waiting %d queued %v", m.Waiting(), m.Queued())
		}
		mustOK(t, m, rel(5*sec, "a", 1)) // nobody to hand to
		mustGrant(t, m, acq(5*sec, "a", "B", time.Minute), 2)
	}
}

// TestSessionExpiredLockGrantedWithoutTick: a lock held by a session past
// its expiry is free for the next acquire even if no tick ran.
func TestSessionExpiredLockGrantedWithoutTick(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	mustGrant(t, m, sAcq(0, s, 1, "a", "S", 0), 1)
	errAs[*fence.BusyError](t, m.Apply(acq(5*sec-1, "a", "B", time.Minute)).Err)
	if info := m.Lock("a", 5*sec-1); info.Free {
		t.Fatalf("lock a reads free before the session's expiry")
	}
	r := m.Apply(acq(5*sec, "a", "B", time.Minute))
	if r.Err != nil || r.Lease == nil || r.Lease.Token != 2 {
		t.Fatalf("acquire after the expiry, no tick: %s", describe(r))
	}
	// Slack: the decision time is behind, the session still lives.
	m2 := NewWithConfig(DefaultConfig())
	s = mustOpen(t, m2, openSess(0, 5*time.Second))
	mustGrant(t, m2, sAcq(0, s, 1, "a", "S", 0), 1)
	c := acq(6*sec, "a", "B", time.Minute)
	c.Slack = 2 * time.Second
	errAs[*fence.BusyError](t, m2.Apply(c).Err)
}

// TestSessionRemainingFollowsKeepAlive: a bound lease reports its session's
// TTL and remaining time; a keepalive (or a renew of the lease) moves both.
func TestSessionRemainingFollowsKeepAlive(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	c := sAcq(0, s, 1, "a", "S", 0)
	c.TTL = time.Hour // ignored
	l := mustGrant(t, m, c, 1)
	if l.TTL != 5*time.Second || l.Remaining != 5*time.Second {
		t.Fatalf("bound lease %+v, want the session's 5s", *l)
	}
	r := mustOK(t, m, keepAlive(3*sec, s, 0))
	if r.Session == nil || r.Session.Remaining != 5*time.Second || r.Session.Leases != 1 {
		t.Fatalf("keepalive: %+v", r.Session)
	}
	if info := m.Lock("a", 4*sec); info.Lease == nil || info.Lease.Remaining != 4*time.Second {
		t.Fatalf("lock at 4s: %+v, want 4s left (keepalive at 3s + 5s)", info.Lease)
	}
	// A renew with a TTL would change the TTL of every lease of the
	// session behind its client's back: refused, nothing changed.
	if e := errAs[*fence.InvalidError](t, m.Apply(renew(4*sec, "a", 1, 500*time.Millisecond)).Err); e.Field != "ttl" {
		t.Fatalf("renew of a bound lease with a ttl: %+v, want invalid ttl", e)
	}
	if info, _ := m.Session(s, 4*sec); info.TTL != 5*time.Second || info.Remaining != 4*time.Second {
		t.Fatalf("session after the refused renew: %+v, want TTL 5s, 4s left", info)
	}
	r = mustOK(t, m, renew(4*sec, "a", 1, 0))
	if r.Lease == nil || r.Lease.TTL != 5*time.Second || r.Lease.Remaining != 5*time.Second || r.Session == nil || r.Session.TTL != 5*time.Second {
		t.Fatalf("renew of a bound lease: %s session %+v", describe(r), r.Session)
	}
	if at, ok := m.NextDeadline(); !ok || at != 9*sec {
		t.Fatalf("NextDeadline %d, want 9s (the session's new expiry)", at)
	}
	errAs[*fence.BusyError](t, m.Apply(acq(8*sec, "a", "B", time.Minute)).Err)
	mustGrant(t, m, acq(9*sec, "a", "B", time.Minute), 2)
}

func TestSessionRefusals(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	mustGrant(t, m, sAcq(0, s, 1, "a", "S", 0), 1)
	mustOK(t, m, tick(5*sec))
	for _, c := range []Command{
		sAcq(5*sec, s, 2, "b", "S", 0),
		{Op: OpAcquire, Now: 5 * sec, Name: "b", Owner: "S", Session: s},
		{Op: OpAdd, Now: 5 * sec, Name: "n", Token: 1, Delta: 1, Session: s, Seq: 1},
		keepAlive(5*sec, s, 0),
		closeSess(5*sec, s),
		keepAlive(5*sec, 99, 0),
	} {
		if e := errAs[*fence.SessionExpiredError](t, m.Apply(c).Err); e.Session != c.Session {
			t.Fatalf("%+v: session %d", c, e.Session)
		}
	}
	for _, tc := range []struct {
		c     Command
		field string
	}{
		{Command{Op: OpAdd, Name: "n", Token: 1, Delta: 1, Seq: 1}, "seq"},
		{Command{Op: OpTick, Session: 1}, "session"},
		{Command{Op: OpSessionKeepAlive}, "session"},
		{Command{Op: OpAcquire, Name: "x", Owner: "o", TTL: time.Second, RequestID: SessionRequestID(1, 1)}, "request_id"},
	} {
		if e := errAs[*fence.InvalidError](t, m.Apply(tc.c).Err); e.Field != tc.field {
			t.Fatalf("%+v: field %q, want %q", tc.c, e.Field, tc.field)
		}
	}
	s2 := mustOpen(t, m, openSess(5*sec, 5*time.Second))
	c := sAcq(5*sec, s2, 1, "x", "o", time.Second)
	c.RequestID = SessionRequestID(s2, 2) // another seq's id
	if e := errAs[*fence.InvalidError](t, m.Apply(c).Err); e.Field != "request_id" {
		t.Fatalf("another seq's request id: field %q", e.Field)
	}
}

func TestSessionCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxSessions = 2
	m := NewWithConfig(cfg)
	mustOpen(t, m, openSess(0, 5*time.Second))
	mustOpen(t, m, openSess(0, 6*time.Second))
	e := errAs[*fence.ResourceExhaustedError](t, m.Apply(openSess(0, 5*time.Second)).Err)
	if e.Bound != "at most 2" {
		t.Fatalf("bound %q", e.Bound)
	}
	mustOpen(t, m, openSess(5*sec, 5*time.Second)) // the first expired

	// MaxSessions 0 is no cap.
	cfg.MaxSessions = 0
	m = NewWithConfig(cfg)
	for range 3 {
		mustOpen(t, m, openSess(0, 5*time.Second))
	}
}

// TestSessionSnapshotRoundTrip: a state with sessions restores to a
// machine that writes the same bytes and carries on identically.
func TestSessionSnapshotRoundTrip(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, Command{Op: OpSessionOpen, TTL: 5 * time.Second, RequestID: "n"})
	mustGrant(t, m, sAcq(0, s, 1, "a", "S", 0), 1)
	mustGrant(t, m, acq(0, "b", "B", time.Minute), 2)
	mustOK(t, m, sAcq(0, s, 2, "b", "S", time.Minute))
	mustOK(t, m, Command{Op: OpAdd, Name: "n", Token: 2, Delta: 1, Session: s, Seq: 3})
	m.Apply(Command{Op: OpAdd, Name: "n", Token: 1, Delta: 1, Session: s, Seq: 4}) // stale: a saved refusal
	var b1 bytes.Buffer
	if err := m.Snapshot(&b1); err != nil {
		t.Fatal(err)
	}
	m2 := New()
	if err := m2.Restore(bytes.NewReader(b1.Bytes())); err != nil {
		t.Fatal(err)
	}
	var b2 bytes.Buffer
	if _, err := m2.SnapshotView().WriteTo(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatalf("restore then snapshot differs:\n%s\n%s", b1.Bytes(), b2.Bytes())
	}
	for _, c := range []Command{
		{Op: OpAdd, Now: sec, Name: "n", Token: 1, Delta: 1, Session: s, Seq: 4},
		{Op: OpAdd, Now: sec, Name: "n", Token: 2, Delta: 1, Session: s, Seq: 3},
		sAcq(sec, s, 2, "b", "S", time.Minute),
		rel(sec, "b", 2),
		sAcq(sec, s, 2, "b", "S", time.Minute),
		keepAlive(2*sec, s, 0),
		{Op: OpSessionOpen, Now: 2 * sec, TTL: 5 * time.Second, RequestID: "n"},
		tick(7 * sec),
	} {
		r1, r2 := m.Apply(c), m2.Apply(c)
		if describe(r1) != describe(r2) {
			t.Fatalf("%+v: original %s, restored %s", c, describe(r1), describe(r2))
		}
	}
}

// sessionMachine is a machine with a session holding a and waiting on b,
// and saved results.
func sessionMachine(t *testing.T) *Machine {
	t.Helper()
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, Command{Op: OpSessionOpen, TTL: 5 * time.Second, RequestID: "n"})
	mustGrant(t, m, sAcq(0, s, 1, "a", "S", 0), 1)
	mustGrant(t, m, acq(0, "b", "B", time.Minute), 2)
	mustOK(t, m, sAcq(0, s, 2, "b", "S", time.Minute))
	mustOK(t, m, Command{Op: OpAdd, Name: "n", Token: 1, Delta: 1, Session: s, Seq: 3})
	return m
}

func TestRestoreRejectsBadSessions(t *testing.T) {
	good := snapshotBytes(t, sessionMachine(t))
	// edit is good with f applied to its header, the session's record and
	// lock a's record.
	edit := func(f func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock)) []byte {
		h, recs := snapMessages(t, good)
		var s *statepb.Session
		var a *statepb.Lock
		for _, r := range recs {
			if r.GetSession() != nil {
				s = r.GetSession()
			}
			if l := r.GetLock(); l != nil && string(l.Name) == "a" {
				a = l
			}
		}
		if s == nil || a == nil || len(s.Results) != 3 || s.Results[1].Request == nil || s.Results[2].Resource == nil {
			t.Fatalf("sessionMachine's snapshot changed: %v", recs)
		}
		f(h, s, a)
		return encodeSnap(h, recs...)
	}
	for name, in := range map[string][]byte{
		"unknown session":    edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { a.Holder.Session = 2 }),
		"id above counter":   edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { h.SessionCounter = 0 }),
		"lease not listed":   edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { s.Leases = [][]byte{[]byte("b")} }),
		"bound with a ttl":   edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { a.Holder.Ttl = 5 }),
		"saved below floor":  edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { s.Floor = 2 }),
		"saved out of order": edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { s.Results[2].Seq = 1 }),
		"saved queued not live": edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) {
			s.Results[1].Request.Id = []byte("\x00s1.3")
		}),
		"saved in the future": edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) { s.Results[2].At = 1 }),
		"refusal with no member": edit(func(h *statepb.SnapshotHeader, s *statepb.Session, a *statepb.Lock) {
			s.Results[2].Err = &statepb.Refusal{}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(in, good) {
				t.Fatal("the case changes nothing")
			}
			if err := New().Restore(bytes.NewReader(in)); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err %v, want ErrBadSnapshot", err)
			}
		})
	}
	if err := New().Restore(bytes.NewReader(edit(func(*statepb.SnapshotHeader, *statepb.Session, *statepb.Lock) {}))); err != nil {
		t.Fatalf("unedited: %v", err)
	}
}

// TestSnapshotViewIsACopy: a view taken before more commands writes the
// state as it was when taken, while the machine goes on (run with -race:
// the write runs beside the applies).
func TestSnapshotViewIsACopy(t *testing.T) {
	m := sessionMachine(t)
	want := snapshotBytes(t, m)
	v := m.SnapshotView()
	done := make(chan []byte)
	go func() {
		var b bytes.Buffer
		if _, err := v.WriteTo(&b); err != nil {
			t.Error(err)
		}
		done <- b.Bytes()
	}()
	for i := range 200 {
		now := int64(i) * sec / 10
		m.Apply(Command{Op: OpAdd, Now: now, Name: "n", Token: 2, Delta: 1, Session: 1, Seq: uint64(4 + i), Ack: uint64(4 + i)})
		m.Apply(write(now, "n", 2, "x", ""))
		m.Apply(keepAlive(now, 1, 0))
		m.Apply(Command{Op: OpAcquire, Now: now, Name: "c", Owner: "C", TTL: time.Second, Wait: time.Minute, RequestID: "c"})
		m.Apply(tick(now))
	}
	m.Apply(closeSess(20*sec, 1))
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("the view changed with the machine:\n%s\n%s", got, want)
	}
	var again bytes.Buffer
	if _, err := v.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), want) {
		t.Fatalf("a second WriteTo differs (%v)", err)
	}
}

// TestSessionEndDeterministic: a session's locks are ended and handed on by
// lock name whatever order they were taken in, and the same log gives the
// same events and snapshot bytes on every run (map order decides nothing).
func TestSessionEndDeterministic(t *testing.T) {
	names := []string{"m", "c", "x", "a", "q", "b", "z", "k"}
	run := func(order []string) (string, []byte) {
		m := NewWithConfig(DefaultConfig())
		s := mustOpen(t, m, openSess(0, 5*time.Second))
		for i, name := range order {
			mustOK(t, m, sAcq(0, s, uint64(i+1), name, "S", 0))
			mustOK(t, m, waitAcq(0, name, "W", time.Minute, time.Minute, "w-"+name))
		}
		r := mustOK(t, m, tick(5*sec))
		var got string
		for _, e := range r.Events {
			got += e.Lease.Name
		}
		return got, snapshotBytes(t, m)
	}
	want, wantBytes := run(names)
	if want != "abckmqxz" {
		t.Fatalf("hand-on order %q, want by lock name", want)
	}
	for i := range 20 {
		order := append([]string(nil), names...)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		got, b := run(order)
		if got != want {
			t.Fatalf("run %d: order %q, want %q", i, got, want)
		}
		if i%2 == 0 && !bytes.Equal(b, wantBytes) {
			t.Fatalf("run %d: the same log gave other snapshot bytes", i)
		}
	}
}

// TestSessionEndsTogether: two sessions due in the same apply; the lock the
// first one frees is not handed to the second's waiter (its session is
// ending too) but to the next live waiter.
func TestSessionEndsTogether(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	a := mustOpen(t, m, openSess(0, 5*time.Second))
	b := mustOpen(t, m, openSess(0, 5*time.Second))
	mustGrant(t, m, sAcq(0, a, 1, "x", "A", 0), 1)
	mustOK(t, m, sAcq(0, b, 1, "x", "B", time.Minute))
	mustOK(t, m, waitAcq(0, "x", "W", time.Minute, time.Minute, "w"))
	r := mustOK(t, m, tick(5*sec))
	if len(r.Events) != 2 || !errors.Is(r.Events[0].Err, fence.ErrSessionExpired) || r.Events[0].RequestID != SessionRequestID(b, 1) ||
		r.Events[1].RequestID != "w" || r.Events[1].Lease == nil || r.Events[1].Lease.Token != 2 {
		t.Fatalf("both sessions due: %s, want b's waiter ended and the lock (token 2) to w", describe(r))
	}
}

// TestSessionLeaseEnds: a closed session's lease reads as released
// (NotHolder), an expired one's as expired (LeaseExpired).
func TestSessionLeaseEnds(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	a := mustOpen(t, m, openSess(0, 5*time.Second))
	b := mustOpen(t, m, openSess(0, 5*time.Second))
	mustGrant(t, m, sAcq(0, a, 1, "x", "A", 0), 1)
	mustGrant(t, m, sAcq(0, b, 1, "y", "B", 0), 2)
	mustOK(t, m, closeSess(sec, a))
	errAs[*fence.NotHolderError](t, m.Apply(rel(sec, "x", 1)).Err)
	mustOK(t, m, tick(5*sec))
	errAs[*fence.LeaseExpiredError](t, m.Apply(rel(5*sec, "y", 2)).Err)
}

// TestSessionRequestsNotRemembered: session acquires' generated ids take
// no room in the request_id memory and are admitted when it is full.
func TestSessionRequestsNotRemembered(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRequests, cfg.MinIDRetention = 1, time.Minute
	m := NewWithConfig(cfg)
	r := mustOK(t, m, waitAcq(0, "full", "A", time.Second, 0, "only"))
	mustOK(t, m, rel(0, "full", r.Lease.Token))
	errAs[*fence.ResourceExhaustedError](t, m.Apply(waitAcq(0, "other", "A", time.Second, 0, "second")).Err)
	s := mustOpen(t, m, openSess(0, time.Minute))
	for seq := uint64(1); seq <= 3; seq++ {
		l := mustGrant(t, m, sAcq(0, s, seq, "x", "S", 0), fence.Token(seq+1))
		mustOK(t, m, rel(0, "x", l.Token))
	}
	if n := m.requests.len(); n != 1 {
		t.Fatalf("%d request_ids remembered, want 1 (session acquires are not)", n)
	}
}

// TestSessionKeepAliveCutToMaxTTL: once MaxTTL is lowered, a keepalive
// with TTL 0 extends by at most the new MaxTTL.
func TestSessionKeepAliveCutToMaxTTL(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, time.Hour))
	cfg := DefaultConfig()
	cfg.MaxTTL = time.Minute
	mustOK(t, m, Command{Op: OpConfig, Config: cfg})
	if r := mustOK(t, m, keepAlive(sec, s, 0)); r.Session.TTL != time.Minute || r.Session.Remaining != time.Minute {
		t.Fatalf("keepalive after MaxTTL lowered: %+v, want 1m", r.Session)
	}
}

// TestSessionRequestIDOtherSession: a live request_id of one session's
// acquire retried on another session (or none) is a conflict, not a replay.
func TestSessionRequestIDOtherSession(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	a := mustOpen(t, m, openSess(0, time.Minute))
	b := mustOpen(t, m, openSess(0, time.Minute))
	c := Command{Op: OpAcquire, Name: "x", Owner: "S", Session: a, RequestID: "u"}
	mustGrant(t, m, c, 1)
	if r := mustOK(t, m, c); !r.Replayed {
		t.Fatalf("retry on the same session: %s", describe(r))
	}
	c.Session = b
	errAs[*fence.OpConflictError](t, m.Apply(c).Err)
	c.Session, c.TTL = 0, time.Minute
	errAs[*fence.OpConflictError](t, m.Apply(c).Err)
}
