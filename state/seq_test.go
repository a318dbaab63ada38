package state

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

func sAdd(now int64, sess, seq, ack uint64, tok fence.Token, d int64) Command {
	return Command{Op: OpAdd, Now: now, Name: "n", Token: tok, Delta: d, Session: sess, Seq: seq, Ack: ack}
}

// sequencedLog opens a session, takes a lock with it and adds under seq,
// with retries of every seq.
func sequencedLog() []Command {
	log := []Command{
		openSess(0, 10*time.Second),
		sAcq(0, 1, 1, "a", "S", 0),
		sAcq(0, 1, 1, "a", "S", 0), // retry
		sAdd(sec, 1, 2, 1, 1, 5),
		sAdd(sec, 1, 2, 1, 1, 5), // retry
		sAdd(2*sec, 1, 3, 2, 1, 7),
		sAdd(2*sec, 1, 2, 2, 1, 5), // retry, not acknowledged yet
		{Op: OpWrite, Now: 3 * sec, Name: "w", Token: 1, Value: []byte("v"), Session: 1, Seq: 4, Ack: 3},
		{Op: OpWrite, Now: 3 * sec, Name: "w", Token: 1, Value: []byte("v"), Session: 1, Seq: 4, Ack: 3},
		{Op: OpRenew, Now: 4 * sec, Name: "a", Token: 1, Session: 1, Seq: 5, Ack: 4},
		{Op: OpRenew, Now: 5 * sec, Name: "a", Token: 1, Session: 1, Seq: 5, Ack: 4},
		acq(5*sec, "b", "B", time.Minute),
		sAcq(5*sec, 1, 6, "b", "S", time.Minute),
		sAcq(5*sec, 1, 6, "b", "S", time.Minute),
		{Op: OpSessionKeepAlive, Now: 6 * sec, Session: 1, Seq: 7, Ack: 5},
		rel(6*sec, "b", 2),
		sAcq(6*sec, 1, 6, "b", "S", time.Minute), // retried after the grant: the lease
		{Op: OpRelease, Now: 7 * sec, Name: "a", Token: 1, Session: 1, Seq: 8, Ack: 7},
		{Op: OpRelease, Now: 7 * sec, Name: "a", Token: 1, Session: 1, Seq: 8, Ack: 7},
		tick(8 * sec),
		sAdd(8*sec, 1, 3, 3, 1, 7), // below the floor (7): refused, not applied again
	}
	return log
}

// TestSeqRetryAppliedOnce: a retried seq gets the saved result (Replayed)
// and applies nothing: the add is applied once, and a retried acquire gets
// the lease it was granted, or the request's current outcome.
func TestSeqRetryAppliedOnce(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	var res []Result
	for _, c := range sequencedLog() {
		res = append(res, m.Apply(c))
	}
	if got := m.Resource("n"); string(got.Value) != "12" || got.Version != 2 {
		t.Fatalf("n = %q version %d, want 12 after two adds applied once each", got.Value, got.Version)
	}
	if m.LastToken() != 3 {
		t.Fatalf("last token %d, want 3 (a, b, and b for the session)", m.LastToken())
	}
	check := func(i int, replayed bool) Result {
		t.Helper()
		if res[i].Replayed != replayed {
			t.Fatalf("step %d: %s, want replayed %v", i, describe(res[i]), replayed)
		}
		return res[i]
	}
	first, retry := check(1, false), check(2, true)
	if retry.Lease == nil || retry.Lease.Token != first.Lease.Token {
		t.Fatalf("retried acquire: %s, want the lease %d", describe(retry), first.Lease.Token)
	}
	if a, b := check(3, false), check(4, true); b.AddValue != 5 || a.AddValue != 5 || b.Resource.Version != 1 {
		t.Fatalf("retried add: %s / %s", describe(a), describe(b))
	}
	if r := check(6, true); r.AddValue != 5 {
		t.Fatalf("retry of seq 2 after seq 3: %s", describe(r))
	}
	if r := check(8, true); string(r.Resource.Value) != "v" || r.Resource.Version != 1 {
		t.Fatalf("retried write: %s", describe(r))
	}
	if a, b := check(9, false), check(10, true); b.Lease.Token != a.Lease.Token || b.Lease.Remaining != a.Lease.Remaining-time.Second ||
		b.Session == nil || b.Session.Remaining != a.Session.Remaining-time.Second {
		t.Fatalf("retried renew 1s later gets the saved lease, 1s less left: %s / %s", describe(a), describe(b))
	}
	if r := check(13, true); !r.Queued || r.Attempt != 2 {
		t.Fatalf("retried queued acquire: %s, want queued, a new attempt", describe(r))
	}
	if r := check(16, true); r.Lease == nil || r.Lease.Token != 3 || r.Lease.Owner != "S" {
		t.Fatalf("retried acquire granted since: %s, want the lease 3", describe(r))
	}
	if r := check(18, true); r.Err != nil {
		t.Fatalf("retried release: %s", describe(r))
	}
	if e := errAs[*fence.InvalidError](t, res[20].Err); e.Field != "seq" {
		t.Fatalf("retry below the floor: %+v", e)
	}
}

