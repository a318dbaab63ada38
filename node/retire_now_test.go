package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// F1/F2 and F5 at the node: a lease granted before a rotation is renewed
// after it and its Renew and Get hand out the grant's own proof, byte for
// byte (the holder may have kept only that one); a plain retire of its key
// waits for it. RetireKey with now drops the key at once: the lease's Get
// and Renew then hand out a proof by the signing key, which the new key set
// verifies, while the grant's proof is refused FORGED_TOKEN.
func TestRetireNowHandsOutTheSigningKeysProof(t *testing.T) {
	n := openNode(t, t.TempDir())
	svc, ctx := n.Service(), context.Background()
	old := n.KeySet().Keys[0].ID
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	id, err := n.RotateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Renew(ctx, fence.RenewRequest{Name: "a", Token: g.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	li, err := svc.Get(ctx, "a")
	if err != nil || li.Lease == nil {
		t.Fatalf("get: %+v, %v", li, err)
	}
	for what, l := range map[string]fence.Lease{"renew": r.Lease, "get": *li.Lease} {
		if l.Signed.String() != g.Lease.Signed.String() {
			t.Fatalf("%s after a rotation handed out %s, want the grant's proof %s", what, l.Signed, g.Lease.Signed)
		}
	}
	if moved, err := n.RetireKey(ctx, old, false); err != nil || moved != 0 {
		t.Fatalf("retire: %d, %v", moved, err)
	}
	if ks := n.KeySet(); len(ks.Keys) != 2 {
		t.Fatalf("a plain retire dropped the key of a live, renewed lease: %+v", ks.Keys)
	}
	if _, err := n.RetireKey(ctx, id, true); !errorsIsInvalid(err) {
		t.Fatalf("retire --now of the signing key: %v, want INVALID_ARGUMENT", err)
	}
	moved, err := n.RetireKey(ctx, old, true)
	if err != nil || moved != 1 {
		t.Fatalf("retire --now: moved %d, %v; want 1", moved, err)
	}
	ks := n.KeySet()
	if len(ks.Keys) != 1 || ks.Keys[0].ID != id {
		t.Fatalf("key set after retire --now: %+v, want only %s", ks.Keys, id)
	}
	if err := ks.Verify(g.Lease.Signed, "a"); !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("the dropped key's proof: %v, want FORGED_TOKEN", err)
	}
	li, err = svc.Get(ctx, "a")
	if err != nil || li.Lease == nil {
		t.Fatalf("get after retire --now: %+v, %v", li, err)
	}
	r, err = svc.Renew(ctx, fence.RenewRequest{Name: "a", Token: g.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]fence.Lease{"get": *li.Lease, "renew": r.Lease} {
		if l.Signed.KeyID != id {
			t.Fatalf("%s after retire --now signed by %s, want %s", what, l.Signed.KeyID, id)
		}
		verifySigned(t, ks, what+" after retire --now", l)
	}
}

// R1 for retire --now across a cluster: every member applies the forced
// retire alike (the same keys, statuses and counts), and a new leader's
// Get hands out the same proof, byte for byte, as the old leader's after
// the retire — by the signing key the lease was moved to.
func TestClusterRetireNowSameOnEveryMember(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	ctx := context.Background()
	old := lead.node.KeySet().Keys[0].ID
	for _, name := range []string{"a", "b"} {
		if _, err := lead.node.Service().Acquire(ctx, fence.AcquireRequest{Name: name, Owner: "o", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	id, err := lead.node.RotateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if moved, err := lead.node.RetireKey(ctx, old, true); err != nil || moved != 2 {
		t.Fatalf("retire --now: moved %d, %v; want 2", moved, err)
	}
	before, err := lead.node.Service().Get(ctx, "a")
	if err != nil || before.Lease == nil || before.Lease.Signed.KeyID != id {
		t.Fatalf("get after retire --now: %+v, %v; want a proof by %s", before.Lease, err, id)
	}
	tc.caughtUp(tc.members, lead)
	want := fmt.Sprint(lead.node.SigningKeys())
	for _, m := range tc.members {
		if got := fmt.Sprint(m.node.SigningKeys()); got != want {
			t.Fatalf("member %s keys %s, the leader's %s", m.id, got, want)
		}
	}
	next := tc.others(lead)[0]
	tc.transferTo(next)
	li := getOnceLeader(t, tc, next, "a")
	if li.Lease == nil || li.Lease.Signed.String() != before.Lease.Signed.String() {
		t.Fatalf("the new leader's proof %v, want the old leader's %s", li.Lease, before.Lease.Signed)
	}
}
