package state

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func hashOf(secret string) []byte { h := sha256.Sum256([]byte(secret)); return h[:] }

// snapBytes is m's snapshot: equal bytes are equal states.
func snapBytes(t *testing.T, m *Machine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// denied applies c and fails unless it is refused with PERMISSION_DENIED
// naming what, and changes nothing but server time.
func denied(t *testing.T, m *Machine, c Command, what string) {
	t.Helper()
	m.Apply(Command{Op: OpTick, Now: c.Now}) // settle time first: only c may change the state
	before := snapBytes(t, m)
	r := m.Apply(c)
	var pd *fence.PermissionDeniedError
	if !errors.As(r.Err, &pd) || pd.What != what || pd.Principal != c.Principal {
		t.Fatalf("%+v: got %v, want PERMISSION_DENIED on %s", c, r.Err, what)
	}
	if fence.ReasonOf(r.Err) != fence.ReasonPermissionDenied {
		t.Fatalf("reason %q", fence.ReasonOf(r.Err))
	}
	if !bytes.Equal(before, snapBytes(t, m)) {
		t.Fatalf("%+v: a refused command changed the state", c)
	}
}

// authLog is a store where principal A holds a lease, a session with a
// bound lease and a queued request_id, made through the auth commands.
func authLog() []Command {
	return []Command{
		{Op: OpAuthBootstrap, Now: 1, Name: "root", Value: hashOf("s0")},
		{Op: OpRoleGrant, Now: 2, Name: "app", Perms: []Permission{{PermLock, "jobs/"}, {PermRead, ""}}, Admin: true, Principal: "token:root"},
		{Op: OpRoleBind, Now: 2, Name: "app", Owner: "worker", Delta: 1, Admin: true},
		{Op: OpRoleBind, Now: 2, Name: "app", Owner: "spiffe://x/y", Delta: 1, Admin: true},
		{Op: OpRoleBind, Now: 2, Name: "app", Owner: "spiffe://x/y", Admin: true},
		{Op: OpTokenCreate, Now: 3, Name: "a", Value: hashOf("sa"), Roles: []string{"app"}, Owner: "A", Admin: true},
		{Op: OpTokenCreate, Now: 3, Name: "b", Value: hashOf("sb"), Roles: []string{"app"}, TTL: time.Hour, Admin: true},
		{Op: OpAuthEnable, Now: 4, Delta: 1, Admin: true},
		{Op: OpAcquire, Now: 5, Name: "jobs/x", Owner: "o", TTL: time.Minute, RequestID: "r1", Principal: "token:a"},
		{Op: OpSessionOpen, Now: 6, TTL: time.Minute, Principal: "token:a"},
		{Op: OpAcquire, Now: 7, Name: "jobs/y", Owner: "o", Session: 1, Seq: 1, Principal: "token:a"},
		{Op: OpAcquire, Now: 8, Name: "jobs/x", Owner: "o", TTL: time.Minute, Wait: time.Minute, RequestID: "r2", Principal: "token:a"},
	}
}

func applyAll(t *testing.T, m *Machine, log []Command) {
	t.Helper()
	for _, c := range log {
		if r := m.Apply(c); r.Err != nil {
			t.Fatalf("%+v: %v", c, r.Err)
		}
	}
}

// Principal B knows A's lock token, session id and request ids, and still
// cannot renew or release A's lease, retry A's request, nor keep alive,
// close, use, sequence or acknowledge A's session; each refusal changes
// nothing. An admin can; A itself can. The same holds on a machine restored
// from a snapshot (a follower catching up, a restore from a backup).
func TestOwnershipRefusesAnotherPrincipal(t *testing.T) {
	m := New()
	applyAll(t, m, authLog())
	var restored Machine
	restored.impl = *newImpl(DefaultConfig())
	if err := restored.Restore(bytes.NewReader(snapBytes(t, m))); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*Machine{"live": m, "restored": &restored} {
		t.Run(name, func(t *testing.T) {
			b := "token:b"
			now := int64(10)
			denied(t, m, Command{Op: OpRenew, Now: now, Name: "jobs/x", Token: 1, Principal: b}, "lease")
			denied(t, m, Command{Op: OpRelease, Now: now, Name: "jobs/x", Token: 1, Principal: b}, "lease")
			denied(t, m, Command{Op: OpRenew, Now: now, Name: "jobs/y", Token: 2, Principal: b}, "lease")
			denied(t, m, Command{Op: OpAcquire, Now: now, Name: "jobs/x", Owner: "o", TTL: time.Minute, RequestID: "r1", Principal: b}, "request_id")
			denied(t, m, Command{Op: OpAcquire, Now: now, Name: "jobs/x", Owner: "o", TTL: time.Minute, Wait: time.Minute, RequestID: "r2", Principal: b}, "request_id")
			denied(t, m, Command{Op: OpSessionKeepAlive, Now: now, Session: 1, TTL: 10 * time.Millisecond, Principal: b}, "session")
			denied(t, m, Command{Op: OpSessionClose, Now: now, Session: 1, Principal: b}, "session")
			denied(t, m, Command{Op: OpAcquire, Now: now, Name: "jobs/z", Owner: "o", Session: 1, Principal: b}, "session")
			denied(t, m, Command{Op: OpAcquire, Now: now, Name: "jobs/y", Owner: "o", Session: 1, Seq: 1, Principal: b}, "session") // replay A's seq
			denied(t, m, Command{Op: OpAcquire, Now: now, Name: "jobs/z", Owner: "o", Session: 1, Seq: 2, Principal: b}, "session") // take A's next seq
			denied(t, m, Command{Op: OpSessionKeepAlive, Now: now, Session: 1, Seq: 1 << 40, Ack: 1 << 40, Principal: b}, "session")
			denied(t, m, Command{Op: OpRelease, Now: now, Name: "jobs/y", Token: 2, Session: 1, Principal: b}, "session")

			// The owner and an admin are served.
			for _, who := range []Command{{Principal: "token:a"}, {Principal: "token:root", Admin: true}} {
				n := clone(t, m)
				if r := n.Apply(Command{Op: OpRenew, Now: now, Name: "jobs/x", Token: 1, Principal: who.Principal, Admin: who.Admin}); r.Err != nil {
					t.Fatalf("%s renew: %v", who.Principal, r.Err)
				}
				if r := n.Apply(Command{Op: OpSessionKeepAlive, Now: now, Session: 1, Seq: 2, Ack: 2, Principal: who.Principal, Admin: who.Admin}); r.Err != nil {
					t.Fatalf("%s keepalive: %v", who.Principal, r.Err)
				}
				if r := n.Apply(Command{Op: OpSessionClose, Now: now, Session: 1, Principal: who.Principal, Admin: who.Admin}); r.Err != nil {
					t.Fatalf("%s close: %v", who.Principal, r.Err)
				}
			}
		})
	}
}

func clone(t *testing.T, m *Machine) *Machine {
	t.Helper()
	n := New()
	if err := n.Restore(bytes.NewReader(snapBytes(t, m))); err != nil {
		t.Fatal(err)
	}
	return n
}

// Without authentication every command is an admin's (the server sends
// Admin): a lease taken by nobody in particular is renewed by anyone, as
// before auth existed.
func TestOwnershipOffWithoutAuth(t *testing.T) {
	m := New()
	mustGrant(t, m, Command{Op: OpAcquire, Now: 1, Name: "l", Owner: "o", TTL: time.Minute, Admin: true}, 1)
	if r := m.Apply(Command{Op: OpRenew, Now: 2, Name: "l", Token: 1, Admin: true}); r.Err != nil {
		t.Fatal(r.Err)
	}
}
