package state

import (
	"bytes"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func relAs(now int64, name string, tok fence.Token, p string) Command {
	c := rel(now, name, tok)
	c.Principal = p
	return c
}

// acqRID is an acquire with request_id rid by principal p.
func acqRID(now int64, name, rid, p string, ttl time.Duration) Command {
	c := acq(now, name, "o", ttl)
	c.RequestID, c.Principal = rid, p
	return c
}

func writeAs(now int64, res string, tok fence.Token, op, p string) Command {
	c := write(now, res, tok, "v", op)
	c.Principal = p
	return c
}

// idQuotaConfig allows each principal 2 remembered op_ids (and 2
// request_ids), with ids kept at least 3 minutes.
func idQuotaConfig() Config {
	c := DefaultConfig()
	c.MaxIDsPerPrincipal = 2
	return c
}

// Principal A at its quota of remembered op_ids is refused a new one
// (naming the quota) while its ids are younger than MinIDRetention, and B
// is still served; once A's oldest is MinIDRetention old, A's next write is
// accepted and A's oldest id forgotten (A keeps 2). A restored machine
// decides the same (the per-principal order is rebuilt from the
// snapshot's). A's retry of its own op_id is answered; B's retry of A's
// op_id is refused PERMISSION_DENIED and changes nothing.
func TestIDQuotaRefusesOnePrincipalAndServesOthers(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: idQuotaConfig()})
	tok := mustOK(t, m, acq(at(0), "l", "o", time.Hour)).Lease.Token
	mustOK(t, m, writeAs(at(1), "r", tok, "a1", "token:a"))
	mustOK(t, m, writeAs(at(2), "r", tok, "a2", "token:a"))
	const limit = `remembered op_ids of principal "token:a" (config.max_ids_per_principal or its roles' quota)`
	r := restored(t, m)
	for _, mm := range []*Machine{m, r} {
		exhaustedQuota(t, mm, writeAs(at(3), "r", tok, "a3", "token:a"), limit)
		mustOK(t, mm, writeAs(at(3), "r", tok, "b1", "token:b"))
		mustOK(t, mm, writeAs(at(3), "r", tok, "n1", "")) // no quota without a principal
		if r := mustOK(t, mm, writeAs(at(4), "r", tok, "a1", "token:a")); !r.Replayed {
			t.Fatalf("A's retry of a1: %+v, want replayed", r)
		}
		denied(t, mm, writeAs(at(4), "r", tok, "a1", "token:b"), "op_id")
	}

	// At 181.5 s a1 is MinIDRetention old: A's a3 is accepted and a1
	// forgotten; a2, 179.5 s old, is kept, so A is at its quota again.
	for _, mm := range []*Machine{m, r} {
		mustOK(t, mm, writeAs(at(181.5), "r", tok, "a3", "token:a"))
		if res := mustOK(t, mm, writeAs(at(181.5), "r", tok, "a2", "token:a")); !res.Replayed {
			t.Fatalf("a2 (still within A's quota) was forgotten: %+v", res)
		}
		if _, kept := mm.impl.ops.get(opKeyOf("r", "a1")); kept || mm.impl.ops.owns("token:a") != 2 {
			t.Fatalf("A's op_ids: a1 kept %v, %d held; want a1 forgotten, 2 held", kept, mm.impl.ops.owns("token:a"))
		}
		exhaustedQuota(t, mm, writeAs(at(181.5), "r", tok, "a4", "token:a"), limit)
	}
	if !bytes.Equal(snapBytes(t, m), snapBytes(t, r)) {
		t.Fatal("the restored machine decided otherwise than the one that lived the log")
	}
}

// The same quota bounds one principal's remembered request_ids: A's
// acquires with request_ids are refused at 2 while B's are granted.
func TestIDQuotaBoundsRequestIDs(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: idQuotaConfig()})
	try := func(now int64, name, rid, p string) Command { return acqRID(now, name, rid, p, time.Second) }
	mustOK(t, m, try(at(1), "x1", "r1", "token:a"))
	mustOK(t, m, relAs(at(1), "x1", 1, "token:a"))
	mustOK(t, m, try(at(1), "x2", "r2", "token:a"))
	mustOK(t, m, relAs(at(1), "x2", 2, "token:a"))
	exhaustedQuota(t, m, try(at(2), "x3", "r3", "token:a"), `remembered request_ids of principal "token:a" (config.max_ids_per_principal or its roles' quota)`)
	mustOK(t, m, try(at(2), "x3", "rb", "token:b"))
}

