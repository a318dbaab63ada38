package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

// verifySigned fails unless l carries a proof of its own grant that the
// key set verifies.
func verifySigned(t *testing.T, ks *fence.KeySet, what string, l fence.Lease) {
	t.Helper()
	if !l.Signed.Signed() || l.Signed.Token != l.Token {
		t.Fatalf("%s: lease %+v carries no proof of token %d", what, l, l.Token)
	}
	if err := ks.Verify(l.Signed, l.Name); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// G9: the first leader of a log proposes a signing key before it serves, and
// every way a grant is answered carries its proof: an acquire, a renew, a
// replayed acquire (same request_id), a session acquire and a Get of the
// held lock. A restart adds no key (the state has one).
func TestGrantsCarryProofs(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	st := n.Status()
	if !st.SigningKey || !st.Ready() || len(n.SigningKeys()) != 1 {
		t.Fatalf("a new node: signing key %v, ready %v, keys %+v", st.SigningKey, st.Ready(), n.SigningKeys())
	}
	ks := n.KeySet()
	if ks.ClusterID == "" || ks.ClusterID != n.ClusterID() || len(ks.Keys) != 1 {
		t.Fatalf("key set %+v (cluster %q)", ks, n.ClusterID())
	}
	svc, ctx := n.Service(), context.Background()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: "o", TTL: time.Minute, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	verifySigned(t, ks, "acquire", g.Lease)
	again, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: "o", TTL: time.Minute, RequestID: "r1"})
	if err != nil || !again.Replayed {
		t.Fatalf("replayed acquire: %+v, %v", again, err)
	}
	verifySigned(t, ks, "replayed acquire", again.Lease)
	if again.Lease.Signed.String() != g.Lease.Signed.String() {
		t.Fatalf("a replayed grant's proof %s differs from the grant's %s", again.Lease.Signed, g.Lease.Signed)
	}
	r, err := svc.Renew(ctx, fence.RenewRequest{Name: "a", Token: g.Lease.Token})
	if err != nil {
		t.Fatal(err)
	}
	verifySigned(t, ks, "renew", r.Lease)
	li, err := svc.Get(ctx, "a")
	if err != nil || li.Lease == nil {
		t.Fatalf("get: %+v, %v", li, err)
	}
	verifySigned(t, ks, "get", *li.Lease)
	sg, err := svc.OpenSession(ctx, fence.OpenSessionRequest{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "s", Owner: "o", Session: fence.SessionRef{ID: sg.Session.ID, Seq: 1}})
	if err != nil {
		t.Fatal(err)
	}
	verifySigned(t, ks, "session acquire", sa.Lease)
	// A proof is for its lock: the same token under another name fails.
	if err := ks.Verify(g.Lease.Signed, "b"); err == nil {
		t.Fatal("a proof verified for another lock")
	}
	n.Close()
	n = openNode(t, dir)
	if keys := n.SigningKeys(); len(keys) != 1 || keys[0].ID != ks.Keys[0].ID {
		t.Fatalf("keys after a restart: %+v, want the one key %s", keys, ks.Keys[0].ID)
	}
}