// TestSeqAcrossSnapshotAndReplay: the same log replayed on a fresh machine,
// or restored from a snapshot taken at any step and carried on, gives the
// same results and the same snapshot bytes (and restore then snapshot
// writes the bytes it read).
func TestSeqAcrossSnapshotAndReplay(t *testing.T) {
	log := sequencedLog()
	run := func(m *Machine, cmds []Command) []string {
		var out []string
		for _, c := range cmds {
			out = append(out, describe(m.Apply(c)))
		}
		return out
	}
	snap := func(m *Machine) []byte {
		var b bytes.Buffer
		if err := m.Snapshot(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	ref := NewWithConfig(DefaultConfig())
	want := run(ref, log)
	wantBytes := snap(ref)
	again := NewWithConfig(DefaultConfig())
	if got := run(again, log); !equalStrings(got, want) || !bytes.Equal(snap(again), wantBytes) {
		t.Fatalf("replay differs")
	}
	for cut := range len(log) + 1 {
		m := NewWithConfig(DefaultConfig())
		got := run(m, log[:cut])
		b := snap(m)
		r := New()
		if err := r.Restore(bytes.NewReader(b)); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !bytes.Equal(snap(r), b) {
			t.Fatalf("cut %d: restore then snapshot differs", cut)
		}
		got = append(got, run(r, log[cut:])...)
		if !equalStrings(got, want) {
			t.Fatalf("cut %d: results differ:\n%v\n%v", cut, got, want)
		}
		if !bytes.Equal(snap(r), wantBytes) {
			t.Fatalf("cut %d: final snapshot differs", cut)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSeqAckFloor: an ack drops the saved results below it and a seq below
// the floor is refused; ack above seq is refused.
func TestSeqAckFloor(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, time.Minute))
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	for seq := uint64(1); seq <= 5; seq++ {
		mustOK(t, m, sAdd(0, s, seq, 1, 1, 1))
	}
	if n := len(m.sessions[s].results); n != 5 {
		t.Fatalf("%d saved results, want 5", n)
	}
	mustOK(t, m, sAdd(0, s, 6, 4, 1, 1))
	if n := len(m.sessions[s].results); n != 3 {
		t.Fatalf("%d saved results after ack 4, want 3 (seq 4, 5, 6)", n)
	}
	e := errAs[*fence.InvalidError](t, m.Apply(sAdd(0, s, 3, 3, 1, 1)).Err)
	if e.Field != "seq" || e.Bound != ">= 4 (already acknowledged)" {
		t.Fatalf("seq below the floor: %+v", e)
	}
	if r := mustOK(t, m, sAdd(0, s, 4, 4, 1, 1)); !r.Replayed || r.AddValue != 4 {
		t.Fatalf("seq 4 at the floor: %s, want its saved result", describe(r))
	}
	if e := errAs[*fence.InvalidError](t, m.Apply(sAdd(0, s, 7, 8, 1, 1)).Err); e.Field != "ack" {
		t.Fatalf("ack above seq: %+v", e)
	}
	// An ack without a seq (a keepalive) drops them too.
	mustOK(t, m, Command{Op: OpSessionKeepAlive, Session: s, Ack: 7})
	if n := len(m.sessions[s].results); n != 0 {
		t.Fatalf("%d saved results after ack 7, want 0", n)
	}
	if got := m.Resource("n"); string(got.Value) != "6" {
		t.Fatalf("n = %q, want 6", got.Value)
	}
}

// TestSeqMaxSessionResults: beyond MaxSessionResults unacknowledged results
// a new seq is refused (and not applied); an ack makes room.
func TestSeqMaxSessionResults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxSessionResults = 3
	m := NewWithConfig(cfg)
	s := mustOpen(t, m, openSess(0, time.Minute))
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	for seq := uint64(1); seq <= 3; seq++ {
		mustOK(t, m, sAdd(0, s, seq, 1, 1, 1))
	}
	e := errAs[*fence.ResourceExhaustedError](t, m.Apply(sAdd(0, s, 4, 1, 1, 1)).Err)
	if e.Limit != "saved results on session "+strconv.FormatUint(s, 10)+" (config.max_session_results)" || e.Bound != "at most 3" || e.Got != "3" {
		t.Fatalf("cap: %+v", e)
	}
	if r := mustOK(t, m, sAdd(0, s, 2, 1, 1, 1)); !r.Replayed {
		t.Fatalf("a retry at the cap is answered: %s", describe(r))
	}
	if got := m.Resource("n"); string(got.Value) != "3" {
		t.Fatalf("n = %q, want 3 (the refused add not applied)", got.Value)
	}
	mustOK(t, m, sAdd(0, s, 4, 2, 1, 1))
	if got := m.Resource("n"); string(got.Value) != "4" {
		t.Fatalf("n = %q, want 4", got.Value)
	}
}

// TestSeqEndedSession: a retry on a closed or expired session gets
// SESSION_EXPIRED (its saved results went with it).
func TestSeqEndedSession(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, 5*time.Second))
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	mustOK(t, m, sAdd(0, s, 1, 1, 1, 1))
	mustOK(t, m, Command{Op: OpSessionClose, Session: s, Seq: 2, Ack: 1})
	errAs[*fence.SessionExpiredError](t, m.Apply(sAdd(0, s, 1, 1, 1, 1)).Err)
	errAs[*fence.SessionExpiredError](t, m.Apply(Command{Op: OpSessionClose, Session: s, Seq: 2, Ack: 1}).Err)
	s2 := mustOpen(t, m, openSess(sec, 5*time.Second))
	mustOK(t, m, sAdd(sec, s2, 1, 1, 1, 1))
	errAs[*fence.SessionExpiredError](t, m.Apply(sAdd(6*sec, s2, 1, 1, 1, 1)).Err)
	if got := m.Resource("n"); string(got.Value) != "2" {
		t.Fatalf("n = %q, want 2", got.Value)
	}
}

