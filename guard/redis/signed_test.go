package redisguard

import (
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/guardtest"
)

// With Prod's key set every forgery is refused as FORGED_TOKEN by Set, Add
// and Check (with and without an op_id), and the resource — value, token,
// version — and its op keys are as the honest write left them.
func TestSignedForgeriesRefused(t *testing.T) {
	g, rdb := newTestGuard(t, Options{KeySet: guardtest.Prod.KeySet()})
	const res = "sku-42"
	if _, err := g.SetSigned(ctx, res, guardtest.Prod.Sign(res, 5), []byte("50"), ""); err != nil {
		t.Fatalf("an honest signed write was refused: %v", err)
	}
	for _, f := range guardtest.Forgeries(res, 6) {
		t.Run(f.Name, func(t *testing.T) {
			_, err := g.SetSigned(ctx, res, f.Token, []byte("666"), "")
			guardtest.WantForged(t, err, res)
			_, err = g.SetSigned(ctx, res, f.Token, []byte("666"), "op-forged")
			guardtest.WantForged(t, err, res)
			_, err = g.AddSigned(ctx, res, f.Token, 1, "")
			guardtest.WantForged(t, err, res)
			_, err = g.CheckSigned(ctx, res, f.Token)
			guardtest.WantForged(t, err, res)
			wantState(t, g, res, "50", 5, 1)
		})
	}
	if n, err := rdb.Exists(ctx, opKey(g.Prefix(), res, "op-forged")).Result(); err != nil || n != 0 {
		t.Fatalf("the forged write's op key exists (%d, %v)", n, err)
	}
	if _, err := g.SetSigned(ctx, res, guardtest.Prod.Sign(res, 6), []byte("60"), ""); err != nil {
		t.Fatalf("the honest owner's token 6 was refused after the forgeries: %v", err)
	}
	wantState(t, g, res, "60", 6, 2)
}

// The paused-worker story with signed tokens: B's token 2 is accepted, A's
// late token 1 is refused STALE_TOKEN with both tokens.
func TestSignedPausedWorker(t *testing.T) {
	g, _ := newTestGuard(t, Options{KeySet: guardtest.Prod.KeySet()})
	const res = "sku-42"
	if _, err := g.SetSigned(ctx, res, guardtest.Prod.Sign(res, 2), []byte("8"), ""); err != nil {
		t.Fatalf("B's token 2 refused: %v", err)
	}
	_, err := g.SetSigned(ctx, res, guardtest.Prod.Sign(res, 1), []byte("5"), "")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Token != 1 || stale.LastAccepted != 2 {
		t.Fatalf("A's late write: err = %v, want STALE_TOKEN 1 < 2", err)
	}
	wantState(t, g, res, "8", 2, 1)
}

// With a key set a bare number is FORGED_TOKEN ("no proof"); AllowUnsigned
// accepts it and still refuses a bad proof. Without a key set any token is
// compared: the made-up 2^53-1 poisons the resource (the docs' warning).
func TestSignedUnsignedAndNoKeySet(t *testing.T) {
	g, _ := newTestGuard(t, Options{KeySet: guardtest.Prod.KeySet()})
	_, err := g.Set(ctx, "r", 3, []byte("x"), "")
	guardtest.WantForged(t, err, "r")
	if !strings.Contains(err.Error(), "no proof") {
		t.Fatalf("err = %v, want the reason %q", err, "no proof")
	}
	wantState(t, g, "r", "", 0, 0)

	g, _ = newTestGuard(t, Options{KeySet: guardtest.Prod.KeySet(), AllowUnsigned: true,
		LockFor: func(string) string { return "stock" }})
	if _, err := g.Set(ctx, "r", 3, []byte("x"), ""); err != nil {
		t.Fatalf("AllowUnsigned refused an unsigned token: %v", err)
	}
	_, err = g.SetSigned(ctx, "r", guardtest.Prod.Sign("r", 4), []byte("y"), "")
	guardtest.WantForged(t, err, "stock") // LockFor: r is protected by lock "stock"
	if _, err := g.SetSigned(ctx, "r", guardtest.Prod.Sign("stock", 4), []byte("y"), ""); err != nil {
		t.Fatalf("the proof of the mapped lock was refused: %v", err)
	}
	wantState(t, g, "r", "y", 4, 2)

	g, _ = newTestGuard(t, Options{})
	mustSet(t, g, "r", fence.MaxTokenJSONInt, "poison", "")
	if _, err := g.SetSigned(ctx, "r", guardtest.Prod.Sign("r", 5), []byte("honest"), ""); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("without a key set the honest owner after 2^53-1: err = %v, want STALE_TOKEN", err)
	}
}
