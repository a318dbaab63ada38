package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

// keySetAt reads the public key set a server publishes (GET /v1/keys, no
// credentials).
func keySetAt(t *testing.T, url string) *fence.KeySet {
	t.Helper()
	resp, err := http.Get(url + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/keys: %d %s", resp.StatusCode, b)
	}
	ks, err := fence.ParseKeySet(b)
	if err != nil {
		t.Fatalf("GET /v1/keys: %v: %s", err, b)
	}
	return ks
}

// G9 end to end over a real server: a lease hands out its signed token, which
// verifies under the published key set; the built-in store refuses a
// write whose proof does not hold (tampered, another lock's) with
// fence.ErrForgedToken and changes nothing, and takes the genuine one; a
// rotation (KeyService) makes later grants signed by the new key.
func TestSignedTokensEndToEnd(t *testing.T) {
	url, _ := testServer(t)
	ctx := context.Background()
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ks := keySetAt(t, url)
	l, err := c.Acquire(ctx, "res", client.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	st := l.SignedToken()
	if !st.Signed() || st.Token != l.Token() {
		t.Fatalf("lease signed token %v, token %d", st, l.Token())
	}
	if err := ks.Verify(st, "res"); err != nil {
		t.Fatal(err)
	}
	other, err := c.Acquire(ctx, "other", client.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tampered := st
	tampered.Signature = append([]byte(nil), st.Signature...)
	tampered.Signature[0] ^= 1
	otherLocks := other.SignedToken()
	otherLocks.Token = st.Token // a proof of lock "other", offered for "res"
	for what, bad := range map[string]fence.SignedToken{"tampered": tampered, "another lock's proof": otherLocks} {
		_, err := c.Write(ctx, "res", st.Token, []byte("x"), client.Signed(bad))
		var forged *fence.ForgedTokenError
		if !errors.Is(err, fence.ErrForgedToken) || !errors.As(err, &forged) || forged.Name != "res" || forged.Token != st.Token {
			t.Fatalf("%s: write = %v, want a *fence.ForgedTokenError for res, token %d", what, err, st.Token)
		}
		if r, err := c.Read(ctx, "res"); err != nil || r.Version != 0 {
			t.Fatalf("%s: resource after the refusal %+v, %v; want it untouched", what, r, err)
		}
	}
	if w, err := c.Write(ctx, "res", st.Token, []byte("ok"), client.Signed(st)); err != nil || w.Version != 1 {
		t.Fatalf("genuine signed write: %+v, %v", w, err)
	}

	keys := fencev1connect.NewKeyServiceClient(http.DefaultClient, url)
	rot, err := keys.RotateKey(ctx, connect.NewRequest(&fencev1.RotateKeyRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Acquire(ctx, "later", client.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if id := after.SignedToken().KeyID; id != rot.Msg.GetKeyId() || id == st.KeyID {
		t.Fatalf("a grant after the rotation signed by %s, want the new key %s", id, rot.Msg.GetKeyId())
	}
	ks = keySetAt(t, url)
	for _, s := range []fence.SignedToken{st, after.SignedToken()} {
		if err := ks.Verify(s, map[bool]string{true: "res", false: "later"}[s.Token == st.Token]); err != nil {
			t.Fatalf("after the rotation: %v", err)
		}
	}
	if _, err := keys.RetireKey(ctx, connect.NewRequest(&fencev1.RetireKeyRequest{KeyId: rot.Msg.GetKeyId()})); !errors.Is(fenceErr(err), fence.ErrInvalid) {
		t.Fatalf("retiring the active key: %v, want INVALID_ARGUMENT", err)
	}
}

// fenceErr decodes a KeyService error (the raw Connect client does not).
func fenceErr(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument {
		return fence.ErrInvalid
	}
	return err
}

// The JSON API gives the signed token too (the JSON codec is the proto's).
func TestSignedTokenInJSON(t *testing.T) {
	url, _ := testServer(t)
	resp, err := http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name":"j","ttl":"30s"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Lease struct {
			Token       uint64
			SignedToken string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	st, err := fence.ParseSignedToken(out.Lease.SignedToken)
	if err != nil || !st.Signed() || uint64(st.Token) != out.Lease.Token {
		t.Fatalf("JSON lease %+v: %v", out.Lease, err)
	}
	if err := keySetAt(t, url).Verify(st, "j"); err != nil {
		t.Fatal(err)
	}
}
