package state

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// withSlack returns c carrying slack s.
func withSlack(c Command, s time.Duration) Command {
	c.Slack = s
	return c
}

// TestSlackDelaysExpiry: with Slack s, a lease granted at t with TTL d is
// still held for every kind of command at t+d+s-1 and expired at t+d+s.
func TestSlackDelaysExpiry(t *testing.T) {
	const (
		ttl   = 5 * time.Second
		slack = 20 * time.Millisecond
		t0    = int64(time.Second) // the grant's time
	)
	end := t0 + int64(ttl) + int64(slack) // first Now at which it expires
	grantA := withSlack(acq(t0, "x", "A", ttl), slack)
	for _, tc := range []struct {
		name    string
		cmd     func(now int64) Command
		held    func(t *testing.T, m *Machine, r Result) // at end-1
		expired func(t *testing.T, m *Machine, r Result) // at end
	}{
		{
			name: "acquire by another",
			cmd:  func(now int64) Command { return acq(now, "x", "B", ttl) },
			held: func(t *testing.T, _ *Machine, r Result) {
				if e := errAs[*fence.BusyError](t, r.Err); e.Token != 1 || e.Remaining != 0 {
					t.Fatalf("%+v: want busy with token 1, Remaining floored at 0", e)
				}
			},
			expired: wantToken(2),
		},
		{
			name: "renew",
			cmd:  func(now int64) Command { return renew(now, "x", 1, 0) },
			held: func(t *testing.T, _ *Machine, r Result) {
				if r.Err != nil || r.Lease.Remaining != ttl {
					t.Fatalf("renew while held: %+v %v", r.Lease, r.Err)
				}
			},
			expired: func(t *testing.T, _ *Machine, r Result) { errAs[*fence.LeaseExpiredError](t, r.Err) },
		},
		{
			name: "release",
			cmd:  func(now int64) Command { return rel(now, "x", 1) },
			held: func(t *testing.T, _ *Machine, r Result) {
				if r.Err != nil {
					t.Fatalf("release while held: %v", r.Err)
				}
			},
			expired: func(t *testing.T, _ *Machine, r Result) { errAs[*fence.LeaseExpiredError](t, r.Err) },
		},
		{
			name: "tick",
			cmd:  tick,
			held: func(t *testing.T, m *Machine, _ Result) {
				if d, ok := m.NextDeadline(); !ok || d != t0+int64(ttl) {
					t.Fatal("tick expired the lease early")
				}
				if r := m.Apply(withSlack(renew(end-1, "x", 1, 0), slack)); r.Err != nil {
					t.Fatalf("renew after the tick: %v", r.Err)
				}
			},
			expired: func(t *testing.T, m *Machine, _ Result) {
				if _, ok := m.NextDeadline(); ok {
					t.Fatal("tick at the deadline left it pending")
				}
				errAs[*fence.LeaseExpiredError](t, m.Apply(renew(end, "x", 1, 0)).Err)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			mustGrant(t, m, grantA, 1)
			if d, ok := m.NextDeadline(); !ok || d != t0+int64(ttl) {
				t.Fatalf("next deadline %d, want %d (decision time: no slack in it)", d, t0+int64(ttl))
			}
			tc.held(t, m, m.Apply(withSlack(tc.cmd(end-1), slack)))

			m = New()
			mustGrant(t, m, grantA, 1)
			tc.expired(t, m, m.Apply(withSlack(tc.cmd(end), slack)))
		})
	}
}

// TestSlackWaiterGrant: a waiter is handed the lock only once the holder's
// lease expired in decision time, and its lease then runs a full TTL from
// the command's Now.
func TestSlackWaiterGrant(t *testing.T) {
	const slack = 300 * time.Millisecond
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
	if r := mustOK(t, m, waitAcq(at(1), "x", "B", 2*time.Second, time.Minute, "rb")); !r.Queued {
		t.Fatal("B not queued")
	}
	if r := m.Apply(withSlack(tick(at(5.3)-1), slack)); len(r.Events) != 0 {
		t.Fatalf("tick 1ns before expiry+slack decided %+v", r.Events)
	}
	r := m.Apply(withSlack(tick(at(5.3)), slack))
	if len(r.Events) != 1 || r.Events[0].Lease == nil || r.Events[0].Lease.Token != 2 || r.Events[0].Lease.Remaining != 2*time.Second {
		t.Fatalf("want B granted token 2 with its full TTL, got %s", describe(r))
	}
	if d, _ := m.NextDeadline(); d != at(7.3) {
		t.Fatalf("B's lease ends at %d, want 7.3s (TTL from the tick's Now)", d)
	}
}

