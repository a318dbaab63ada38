package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// scenario: apply setup (each must not fail), then cmd, then check.
type scenario struct {
	name  string
	cfg   Config
	setup []Command
	cmd   Command
	check func(t *testing.T, m *Machine, r Result)
}

func runScenarios(t *testing.T, cases []scenario) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewWithConfig(tc.cfg)
			for _, c := range tc.setup {
				if r := m.Apply(c); r.Err != nil {
					t.Fatalf("setup %+v: %v", c, r.Err)
				}
			}
			tc.check(t, m, m.Apply(tc.cmd))
		})
	}
}

func wantToken(want fence.Token) func(*testing.T, *Machine, Result) {
	return func(t *testing.T, _ *Machine, r Result) {
		t.Helper()
		if r.Err != nil || r.Lease == nil || r.Lease.Token != want {
			t.Fatalf("want grant of token %d, got lease=%+v err=%v", want, r.Lease, r.Err)
		}
	}
}

func wantBusy(holder string, tok fence.Token, remaining time.Duration, delayed bool) func(*testing.T, *Machine, Result) {
	return func(t *testing.T, _ *Machine, r Result) {
		t.Helper()
		b := errAs[*fence.BusyError](t, r.Err)
		if b.Holder != holder || b.Token != tok || b.Remaining != remaining || b.Delayed != delayed || b.Waited {
			t.Fatalf("busy %+v, want holder %q token %d remaining %s delayed %v", b, holder, tok, remaining, delayed)
		}
	}
}

