package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// The lock-boundary options as the request Acquire sends: Shared and
// Permits set the mode and the permit count; a set's locks go as listed,
// each with its mode ("" for exclusive, the default, absent in JSON).
func TestAcquireOptionsLockBoundaries(t *testing.T) {
	cfg := acquireConfig{}
	for _, o := range []AcquireOption{Shared(), Permits(3)} {
		o(&cfg)
	}
	if cfg.req.Mode != fence.Shared || cfg.req.Permits != 3 {
		t.Fatalf("Shared, Permits(3): %+v", cfg.req)
	}
	p := acquireToProto(fence.AcquireRequest{Name: "c", Mode: fence.Shared, Permits: 3})
	if p.GetMode() != "shared" || p.GetPermits() != 3 {
		t.Fatalf("on the wire: %v", p)
	}
	p = acquireToProto(fence.AcquireRequest{Locks: []fence.LockSpec{{Name: "sku/2"}, {Name: "catalog", Mode: fence.Shared}, {Name: "x", Permits: 4}}})
	var got []string
	for _, l := range p.GetLocks() {
		got = append(got, fmt.Sprintf("%s/%q/%d", l.GetName(), l.GetMode(), l.GetPermits()))
	}
	if fmt.Sprint(p.GetName(), p.GetMode(), got) != `[sku/2/""/0 catalog/"shared"/0 x/""/4]` {
		t.Fatalf("a set on the wire: %q %q %v", p.GetName(), p.GetMode(), got)
	}
}

// A lease read from the wire keeps its mode, permits, set and proofs; a
// proof that does not parse or is of another token is dropped in its place
// (that lock then has no proof), and ProofFor gives each lock its own.
func TestLeaseFromProtoLockBoundaries(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	cluster := "0123456789abcdef0123456789abcdef"
	a, b, other := fence.Sign(key, cluster, "a", 9), fence.Sign(key, cluster, "b", 9), fence.Sign(key, cluster, "c", 8)
	l := leaseFromProto(&fencev1.Lease{Name: "a", Token: 9, SignedToken: a.String(), Mode: "shared",
		Locks:  []*fencev1.LockSpec{{Name: "a", Mode: "shared"}, {Name: "b"}, {Name: "c", Permits: 2}, {Name: "d"}},
		Proofs: []string{a.String(), b.String(), other.String(), "garbage"}})
	if l.Mode != fence.Shared || len(l.Locks) != 4 || l.Locks[0] != (fence.LockSpec{Name: "a", Mode: fence.Shared}) || l.Locks[2].Permits != 2 {
		t.Fatalf("lease = %+v", l)
	}
	if len(l.Proofs) != 4 || l.Proofs[0].String() != a.String() || l.Proofs[1].String() != b.String() || l.Proofs[2].Signed() || l.Proofs[3].Signed() {
		t.Fatalf("proofs = %v, want a, b and two dropped", l.Proofs)
	}
	if l.ProofFor("b").String() != b.String() || l.ProofFor("c").Signed() || l.ProofFor("zz").Signed() {
		t.Fatalf("ProofFor: b %v, c %v, zz %v", l.ProofFor("b"), l.ProofFor("c"), l.ProofFor("zz"))
	}
	if m := leaseFromProto(&fencev1.Lease{Name: "a", Token: 1, Mode: "sideways"}).Mode; m == fence.Exclusive || m == fence.Shared {
		t.Fatalf("an unknown mode read as %v", m)
	}

	info := lockFromProto(&fencev1.LockInfo{Name: "r", Permits: 2, Holders: []*fencev1.Lease{{Name: "r", Token: 3, Permits: 2}, {Name: "r", Token: 4, Permits: 2}}})
	if info.Permits != 2 || len(info.Holders) != 2 || info.Holders[1].Token != 4 || info.Holders[0].Permits != 2 {
		t.Fatalf("lock info = %+v", info)
	}
}

// AcquireSet refuses before sending: no locks, Shared or Permits (a set's
// locks say their own), a name twice.
func TestAcquireSetRefusedLocally(t *testing.T) {
	c, err := New("http://127.0.0.1:1", WithFailFast(), WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	two := []fence.LockSpec{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		field string
		call  func() (*Lease, error)
	}{
		{"locks", func() (*Lease, error) { return c.AcquireSet(ctx, nil) }},
		{"mode", func() (*Lease, error) { return c.AcquireSet(ctx, two, Shared()) }},
		{"permits", func() (*Lease, error) { return c.AcquireSet(ctx, two, Permits(2)) }},
		{"locks[1].name", func() (*Lease, error) { return c.AcquireSet(ctx, []fence.LockSpec{{Name: "a"}, {Name: "a"}}) }},
		{"mode", func() (*Lease, error) { return c.Acquire(ctx, "a", Shared(), Permits(2)) }},
		{"permits", func() (*Lease, error) { return c.Acquire(ctx, "a", Permits(fence.MaxPermits+1)) }},
	} {
		_, err := tc.call()
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%v, want *fence.InvalidError naming %s", err, tc.field)
		}
	}
}