// Rotation: grants after it are signed by the new key, a lease granted
// before keeps its key (its Get still verifies) until it is renewed; the
// old key, retired, is still published while its lease lives and dropped
// when it ends. The signing key cannot be retired.
func TestKeyRotationAndRetire(t *testing.T) {
	n := openNode(t, t.TempDir())
	svc, ctx := n.Service(), context.Background()
	old := n.KeySet().Keys[0].ID
	a, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	id, err := n.RotateKey(ctx)
	if err != nil || id == "" || id == old {
		t.Fatalf("RotateKey = %q, %v", id, err)
	}
	b, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "b", Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if a.Lease.Signed.KeyID != old || b.Lease.Signed.KeyID != id {
		t.Fatalf("signed by %s and %s, want %s then %s", a.Lease.Signed.KeyID, b.Lease.Signed.KeyID, old, id)
	}
	if _, err := n.RetireKey(ctx, id, false); !errorsIsInvalid(err) {
		t.Fatalf("retiring the signing key: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := n.RetireKey(ctx, old, false); err != nil {
		t.Fatal(err)
	}
	ks := n.KeySet()
	li, _ := svc.Get(ctx, "a")
	if li.Lease.Signed.KeyID != old {
		t.Fatalf("Get of a lease granted before the rotation: signed by %s, want %s", li.Lease.Signed.KeyID, old)
	}
	verifySigned(t, ks, "get of the old key's lease", *li.Lease)
	if _, err := svc.Release(ctx, fence.ReleaseRequest{Name: "a", Token: a.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	ks = n.KeySet()
	if len(ks.Keys) != 1 || ks.Keys[0].ID != id {
		t.Fatalf("key set after the retired key's last lease: %+v, want only %s", ks.Keys, id)
	}
	if err := ks.Verify(a.Lease.Signed, "a"); err == nil {
		t.Fatal("a proof of a dropped key still verifies")
	}
}

func errorsIsInvalid(err error) bool { return fence.ReasonOf(err) == fence.ReasonInvalid }

// A node is not ready while its state has no signing key.
func TestNotReadyWithoutSigningKey(t *testing.T) {
	st := Status{Leader: true, InOffice: true, AppliedIndex: 3, CommitIndex: 3, SigningKey: true}
	if !st.Ready() {
		t.Fatal("a leader in office with a key is not ready")
	}
	st.SigningKey = false
	if st.Ready() {
		t.Fatal("a leader without a signing key is ready")
	}
	st = Status{Role: "Follower", LeaderID: "n1", AppliedIndex: 3, CommitIndex: 3}
	if st.Ready() {
		t.Fatal("a follower without a signing key is ready")
	}
}

// R1 across replicas: a new leader answers a Get of a lease granted by
// the old one with the very proof the old one gave (the same key, chosen
// by the log, and deterministic Ed25519), and adds no second key on
// taking office.
func TestClusterNewLeaderSignsAlike(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	ctx := context.Background()
	g, err := lead.node.Service().Acquire(ctx, fence.AcquireRequest{Name: "a", Owner: "o", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tc.caughtUp(tc.members, lead)
	next := tc.others(lead)[0]
	tc.transferTo(next)
	li := getOnceLeader(t, tc, next, "a")
	if li.Lease == nil || li.Lease.Signed.String() != g.Lease.Signed.String() {
		t.Fatalf("the new leader's proof %v, want the old leader's %s", li.Lease, g.Lease.Signed)
	}
	if keys := next.node.SigningKeys(); len(keys) != 1 {
		t.Fatalf("keys after a change of leader: %+v", keys)
	}
}

func errorsIsNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }

// The built-in store checks a write's signed token before it proposes: a
// proof by another cluster's key, by an unknown key under this cluster's
// id, a made-up huge token and a proof moved to another token are each
// refused FORGED_TOKEN, and the resource is unchanged (nothing was
// proposed); the genuine one writes, and a write with no proof is as
// before (UNKNOWN_TOKEN still refuses a never-issued token).
func TestBuiltInStoreVerifiesSignedTokens(t *testing.T) {
	n := openNode(t, t.TempDir())
	svc, ctx := n.Service(), context.Background()
	g, err := svc.Acquire(ctx, fence.AcquireRequest{Name: "res", Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	st, cid := g.Lease.Signed, n.ClusterID()
	stranger := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	moved := st
	moved.Token = st.Token + 1
	for what, bad := range map[string]fence.SignedToken{
		"another cluster's proof":        fence.Sign(stranger, "other-cluster", "res", st.Token),
		"an unknown key, this cluster":   fence.Sign(stranger, cid, "res", st.Token),
		"a made-up huge token":           fence.Sign(stranger, cid, "res", fence.MaxTokenJSONInt),
		"a proof moved to another token": moved,
	} {
		_, err := svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: bad.Token, Value: []byte("x"), Signed: bad})
		if !errors.Is(err, fence.ErrForgedToken) {
			t.Fatalf("%s: %v, want FORGED_TOKEN", what, err)
		}
		if rs, _ := svc.Read(ctx, "res"); rs.Version != 0 || rs.LastToken != 0 {
			t.Fatalf("%s: resource %+v after the refusal, want untouched", what, rs)
		}
	}
	if _, err := svc.Add(ctx, fence.AddRequest{Resource: "res", Token: st.Token, Delta: 1, Signed: fence.Sign(stranger, cid, "res", st.Token)}); !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("add with a forged proof: %v", err)
	}
	if _, err := svc.Delete(ctx, fence.DeleteRequest{Resource: "res", Token: st.Token, Signed: fence.Sign(stranger, cid, "res", st.Token)}); !errors.Is(err, fence.ErrForgedToken) {
		t.Fatalf("delete with a forged proof: %v", err)
	}
	if w, err := svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: st.Token, Value: []byte("ok"), Signed: st}); err != nil || w.State.Version != 1 {
		t.Fatalf("genuine signed write: %+v, %v", w, err)
	}
	if _, err := svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: fence.MaxTokenJSONInt, Value: []byte("x")}); !errors.Is(err, fence.ErrUnknownToken) {
		t.Fatalf("unsigned never-issued token: %v, want UNKNOWN_TOKEN", err)
	}
	if _, err := svc.Write(ctx, fence.WriteRequest{Resource: "res", Token: st.Token + 5, Value: []byte("x"), Signed: st}); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("a signed token of another token than the write's: %v, want INVALID_ARGUMENT", err)
	}
}

// getOnceLeader is Get of name on member m, asked again while m answers
// not-leader (a transfer to it still settling).
func getOnceLeader(t *testing.T, tc *testCluster, m *member, name string) fence.LockInfo {
	t.Helper()
	for {
		li, err := m.node.Service().Get(context.Background(), name)
		if err == nil {
			return li
		}
		if !errorsIsNotLeader(err) {
			t.Fatal(err)
		}
		tc.leader()
	}
}
