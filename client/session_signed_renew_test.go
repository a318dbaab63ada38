package client_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

// TestSessionLeaseRenewUpdatesSignedToken: a lease bound to the client's
// session (the default) keeps the key it was granted under across a
// rotation (its renew hands back the same proof); once that key is retired
// --now (a leak), the server signs the lease with the new key, and the
// next renew's proof must replace the one the lease holds: the old one
// names a key no guard knows any more.
func TestSessionLeaseRenewUpdatesSignedToken(t *testing.T) {
	url, _ := testServer(t)
	ctx := context.Background()
	c, err := client.New(url) // with a session: the lease is bound to it
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Acquire(ctx, "sess-res")
	if err != nil {
		t.Fatal(err)
	}
	before := l.SignedToken()
	if !before.Signed() {
		t.Fatalf("session lease signed token %v: no proof", before)
	}
	keys := fencev1connect.NewKeyServiceClient(http.DefaultClient, url)
	rot, err := keys.RotateKey(ctx, connect.NewRequest(&fencev1.RotateKeyRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if kept := l.SignedToken(); kept.String() != before.String() {
		t.Fatalf("after a renew past a rotation SignedToken is %s, want the grant's own proof %s", kept, before)
	}
	// The old key leaks: retired at once, its live lease moves.
	if _, err := keys.RetireKey(ctx, connect.NewRequest(&fencev1.RetireKeyRequest{KeyId: before.KeyID, Force: true})); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	after := l.SignedToken()
	if after.KeyID != rot.Msg.GetKeyId() || after.Token != l.Token() {
		t.Fatalf("after a renew past retire --now SignedToken is signed by %s (token %d), want the new key %s (token %d)", after.KeyID, after.Token, rot.Msg.GetKeyId(), l.Token())
	}
	ks := keySetAt(t, url)
	if err := ks.Verify(l.SignedToken(), "sess-res"); err != nil {
		t.Fatalf("the lease's signed token after the old key was retired: %v", err)
	}
	if w, err := c.Write(ctx, "sess-res", l.Token(), []byte("x"), client.Signed(l.SignedToken())); err != nil || w.Version != 1 {
		t.Fatalf("signed write after the retire: %+v, %v", w, err)
	}
}
