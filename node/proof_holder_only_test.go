package node

import (
	"context"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// A lease's proof is a bearer credential at every guard: Get hands it to
// the lease's holder (its principal), an admin, or a caller with no
// principal (an embedded node), and to nobody else. A reader who is not
// the holder sees the lock, its token and its owner label, but gets no
// proof to write with. (An outside test read the holder's signed token
// with read permission and wrote through a guard with it.)
func TestGetHandsTheProofToItsHolderOnly(t *testing.T) {
	n := openNode(t, t.TempDir())
	svc := n.Service()
	a := fence.WithPrincipal(context.Background(), fence.Principal{Name: "token:a"})
	g, err := svc.Acquire(a, fence.AcquireRequest{Name: "x", Owner: "a", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ks := n.KeySet()
	for _, c := range []struct {
		who       string
		ctx       context.Context
		wantProof bool
	}{
		{"the holder", a, true},
		{"an admin", fence.WithPrincipal(context.Background(), fence.Principal{Name: "token:root", Admin: true}), true},
		{"no principal (embedded)", context.Background(), true},
		{"another reader", fence.WithPrincipal(context.Background(), fence.Principal{Name: "token:b"}), false},
		{"an anonymous reader with auth on", fence.WithPrincipal(context.Background(), fence.Principal{}), false},
	} {
		li, err := svc.Get(c.ctx, "x")
		if err != nil || li.Lease == nil || li.Lease.Token != g.Lease.Token {
			t.Fatalf("%s: Get = %+v, %v; want the lease of token %d", c.who, li, err, g.Lease.Token)
		}
		if c.wantProof {
			verifySigned(t, ks, c.who, *li.Lease)
		} else if li.Lease.Signed.Signed() {
			t.Fatalf("%s got the holder's proof %s", c.who, li.Lease.Signed)
		}
	}
}
