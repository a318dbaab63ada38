package state

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// Bootstrap happens once: a second one is refused and changes nothing,
// unless it names the count of bootstraps so far (the reset file's
// number), which permits exactly one more.
func TestAuthBootstrapOnlyOnce(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: 1, Name: "root", Value: hashOf("s0")})
	denied(t, m, Command{Op: OpAuthBootstrap, Now: 2, Name: "other", Value: hashOf("s1")}, "bootstrap")
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: 3, Name: "reset1", Value: hashOf("s2"), Attempt: 1})
	denied(t, m, Command{Op: OpAuthBootstrap, Now: 4, Name: "reset2", Value: hashOf("s3"), Attempt: 1}, "bootstrap")
	if m.AuthBootstraps() != 2 {
		t.Fatalf("bootstraps %d", m.AuthBootstraps())
	}
	tok, ok := m.AuthToken("reset1")
	if !ok || !tok.TokenMatches(hashOf("s2")) || tok.TokenMatches(hashOf("s0")) || tok.Roles[0] != AdminRole {
		t.Fatalf("reset token %+v", tok)
	}
}

// Once bootstrapped, token and role changes and enabling need an admin.
func TestAuthChangesNeedAdmin(t *testing.T) {
	m := New()
	// Before the bootstrap nobody may create a token or enable checking.
	if r := m.Apply(Command{Op: OpAuthEnable, Now: 1, Delta: 1, Admin: true}); !errors.Is(r.Err, fence.ErrInvalid) {
		t.Fatalf("enable before bootstrap: %v", r.Err)
	}
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: 1, Name: "root", Value: hashOf("s0")})
	for _, c := range []Command{
		{Op: OpAuthEnable, Now: 2, Delta: 1, Principal: "token:x"},
		{Op: OpRoleGrant, Now: 2, Name: "r", Perms: []Permission{{PermRead, ""}}, Principal: "token:x"},
		{Op: OpTokenCreate, Now: 2, Name: "t", Value: hashOf("x"), Roles: []string{AdminRole}, Principal: "token:x"},
		{Op: OpTokenRevoke, Now: 2, Name: "root", Principal: "token:x"},
		{Op: OpRoleRevoke, Now: 2, Name: "r", Principal: "token:x"},
		{Op: OpRoleBind, Now: 2, Name: AdminRole, Owner: "worker", Delta: 1, Principal: "token:x"},
	} {
		denied(t, m, c, "admin")
	}
	mustOK(t, m, Command{Op: OpTokenRevoke, Now: 3, Name: "root", Admin: true})
	if tok, _ := m.AuthToken("root"); !tok.Revoked {
		t.Fatal("not revoked")
	}
}

// R1: the auth commands, encoded for the log and decoded on another
// replica, give the same state byte for byte, and a snapshot of it
// restores to the same bytes.
func TestAuthReplayIsDeterministic(t *testing.T) {
	log := append(authLog(),
		Command{Op: OpRoleRevoke, Now: 20, Name: "app", Perms: []Permission{{PermRead, ""}}, Admin: true},
		Command{Op: OpTokenRevoke, Now: 21, Name: "b", Admin: true},
		Command{Op: OpRoleGrant, Now: 22, Name: "ops", Perms: []Permission{{PermWrite, "db/"}, {PermLock, ""}, {PermWrite, "db/"}}, Admin: true},
	)
	a, b := New(), New()
	for _, c := range log {
		enc, err := c.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d Command
		if err := d.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		ra, rb := a.Apply(c), b.Apply(d)
		if (ra.Err == nil) != (rb.Err == nil) {
			t.Fatalf("%+v: %v vs %v", c, ra.Err, rb.Err)
		}
	}
	sa := snapBytes(t, a)
	if !bytes.Equal(sa, snapBytes(t, b)) {
		t.Fatal("replicas differ")
	}
	if !bytes.Equal(sa, snapBytes(t, clone(t, a))) {
		t.Fatal("restore differs")
	}
	if r, _ := b.Role("ops"); len(r.Perms) != 2 {
		t.Fatalf("ops perms %v", r.Perms)
	}
	if rs := b.CertRoles("worker"); len(rs) != 1 || rs[0].Name != "app" || len(b.CertRoles("spiffe://x/y")) != 0 {
		t.Fatalf("cert bindings: worker %v, spiffe %v", rs, b.CertRoles("spiffe://x/y"))
	}
	if tok, _ := b.AuthToken("b"); !tok.Revoked || tok.ExpiresAt != 3+int64(time.Hour) {
		t.Fatalf("token b %+v", tok)
	}
	if !b.AuthEnabled() {
		t.Fatal("not enabled")
	}
}

func TestPermissionsByPrefix(t *testing.T) {
	perms := []Permission{{PermLock, "jobs/"}, {PermRead, ""}}
	for _, c := range []struct {
		k    PermKind
		name string
		want bool
	}{{PermLock, "jobs/a", true}, {PermLock, "job", false}, {PermLock, "other", false}, {PermRead, "x", true}, {PermWrite, "jobs/a", false}} {
		if got := Allows(perms, c.k, c.name); got != c.want {
			t.Errorf("%v %q: %v", c.k, c.name, got)
		}
	}
	if !Allows([]Permission{{PermAdmin, ""}}, PermWrite, "anything") {
		t.Error("admin does not allow write")
	}
}

// TestSnapshotAuthGolden pins the snapshot bytes of the auth state and the
// principals (the header's auth message, a grant's, a request's and a
// session's principal): authLog's machine is compared with
// testdata/snapshot_auth.golden (hex), and that file restores to a machine
// that writes it again. A machine without auth writes the bytes it wrote
// before auth existed (TestSnapshotGolden is unchanged).
func TestSnapshotAuthGolden(t *testing.T) {
	m := New()
	applyAll(t, m, authLog())
	got := snapBytes(t, m)
	golden(t, "snapshot_auth.golden", []byte(hex.EncodeToString(got)+"\n"))
	want, err := hex.DecodeString(strings.TrimSpace(readGolden(t, "snapshot_auth.golden")))
	if err != nil {
		t.Fatal(err)
	}
	n := New()
	if err := n.Restore(bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapBytes(t, n), want) {
		t.Fatal("the golden auth snapshot does not restore to itself")
	}
}

// A token's expiry is a deadline: NextDeadline reports it while it is
// ahead of server time, so the node ticks at it and an idle store's server
// time (which the server judges expiry by) passes it; then it is reported
// no more.
func TestTokenExpiryIsADeadline(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpAuthBootstrap, Now: sec, Name: "root", Value: hashOf("s0")})
	mustOK(t, m, Command{Op: OpRoleGrant, Now: sec, Name: "r", Perms: []Permission{{PermRead, ""}}, Admin: true})
	mustOK(t, m, Command{Op: OpTokenCreate, Now: sec, Name: "t", Value: hashOf("t"), Roles: []string{"r"}, TTL: time.Minute, Admin: true})
	at, ok := m.NextDeadline()
	if !ok || at != sec+int64(time.Minute) {
		t.Fatalf("NextDeadline = %d, %v; want the token's expiry %d", at, ok, sec+int64(time.Minute))
	}
	mustOK(t, m, Command{Op: OpTick, Now: at})
	if tok, _ := m.AuthToken("t"); m.Now() < tok.ExpiresAt {
		t.Fatalf("server time %d after the tick, expiry %d", m.Now(), tok.ExpiresAt)
	}
	if at, ok := m.NextDeadline(); ok {
		t.Fatalf("NextDeadline = %d after the expiry, want none", at)
	}
}
