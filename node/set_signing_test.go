package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func openSignedWritesNode(t *testing.T) *Node {
	t.Helper()
	n, err := Open(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RequireSignedWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { within(t, "close", func() { n.Close() }) })
	return n
}

// A set's lease is signed once per lock: Proofs[i] is the token's proof
// for Locks[i].Name (Signed is Proofs[0]), by the lease's key. With signed
// writes required, each lock's proof is taken for the resource named like
// that lock, and refused FORGED_TOKEN for another lock's resource. (The
// lease is made by hand over a real grant's token, so this holds whatever
// the state grants; TestRequireSignedWritesTakeASetsProofs acquires a set.)
func TestSetLeaseSignedPerLock(t *testing.T) {
	n := openSignedWritesNode(t)
	svc, ctx := n.Service(), context.Background()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "stock/a", Owner: "w", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l := fence.Lease{Name: "stock/a", Token: g.Lease.Token,
		Locks: []fence.LockSpec{{Name: "stock/a"}, {Name: "stock/b", Mode: fence.Shared}, {Name: "stock/c", Permits: 2}}}
	n.signLease(&l)
	if len(l.Proofs) != 3 || l.Signed.String() != l.Proofs[0].String() || l.Signed.String() != g.Lease.Signed.String() {
		t.Fatalf("set lease signed as %+v, want 3 proofs, Signed the first, the same bytes as the grant's", l)
	}
	for i, s := range l.Locks {
		if !l.Proofs[i].Signed() || l.Proofs[i].Token != l.Token {
			t.Fatalf("proof %d = %+v, want a proof of token %d", i, l.Proofs[i], l.Token)
		}
		if l.ProofFor(s.Name).String() != l.Proofs[i].String() {
			t.Fatalf("ProofFor(%q) is not Proofs[%d]", s.Name, i)
		}
		if _, err := svc.Write(ctx, fence.WriteRequest{Resource: s.Name, Token: l.Token, Signed: l.Proofs[i], Value: []byte("v")}); err != nil {
			t.Fatalf("write of %s with its own proof: %v", s.Name, err)
		}
		other := l.Proofs[(i+1)%len(l.Proofs)]
		if _, err := svc.Write(ctx, fence.WriteRequest{Resource: s.Name, Token: l.Token, Signed: other, Value: []byte("x")}); !errors.Is(err, fence.ErrForgedToken) {
			t.Fatalf("write of %s with another lock's proof: %v, want FORGED_TOKEN", s.Name, err)
		}
	}
	// Get hands the holder its proof on the lease and on the same lease
	// among the holders.
	li, err := svc.Get(ctx, "stock/a")
	if err != nil || li.Lease == nil || len(li.Holders) != 1 || !li.Holders[0].Signed.Signed() ||
		li.Holders[0].Signed.String() != li.Lease.Signed.String() {
		t.Fatalf("Get(stock/a) = %+v, %v; want the holder's lease with its proof, in lease and holders alike", li, err)
	}
	// A lease of one lock keeps no Proofs.
	one := g.Lease
	n.signLease(&one)
	if one.Proofs != nil || one.Signed.String() != g.Lease.Signed.String() {
		t.Fatalf("a single lease signed as %+v", one)
	}
}

// A set acquired for real: its lease names every lock, carries one proof
// per lock, and a guarded write of each lock's resource takes that proof
// with signed writes required (needs the state's sets, issue 23).
func TestRequireSignedWritesTakeASetsProofs(t *testing.T) {
	n := openSignedWritesNode(t)
	svc, ctx := n.Service(), context.Background()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Owner: "w", TTL: time.Minute,
		Locks: []fence.LockSpec{{Name: "sku/2"}, {Name: "catalog", Mode: fence.Shared}, {Name: "sku/1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []fence.LockSpec{{Name: "catalog", Mode: fence.Shared}, {Name: "sku/1"}, {Name: "sku/2"}}
	if len(g.Lease.Locks) != 3 || len(g.Lease.Proofs) != 3 || g.Lease.Name != "catalog" || g.Lease.Signed.String() != g.Lease.Proofs[0].String() {
		t.Fatalf("set lease = %+v, want locks %v, each with a proof", g.Lease, want)
	}
	for i, s := range want {
		if g.Lease.Locks[i] != s {
			t.Fatalf("set lease locks = %v, want %v", g.Lease.Locks, want)
		}
		if _, err := svc.Write(ctx, fence.WriteRequest{Resource: s.Name, Token: g.Lease.Token, Signed: g.Lease.Proofs[i], Value: []byte("v")}); err != nil {
			t.Fatalf("write of %s with its proof: %v", s.Name, err)
		}
	}
	// Get of one of the set's locks hands out the lease with its proofs.
	li, err := svc.Get(ctx, "sku/1")
	if err != nil || li.Lease == nil || li.Lease.Token != g.Lease.Token || li.Lease.ProofFor("sku/1").String() != g.Lease.Proofs[1].String() {
		t.Fatalf("Get(sku/1) = %+v, %v; want the set's lease with its proof for sku/1", li, err)
	}
}
