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
// session (the default) that is renewed after a key rotation is moved by
// the server to the new signing key; its SignedToken must follow, since
// the old key is dropped once it signs no live lease — a retire then
// leaves the lease's old proof naming a key no guard knows.
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
	after := l.SignedToken()
	if after.KeyID != rot.Msg.GetKeyId() || after.Token != l.Token() {
		t.Fatalf("after a renew past a rotation SignedToken is signed by %s (token %d), want the new key %s (token %d)", after.KeyID, after.Token, rot.Msg.GetKeyId(), l.Token())
	}
	// The old key signs no live lease now: retiring it drops it.
	if _, err := keys.RetireKey(ctx, connect.NewRequest(&fencev1.RetireKeyRequest{KeyId: before.KeyID})); err != nil {
		t.Fatal(err)
	}
	ks := keySetAt(t, url)
	if err := ks.Verify(l.SignedToken(), "sess-res"); err != nil {
		t.Fatalf("the lease's signed token after the old key was retired: %v", err)
	}
	if w, err := c.Write(ctx, "sess-res", l.Token(), []byte("x"), client.Signed(l.SignedToken())); err != nil || w.Version != 1 {
		t.Fatalf("signed write after the retire: %+v, %v", w, err)
	}
}