func TestAcquire(t *testing.T) {
	const ttl = 5 * time.Second
	runScenarios(t, []scenario{
		{name: "free lock gets token 1", cmd: acq(0, "x", "A", ttl), check: func(t *testing.T, _ *Machine, r Result) {
			wantToken(1)(t, nil, r)
			if r.Lease.Name != "x" || r.Lease.Owner != "A" || r.Lease.TTL != ttl || r.Lease.Remaining != ttl {
				t.Fatalf("lease %+v", r.Lease)
			}
		}},
		{name: "counter is shared by all locks", setup: []Command{acq(0, "x", "A", ttl), acq(0, "y", "A", ttl)},
			cmd: acq(0, "z", "B", ttl), check: wantToken(3)},
		{name: "held lock is busy with holder and remaining", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: acq(at(1.5), "x", "B", ttl), check: wantBusy("A", 1, 3500*time.Millisecond, false)},
		{name: "the holder itself is busy too (no reentrancy)", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: acq(at(1), "x", "A", ttl), check: wantBusy("A", 1, 4*time.Second, false)},
		{name: "expired lease is taken lazily without a tick", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: acq(at(5), "x", "B", ttl), check: wantToken(2)},
		{name: "one nanosecond before expiry is still busy", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: acq(at(5)-1, "x", "B", ttl), check: wantBusy("A", 1, 1, false)},
		{name: "released lock is free at once", setup: []Command{acq(0, "x", "A", ttl), rel(at(1), "x", 1)},
			cmd: acq(at(1), "x", "B", ttl), check: wantToken(2)},
		{name: "lock-delay after expiry refuses try-acquire", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, LockDelay: 2 * time.Second}},
			cmd: acq(at(6), "x", "B", ttl), check: wantBusy("", 0, time.Second, true)},
		{name: "lock-delay counts from expiry, not from when it is noticed", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, LockDelay: 2 * time.Second}},
			cmd: acq(at(7), "x", "B", ttl), check: wantToken(2)},
		{name: "no lock-delay after release", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, LockDelay: 2 * time.Second}, rel(at(1), "x", 1)},
			cmd: acq(at(1), "x", "B", ttl), check: wantToken(2)},
		{name: "wait queues", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: waitAcq(at(1), "x", "B", ttl, 10*time.Second, "rb"), check: func(t *testing.T, m *Machine, r Result) {
				if r.Err != nil || !r.Queued || r.Lease != nil {
					t.Fatalf("want queued, got %+v", r)
				}
				if w := m.Lock("x", at(1)).Waiters; w != 1 {
					t.Fatalf("waiters %d", w)
				}
			}},
		{name: "wait on a free lock is granted at once", cmd: waitAcq(0, "x", "B", ttl, time.Second, "rb"), check: wantToken(1)},
		{name: "try-acquire never jumps the queue", setup: []Command{
			acq(0, "x", "A", ttl), waitAcq(0, "x", "B", ttl, time.Minute, "rb")},
			cmd: acq(at(1), "x", "C", ttl), check: wantBusy("A", 1, 4*time.Second, false)},
		{name: "retried request_id while held returns the same lease", setup: []Command{
			waitAcq(0, "x", "A", ttl, time.Second, "ra")},
			cmd: waitAcq(at(2), "x", "A", ttl, time.Second, "ra"), check: func(t *testing.T, m *Machine, r Result) {
				wantToken(1)(t, m, r)
				if !r.Replayed || r.Lease.Remaining != 3*time.Second || m.LastToken() != 1 {
					t.Fatalf("replay %+v lease %+v last %d", r, r.Lease, m.LastToken())
				}
			}},
		{name: "retried request_id after expiry is LeaseExpired, not a second grant", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, RequestID: "ra"}},
			cmd: Command{Op: OpAcquire, Now: at(9), Name: "x", Owner: "A", TTL: ttl, RequestID: "ra"}, check: func(t *testing.T, m *Machine, r Result) {
				e := errAs[*fence.LeaseExpiredError](t, r.Err)
				if e.Token != 1 || e.Name != "x" || !r.Replayed || m.LastToken() != 1 {
					t.Fatalf("%+v last %d", e, m.LastToken())
				}
			}},
		{name: "retried request_id after release is NotHolder", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, RequestID: "ra"}, rel(at(1), "x", 1)},
			cmd: Command{Op: OpAcquire, Now: at(2), Name: "x", Owner: "A", TTL: ttl, RequestID: "ra"}, check: func(t *testing.T, m *Machine, r Result) {
				e := errAs[*fence.NotHolderError](t, r.Err)
				if e.Token != 1 || m.LastToken() != 1 {
					t.Fatalf("%+v", e)
				}
			}},
		{name: "retried request_id while queued is queued once", setup: []Command{
			acq(0, "x", "A", ttl), waitAcq(0, "x", "B", ttl, time.Minute, "rb")},
			cmd: waitAcq(at(1), "x", "B", ttl, 59*time.Second, "rb"), check: func(t *testing.T, m *Machine, r Result) {
				if !r.Queued || !r.Replayed || m.Lock("x", at(1)).Waiters != 1 {
					t.Fatalf("%+v waiters %d", r, m.Lock("x", at(1)).Waiters)
				}
			}},
		// Nothing was granted under rb: a retry after its wait ran out is a
		// new request answered with the lock as it is now (queued again
		// while A holds it; granted once A is gone), never the old BUSY
		// replayed with a holder who may have left.
		{name: "retried request_id after the wait ran out queues again", setup: []Command{
			acq(0, "x", "A", ttl), waitAcq(0, "x", "B", ttl, time.Second, "rb"), tick(at(1))},
			cmd: waitAcq(at(2), "x", "B", ttl, time.Second, "rb"), check: func(t *testing.T, m *Machine, r Result) {
				if r.Err != nil || !r.Queued || r.Replayed || m.Lock("x", at(2)).Waiters != 1 {
					t.Fatalf("%+v waiters %d, want queued anew", r, m.Lock("x", at(2)).Waiters)
				}
			}},
		{name: "retried request_id after the wait ran out is granted once the lock is free", setup: []Command{
			acq(0, "x", "A", ttl), waitAcq(0, "x", "B", ttl, time.Second, "rb"), tick(at(1)), rel(at(1.5), "x", 1)},
			cmd: waitAcq(at(2), "x", "B", ttl, time.Second, "rb"), check: func(t *testing.T, m *Machine, r Result) {
				wantToken(2)(t, m, r)
				again := m.Apply(waitAcq(at(3), "x", "B", ttl, time.Second, "rb"))
				if again.Lease == nil || again.Lease.Token != 2 || !again.Replayed {
					t.Fatalf("retry of the granted rb = %+v, want the same lease (token 2), replayed", again)
				}
			}},
		{name: "request_id with another owner conflicts", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, RequestID: "r"}},
			cmd: Command{Op: OpAcquire, Name: "x", Owner: "B", TTL: ttl, RequestID: "r"}, check: wantConflict("request_id", "r")},
		{name: "request_id with another name conflicts", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, RequestID: "r"}},
			cmd: Command{Op: OpAcquire, Name: "y", Owner: "A", TTL: ttl, RequestID: "r"}, check: wantConflict("request_id", "r")},
		{name: "request_id with another ttl conflicts", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, RequestID: "r"}},
			cmd: Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: 2 * ttl, RequestID: "r"}, check: wantConflict("request_id", "r")},
		{name: "a busy try-acquire is not remembered", setup: []Command{acq(0, "x", "A", ttl)},
			cmd: Command{Op: OpAcquire, Name: "x", Owner: "B", TTL: ttl, RequestID: "rb"}, check: func(t *testing.T, m *Machine, r Result) {
				wantBusy("A", 1, ttl, false)(t, m, r)
				retry := m.Apply(Command{Op: OpAcquire, Now: at(5), Name: "x", Owner: "B", TTL: ttl, RequestID: "rb"})
				wantToken(2)(t, m, retry)
				if retry.Replayed {
					t.Fatal("a fresh grant reported as replayed")
				}
			}},
	})
}

func wantConflict(field, id string) func(*testing.T, *Machine, Result) {
	return func(t *testing.T, _ *Machine, r Result) {
		t.Helper()
		e := errAs[*fence.OpConflictError](t, r.Err)
		if e.Field != field || e.ID != id {
			t.Fatalf("%+v, want field %s id %s", e, field, id)
		}
	}
}