// TestSeqConflict: a retried seq with another operation or payload is a
// conflict, not a replay.
func TestSeqConflict(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	s := mustOpen(t, m, openSess(0, time.Minute))
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	mustOK(t, m, sAdd(0, s, 1, 1, 1, 1))
	if e := errAs[*fence.OpConflictError](t, m.Apply(sAdd(0, s, 1, 1, 1, 2)).Err); e.Field != "seq" || e.ID != "1" {
		t.Fatalf("%+v", e)
	}
	errAs[*fence.OpConflictError](t, m.Apply(Command{Op: OpWrite, Name: "n", Token: 1, Value: []byte("x"), Session: s, Seq: 1}).Err)
	// Every field a retry repeats counts: an op_id added, another owner
	// or lock-delay, a renew's ttl (the second renew was answered with the
	// first one's lease, as if renewed with the ttl it asked for).
	withOpID := sAdd(0, s, 1, 1, 1, 1)
	withOpID.OpID = "x"
	errAs[*fence.OpConflictError](t, m.Apply(withOpID).Err)
	standalone := mustGrant(t, m, acq(0, "r", "A", time.Minute), 2)
	r1 := renew(0, "r", standalone.Token, 0)
	r1.Session, r1.Seq, r1.Ack = s, 2, 1
	mustOK(t, m, r1)
	r2 := r1
	r2.TTL = 50 * time.Second
	errAs[*fence.OpConflictError](t, m.Apply(r2).Err)
	a1 := sAcq(0, s, 3, "q", "S", 0)
	mustOK(t, m, a1)
	for _, change := range []func(*Command){
		func(c *Command) { c.Owner = "T" },
		func(c *Command) { c.LockDelay = time.Second },
	} {
		a2 := a1
		change(&a2)
		errAs[*fence.OpConflictError](t, m.Apply(a2).Err)
	}
	if r := mustOK(t, m, a1); !r.Replayed || r.Lease == nil {
		t.Fatalf("the same acquire retried: %s, want the replayed lease", describe(r))
	}
	if got := m.Resource("n"); string(got.Value) != "1" {
		t.Fatalf("n = %q, want 1", got.Value)
	}
}

