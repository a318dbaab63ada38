package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// The locks quota bounds what one principal holds or waits for, a set
// counting each of its locks: at its quota it is refused RESOURCE_EXHAUSTED
// naming the quota and the principal, changing nothing, while another
// principal is served; releases give the room back; a role's quota
// overrides the rules' default; a restore recounts (the counts are derived).
func TestLockQuotaRefusesOnePrincipalAndServesOthers(t *testing.T) {
	m := New()
	applyAll(t, m, authLog()) // roles admin, app; tokens a, b (app)
	c := DefaultConfig()
	c.MaxLocksPerPrincipal = 3
	mustOK(t, m, Command{Op: OpConfig, Config: c})
	as := func(cmd Command, p string) Command { cmd.Principal = p; return cmd }
	limit := `locks held or waited for of principal "token:q" (config.max_locks_per_principal or its roles' quota)`
	set := granted(t, m, as(setAcq(0, "A", time.Minute, 0, "", spec("x"), spec("y")), "token:q"))
	mustOK(t, m, as(waitAcq(0, "y", "A", time.Minute, time.Minute, "w"), "token:q")) // queued: 3 of 3
	before := snapBytes(t, m)
	r := m.Apply(as(acq(0, "z", "A", time.Minute), "token:q"))
	if e := errAs[*fence.ResourceExhaustedError](t, r.Err); e.Limit != limit || e.Bound != "at most 3" || e.Got != "3, and 1 asked" {
		t.Fatalf("4th lock: %+v", e)
	}
	if !bytes.Equal(before, snapBytes(t, m)) {
		t.Fatal("a refused acquire changed the state")
	}
	// A shared lease counts its lock too, and another principal is served.
	granted(t, m, as(sharedAcq(0, "s", "B", time.Minute, 0, ""), "token:r"))
	granted(t, m, as(setAcq(0, "B", time.Minute, 0, "", spec("p"), spec("q")), "token:r"))
	// The waiter, granted when the set is released, moves from waited-for
	// to held: still 1 of a's 3, and a's set freed two.
	mustOK(t, m, as(rel(0, "x", set.Token), "token:q"))
	granted(t, m, as(setAcq(0, "A", time.Minute, 0, "", spec("m"), spec("n")), "token:q"))
	if r := m.Apply(as(acq(0, "z", "A", time.Minute), "token:q")); r.Err == nil {
		t.Fatalf("a 4th lock after the swap: %s", describe(r))
	}
	// A restore recounts: the restored machine refuses alike.
	n := New()
	if err := n.Restore(bytes.NewReader(snapBytes(t, m))); err != nil {
		t.Fatal(err)
	}
	if r := n.Apply(as(acq(0, "z", "A", time.Minute), "token:q")); r.Err == nil {
		t.Fatalf("restored machine granted a 4th lock: %s", describe(r))
	}
	// A role's quota overrides the default: token c with role big (10).
	mustOK(t, n, Command{Op: OpRoleGrant, Name: "big", Perms: []Permission{{PermLock, ""}}, Admin: true})
	mustOK(t, n, Command{Op: OpRoleQuota, Name: "big", Quota: Quota{Locks: 10}, Admin: true})
	mustOK(t, n, Command{Op: OpTokenCreate, Name: "c", Value: hashOf("c"), Roles: []string{"big"}, Admin: true})
	granted(t, n, as(setAcq(0, "C", time.Minute, 0, "", spec("c1"), spec("c2"), spec("c3"), spec("c4")), "token:c"))
}

// granted applies c and fails unless it granted a lease.
func granted(t *testing.T, m *Machine, c Command) *fence.Lease {
	t.Helper()
	r := m.Apply(c)
	if r.Err != nil || r.Lease == nil {
		t.Fatalf("%+v: want a grant, got %s", c, describe(r))
	}
	return r.Lease
}