// Live request_ids count toward the quota: they are remembered when their
// leases end, so A holding 2 leases acquired with request_ids is refused a
// third (an outside test held 20 under a quota of 5 and, as they ended,
// filled the whole id memory and locked every tenant out of request_ids);
// a restored machine decides the same (the count is derived); once A's
// leases end its ids are remembered, A stays at its quota, and B is served
// throughout.
func TestIDQuotaCountsLiveRequestIDs(t *testing.T) {
	m := New()
	mustOK(t, m, Command{Op: OpConfig, Now: at(0), Config: idQuotaConfig()})
	try := func(now int64, name, rid, p string) Command { return acqRID(now, name, rid, p, time.Minute) }
	mustOK(t, m, try(at(1), "x1", "r1", "token:a"))
	mustOK(t, m, try(at(1), "x2", "r2", "token:a"))
	const limit = `remembered request_ids of principal "token:a" (config.max_ids_per_principal or its roles' quota)`
	for _, mm := range []*Machine{m, restored(t, m)} {
		exhaustedQuota(t, mm, try(at(2), "x3", "r3", "token:a"), limit)
		mustOK(t, mm, try(at(2), "y1", "rb1", "token:b"))
		// A's retry of a live request is answered, not counted again.
		if r := mustOK(t, mm, try(at(2), "x1", "r1", "token:a")); r.Lease == nil || r.Lease.Token != 1 {
			t.Fatalf("A's retry of r1: %+v", r)
		}
	}
	mustOK(t, m, relAs(at(3), "x1", 1, "token:a"))
	mustOK(t, m, relAs(at(3), "x2", 2, "token:a"))
	exhaustedQuota(t, m, try(at(4), "x3", "r3", "token:a"), limit)
	mustOK(t, m, try(at(4), "y2", "rb2", "token:b"))
}

// A role sets quotas of its own: a principal holding it gets the largest
// its roles set, one holding none keeps the rules' defaults; a
// certificate's principal gets its bound roles'. The quotas survive a
// snapshot, and only an admin may set them.
func TestRoleQuotasOverrideTheDefaults(t *testing.T) {
	m := New()
	applyAll(t, m, authLog()) // roles admin, app; tokens a, b (app); cert "worker" bound to app
	c := quotaConfig()        // 2 sessions, 2 waiters
	c.MaxIDsPerPrincipal = 7
	mustOK(t, m, Command{Op: OpConfig, Now: at(10), Config: c})
	mustOK(t, m, Command{Op: OpRoleGrant, Now: at(10), Name: "big", Perms: []Permission{{PermLock, ""}}, Admin: true})
	mustOK(t, m, Command{Op: OpTokenCreate, Now: at(10), Name: "c", Value: hashOf("sc"), Roles: []string{"app", "big"}, Admin: true})
	mustOK(t, m, Command{Op: OpRoleQuota, Now: at(10), Name: "app", Quota: Quota{Sessions: 3, Conns: 9}, Admin: true})
	mustOK(t, m, Command{Op: OpRoleQuota, Now: at(10), Name: "big", Quota: Quota{Sessions: 5, Waiters: 4}, Admin: true})

	denied(t, m, Command{Op: OpRoleQuota, Now: at(10), Name: "big", Quota: Quota{Sessions: 50}, Principal: "token:a"}, "admin")
	before := snapBytes(t, m)
	if e := errAs[*fence.InvalidError](t, m.Apply(Command{Op: OpRoleQuota, Now: at(10), Name: "big", Quota: Quota{IDs: -1}, Admin: true}).Err); e.Field != "quota.ids" {
		t.Fatalf("negative quota: %+v", e)
	}
	if e := errAs[*fence.InvalidError](t, m.Apply(Command{Op: OpRoleQuota, Now: at(10), Name: "nope", Admin: true}).Err); e.Field != "role" {
		t.Fatalf("unknown role: %+v", e)
	}
	if !bytes.Equal(before, snapBytes(t, m)) {
		t.Fatal("a refused quota change changed the state")
	}

	for _, mm := range []*Machine{m, restored(t, m)} {
		for p, want := range map[string]Quota{
			"token:a":     {Sessions: 3, Waiters: 2, IDs: 7, Conns: 9}, // app
			"token:c":     {Sessions: 5, Waiters: 4, IDs: 7, Conns: 9}, // app and big: the largest of each
			"cert:worker": {Sessions: 3, Waiters: 2, IDs: 7, Conns: 9}, // bound to app
			"token:root":  {Sessions: 2, Waiters: 2, IDs: 7},           // admin: the defaults
			"token:gone":  {Sessions: 2, Waiters: 2, IDs: 7},
			"":            {},
		} {
			if got := mm.QuotaOf(p); got != want {
				t.Errorf("QuotaOf(%q) = %+v, want %+v", p, got, want)
			}
		}
	}
	// The role's quota is what admits: A (app: 3 sessions; authLog's A
	// holds one) opens a second and a third (above the default 2), not a
	// fourth.
	for range 2 {
		mustOK(t, m, openAs(at(11), "token:a"))
	}
	e := errAs[*fence.ResourceExhaustedError](t, m.Apply(openAs(at(11), "token:a")).Err)
	if e.Bound != "at most 3" {
		t.Fatalf("A's quota: %+v, want at most 3", e)
	}
	// Clearing the role's quota brings the default back.
	mustOK(t, m, Command{Op: OpRoleQuota, Now: at(12), Name: "app", Admin: true})
	if got := m.QuotaOf("token:a"); got != (Quota{Sessions: 2, Waiters: 2, IDs: 7}) {
		t.Fatalf("after clearing: %+v", got)
	}
}
