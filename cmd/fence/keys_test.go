//go:build e2e

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// The CLI's signed path: acquire --json prints signedToken, fence run
// hands FENCE_SIGNED_TOKEN to its child (FENCE_TOKEN stays numeric), and
// both verify under the key set fence keys --json prints; fence keys
// rotate adds the signing key, fence keys lists it, fence keys retire
// refuses the active key and retires an old one.
func TestKeysCLI(t *testing.T) {
	srv := startServe(t)
	keySet := func() *fence.KeySet {
		t.Helper()
		r := fenceRun(t, srv.url, "keys", "--json").want(t, 0, "keys --json")
		ks, err := fence.ParseKeySet([]byte(r.stdout))
		if err != nil {
			t.Fatalf("keys --json: %v: %s", err, r.stdout)
		}
		return ks
	}
	ks := keySet()
	if len(ks.Keys) != 1 {
		t.Fatalf("a new server's key set %+v, want one key", ks)
	}
	a := fenceRun(t, srv.url, "acquire", "sku", "--ttl", "30s", "--json").want(t, 0, "acquire --json")
	var got struct {
		Token       uint64
		SignedToken string
	}
	if err := json.Unmarshal([]byte(a.stdout), &got); err != nil {
		t.Fatalf("acquire --json %q: %v", a.stdout, err)
	}
	st, err := fence.ParseSignedToken(got.SignedToken)
	if err != nil || uint64(st.Token) != got.Token {
		t.Fatalf("acquire --json signedToken %q: %v", got.SignedToken, err)
	}
	if err := ks.Verify(st, "sku"); err != nil {
		t.Fatal(err)
	}
	r := fenceRun(t, srv.url, "run", "job", "--ttl", "5s", "--", "sh", "-c", `echo "$FENCE_TOKEN $FENCE_SIGNED_TOKEN"`).want(t, 0, "run")
	num, signed, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
	st, err = fence.ParseSignedToken(signed)
	if err != nil || st.Token.String() != num {
		t.Fatalf("run's child saw FENCE_TOKEN=%q FENCE_SIGNED_TOKEN=%q: %v", num, signed, err)
	}
	if err := ks.Verify(st, "job"); err != nil {
		t.Fatal(err)
	}

	old := ks.Keys[0].ID
	rot := fenceRun(t, srv.url, "keys", "rotate", "--json").want(t, 0, "keys rotate")
	var rj struct{ KeyID string }
	if err := json.Unmarshal([]byte(rot.stdout), &rj); err != nil || rj.KeyID == "" || rj.KeyID == old {
		t.Fatalf("keys rotate --json %q: %v", rot.stdout, err)
	}
	table := fenceRun(t, srv.url, "keys").want(t, 0, "keys")
	if !strings.Contains(table.stdout, old+"  verify-only") || !strings.Contains(table.stdout, rj.KeyID+"  active") {
		t.Fatalf("keys table:\n%s\nwant %s verify-only and %s active", table.stdout, old, rj.KeyID)
	}
	fenceRun(t, srv.url, "keys", "retire", rj.KeyID).want(t, exitUsage, "retiring the active key")
	if r := fenceRun(t, srv.url, "keys", "retire", rj.KeyID, "--now").want(t, exitUsage, "retiring the active key --now"); !strings.Contains(r.stderr, "rotate first") {
		t.Fatalf("retire --now of the active key: %q, want it to say rotate first", r.stderr)
	}
	fenceRun(t, srv.url, "keys", "rotate", "--now").want(t, exitUsage, "--now without retire")
	fenceRun(t, srv.url, "keys", "retire", old).want(t, 0, "retire the old key")
	// sku's lease still holds a proof by the old key: it stays published.
	if ks := keySet(); len(ks.Keys) != 2 {
		t.Fatalf("key set after retiring a key with a live lease: %+v", ks)
	}
}