// TestSlackWaitsAndLockDelay: waits running out and lock-delays ending are
// decided in decision time too.
func TestSlackWaitsAndLockDelay(t *testing.T) {
	const slack = time.Second
	m := New()
	mustOK(t, m, Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: 2 * time.Second, LockDelay: 3 * time.Second})
	mustOK(t, m, waitAcq(0, "x", "B", time.Second, time.Second, "rb"))
	if r := m.Apply(withSlack(tick(at(2)-1), slack)); len(r.Events) != 0 {
		t.Fatalf("B's wait (to 1s) ended at decision time 1s-1ns: %s", describe(r))
	}
	if r := m.Apply(withSlack(tick(at(2)), slack)); len(r.Events) != 1 || !errAs[*fence.BusyError](t, r.Events[0].Err).Waited {
		t.Fatalf("want B's wait ended at decision time 1s: %s", describe(r))
	}
	// A's lease ends at 2s, its lock-delay at 5s (decision time).
	if e := errAs[*fence.BusyError](t, m.Apply(withSlack(acq(at(6)-1, "x", "C", time.Second), slack)).Err); !e.Delayed {
		t.Fatalf("%+v: want delayed", e)
	}
	mustGrant(t, m, withSlack(acq(at(6), "x", "C", time.Second), slack), 2)
}

// TestSlackReleaseHandsOn: a release hands the lock to the next waiter in
// the same apply whatever the slack, also to one whose wait ends between
// the decision time and Now.
func TestSlackReleaseHandsOn(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 10*time.Second), 1)
	mustOK(t, m, waitAcq(0, "x", "B", time.Second, 2*time.Second, "rb"))
	r := mustOK(t, m, withSlack(rel(at(2.5), "x", 1), time.Second))
	if len(r.Events) != 1 || r.Events[0].Lease == nil || r.Events[0].Lease.Token != 2 {
		t.Fatalf("want B granted in the release's apply: %s", describe(r))
	}
}

// TestSlackDecisionTimeMonotonic: a command with a larger slack never
// decides at an earlier time than one before it did.
func TestSlackDecisionTimeMonotonic(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
	mustOK(t, m, write(at(6), "s", 1, "v", "")) // decision time 6s
	r := m.Apply(withSlack(renew(at(6), "x", 1, 0), 5*time.Second))
	errAs[*fence.LeaseExpiredError](t, r.Err)
}

// TestSlackReplayHeldRemaining: a request_id replay of a lease still held in
// decision time but past its end as of Now reports Remaining 0, not less.
func TestSlackReplayHeldRemaining(t *testing.T) {
	m := New()
	c := Command{Op: OpAcquire, Name: "x", Owner: "A", TTL: time.Second, RequestID: "r"}
	mustGrant(t, m, c, 1)
	c.Now, c.Slack = at(1.5), time.Second
	r := m.Apply(c)
	if !r.Replayed || r.Lease == nil || r.Lease.Token != 1 || r.Lease.Remaining != 0 {
		t.Fatalf("want the held lease replayed with Remaining 0: %s", describe(r))
	}
}

func TestSlackRefusesNegative(t *testing.T) {
	m := New()
	r := m.Apply(Command{Op: OpTick, Now: 5, Slack: -1})
	if e := errAs[*fence.InvalidError](t, r.Err); e.Field != "slack" {
		t.Fatalf("%+v: want the field named", e)
	}
	if m.MaxSlack() != 0 {
		t.Fatal("a refused slack was recorded")
	}
}

// TestSlackSnapshot: the decision time and MaxSlack survive a snapshot.
func TestSlackSnapshot(t *testing.T) {
	m := New()
	mustGrant(t, m, acq(0, "x", "A", 5*time.Second), 1)
	mustOK(t, m, withSlack(write(at(6), "s", 1, "v", ""), 40*time.Millisecond)) // decision time 6s-40ms
	mustOK(t, m, withSlack(tick(at(1)), 7*time.Millisecond))
	if m.MaxSlack() != 40*time.Millisecond {
		t.Fatalf("MaxSlack %v, want 40ms", m.MaxSlack())
	}
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(bytes.NewReader(b.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r.MaxSlack() != m.MaxSlack() {
		t.Fatalf("MaxSlack %v after restore, want %v", r.MaxSlack(), m.MaxSlack())
	}
	// A renew whose own Now-Slack is before the lease's end still finds it
	// expired: the restored decision time (6s-40ms) is kept.
	errAs[*fence.LeaseExpiredError](t, r.Apply(withSlack(renew(at(6), "x", 1, 0), 2*time.Second)).Err)

	cfg := DefaultConfig()
	for name, h := range map[string]*statepb.SnapshotHeader{
		"decided above now":  {Format: snapshotFormat, Now: 5, Decided: 6, Config: configPB(cfg)},
		"negative decided":   {Format: snapshotFormat, Now: 5, Decided: -1, Config: configPB(cfg)},
		"negative max_slack": {Format: snapshotFormat, Now: 5, Decided: 1, MaxSlack: -1, Config: configPB(cfg)},
	} {
		if err := New().Restore(bytes.NewReader(encodeSnap(h))); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v, want ErrBadSnapshot", name, err)
		}
		h.Decided, h.MaxSlack = 1, 0
		if err := New().Restore(bytes.NewReader(encodeSnap(h))); err != nil {
			t.Errorf("%s, corrected: %v", name, err)
		}
	}
}