// TestSeqCancelledWaitRetried: a sequenced acquire whose wait was
// cancelled (its client went away) is a new request when its seq is
// retried, not a replay of a wait that is gone.
func TestSeqCancelledWaitRetried(t *testing.T) {
	m := NewWithConfig(DefaultConfig())
	mustGrant(t, m, acq(0, "a", "A", time.Minute), 1)
	s := mustOpen(t, m, openSess(0, time.Minute))
	r := mustOK(t, m, sAcq(0, s, 1, "a", "S", time.Minute))
	mustOK(t, m, Command{Op: OpCancelWait, Name: "a", RequestID: SessionRequestID(s, 1), Attempt: r.Attempt})
	if m.Waiting() != 0 || len(m.sessions[s].waiters) != 0 {
		t.Fatalf("cancel left a waiter (session lists %d)", len(m.sessions[s].waiters))
	}
	r = mustOK(t, m, sAcq(sec, s, 1, "a", "S", time.Minute))
	if !r.Queued || r.Replayed || m.Waiting() != 1 {
		t.Fatalf("retry after the cancel: %s (waiting %d), want queued anew", describe(r), m.Waiting())
	}
	r = mustOK(t, m, rel(sec, "a", 1))
	if len(r.Events) != 1 || r.Events[0].Lease == nil || r.Events[0].RequestID != SessionRequestID(s, 1) {
		t.Fatalf("release: %s, want the grant to the session's retried wait", describe(r))
	}
}

// TestSnapshotErrorTypes: every refusal a saved result holds survives a
// snapshot with its type and fields.
func TestSnapshotErrorTypes(t *testing.T) {
	for _, err := range []error{
		&fence.BusyError{Name: "n", Holder: "h\xff", Token: 1 << 60, Remaining: time.Second, Delayed: true, Waited: true},
		&fence.StaleTokenError{Resource: "r", Token: 2, LastAccepted: 3},
		&fence.NotHolderError{Name: "n", Token: 1},
		&fence.LeaseExpiredError{Name: "n", Token: 1},
		&fence.UnknownTokenError{Token: 9, LastIssued: 1<<64 - 1},
		&fence.OpConflictError{Field: "seq", ID: "\x00\xfe"},
		&fence.InvalidError{Field: "ttl", Bound: "at least 1s", Value: "0s"},
		&fence.ResourceExhaustedError{Limit: "l", Bound: "b", Got: "g"},
		&fence.SessionExpiredError{Session: 7},
	} {
		got, bad := refusalError(snapErrorOf(err))
		if bad != nil || describe(Result{Err: got}) != describe(Result{Err: err}) || fence.ReasonOf(got) != fence.ReasonOf(err) {
			t.Fatalf("%#v came back as %#v (%v)", err, got, bad)
		}
		if g, ok := got.(interface{ Error() string }); !ok || g.Error() != err.Error() {
			t.Fatalf("%#v: message differs", err)
		}
	}
	if _, err := refusalError(&statepb.Refusal{}); err == nil {
		t.Fatal("a refusal record with no member decoded")
	}
}
