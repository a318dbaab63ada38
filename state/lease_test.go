package state

import (
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestRenewRelease(t *testing.T) {
	const ttl = 5 * time.Second
	held := []Command{acq(0, "x", "A", ttl)}
	expired := []Command{acq(0, "x", "A", ttl), tick(at(5))}
	released := []Command{acq(0, "x", "A", ttl), rel(at(1), "x", 1)}
	taken := []Command{acq(0, "x", "A", ttl), acq(at(6), "x", "B", ttl)}
	other := []Command{acq(0, "x", "A", ttl), acq(0, "y", "B", ttl)}

	leaseExpired := func(tok fence.Token) func(*testing.T, *Machine, Result) {
		return func(t *testing.T, _ *Machine, r Result) {
			e := errAs[*fence.LeaseExpiredError](t, r.Err)
			if e.Name != "x" || e.Token != tok {
				t.Fatalf("%+v", e)
			}
		}
	}
	stale := func(tok, last fence.Token) func(*testing.T, *Machine, Result) {
		return func(t *testing.T, _ *Machine, r Result) {
			e := errAs[*fence.StaleTokenError](t, r.Err)
			if e.Resource != "x" || e.Token != tok || e.LastAccepted != last {
				t.Fatalf("%+v", e)
			}
		}
	}
	notHolder := func(tok fence.Token) func(*testing.T, *Machine, Result) {
		return func(t *testing.T, _ *Machine, r Result) {
			e := errAs[*fence.NotHolderError](t, r.Err)
			if e.Name != "x" || e.Token != tok {
				t.Fatalf("%+v", e)
			}
		}
	}
	unknown := func(tok, last fence.Token) func(*testing.T, *Machine, Result) {
		return func(t *testing.T, _ *Machine, r Result) {
			e := errAs[*fence.UnknownTokenError](t, r.Err)
			if e.Token != tok || e.LastIssued != last {
				t.Fatalf("%+v", e)
			}
		}
	}

	var cases []scenario
	for _, op := range []struct {
		name string
		cmd  func(now int64, tok fence.Token) Command
	}{
		{"renew", func(now int64, tok fence.Token) Command { return renew(now, "x", tok, 0) }},
		{"release", func(now int64, tok fence.Token) Command { return rel(now, "x", tok) }},
	} {
		cases = append(cases,
			scenario{name: op.name + " of a lease expired by tick", setup: expired, cmd: op.cmd(at(5), 1), check: leaseExpired(1)},
			scenario{name: op.name + " of a lease expired lazily", setup: held, cmd: op.cmd(at(5), 1), check: leaseExpired(1)},
			scenario{name: op.name + " after release", setup: released, cmd: op.cmd(at(2), 1), check: notHolder(1)},
			scenario{name: op.name + " with a token older than the lock's last grant", setup: taken, cmd: op.cmd(at(7), 1), check: stale(1, 2)},
			scenario{name: op.name + " with a never-issued token", setup: held, cmd: op.cmd(at(1), 9), check: unknown(9, 1)},
			scenario{name: op.name + " of a lock never seen", setup: held, cmd: Command{Op: map[string]Op{"renew": OpRenew, "release": OpRelease}[op.name], Name: "x", Token: 1, Now: 0}, check: func(t *testing.T, m *Machine, r Result) {
				if r.Err != nil {
					t.Fatalf("the holder's own %s failed: %v", op.name, r.Err)
				}
			}},
			scenario{name: op.name + " with another lock's newer token", setup: other, cmd: op.cmd(at(1), 2), check: notHolder(2)},
		)
	}
	cases = append(cases,
		scenario{name: "renew extends from now", setup: held, cmd: renew(at(4), "x", 1, 0), check: func(t *testing.T, m *Machine, r Result) {
			if r.Err != nil || r.Lease.Remaining != ttl || r.Lease.TTL != ttl {
				t.Fatalf("%+v %v", r.Lease, r.Err)
			}
			if m.Lock("x", at(8.5)).Lease == nil {
				t.Fatal("renewed lease expired early")
			}
			if d, _ := m.NextDeadline(); d != at(9) {
				t.Fatalf("next deadline %d, want 9s", d)
			}
		}},
		scenario{name: "renew with a new ttl keeps it", setup: held, cmd: renew(at(1), "x", 1, 10*time.Second), check: func(t *testing.T, m *Machine, r Result) {
			if r.Err != nil || r.Lease.TTL != 10*time.Second {
				t.Fatalf("%+v %v", r.Lease, r.Err)
			}
			r = m.Apply(renew(at(2), "x", 1, 0))
			if r.Lease.TTL != 10*time.Second || r.Lease.Remaining != 10*time.Second {
				t.Fatalf("ttl 0 did not reuse the lease's ttl: %+v", r.Lease)
			}
		}},
		scenario{name: "a lock never seen is NotHolder", setup: held, cmd: rel(0, "nope", 1), check: func(t *testing.T, _ *Machine, r Result) {
			errAs[*fence.NotHolderError](t, r.Err)
		}},
		scenario{name: "release of a lease expired by lock-delay still refuses and keeps the delay", setup: []Command{
			{Op: OpAcquire, Name: "x", Owner: "A", TTL: ttl, LockDelay: time.Minute}},
			cmd: rel(at(6), "x", 1), check: func(t *testing.T, m *Machine, r Result) {
				leaseExpired(1)(t, m, r)
				if m.Lock("x", at(6)).LockDelayRemaining != 59*time.Second {
					t.Fatal("delay lost")
				}
			}},
	)
	runScenarios(t, cases)
}
