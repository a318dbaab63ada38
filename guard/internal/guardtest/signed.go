package guardtest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/proof"
)

// prodKeys is the guard configuration of a guard given Prod's key set.
func prodKeys() Options { return Options{Keys: proof.Config{KeySet: Prod.KeySet()}} }

// WantForged fails t unless err is a *fence.ForgedTokenError naming lock
// (errors.Is fence.ErrForgedToken, reason FORGED_TOKEN).
func WantForged(t *testing.T, err error, lock string) {
	t.Helper()
	var forged *fence.ForgedTokenError
	if !errors.Is(err, fence.ErrForgedToken) || !errors.As(err, &forged) || fence.ReasonOf(err) != fence.ReasonForgedToken {
		t.Fatalf("err = %T %v, want *fence.ForgedTokenError (FORGED_TOKEN)", err, err)
	}
	if forged.Name != lock || forged.Reason == "" {
		t.Fatalf("forged = %+v, want Name %q and a reason", *forged, lock)
	}
}

// testForgedRefused: with Prod's key set, every forgery is refused as
// FORGED_TOKEN by Check, by a guarded write and by Do, and the stored token,
// the data row and the op table are as the honest write left them.
func testForgedRefused(t *testing.T, newStore NewStore) {
	s := newStore(t, prodKeys())
	ctx := context.Background()
	const res = "sku-42"
	if _, err := s.GuardedWriteSigned(ctx, res, Prod.Sign(res, 5), 50); err != nil {
		t.Fatalf("an honest signed write was refused: %v", err)
	}
	for _, f := range Forgeries(res, 6) {
		t.Run(f.Name, func(t *testing.T) {
			WantForged(t, s.CheckSigned(ctx, res, f.Token), res)
			_, err := s.GuardedWriteSigned(ctx, res, f.Token, 666)
			WantForged(t, err, res)
			var applied atomic.Bool
			_, _, err = s.Do(ctx, Op{Resource: res, SignedToken: f.Token, ID: "forged-" + f.Name, Payload: []byte("p")},
				func(write func(int64) error) ([]byte, error) { applied.Store(true); return nil, write(666) })
			WantForged(t, err, res)
			if applied.Load() {
				t.Fatal("Do ran its function for a forged token")
			}
			if got := lastToken(t, s, res); got != 5 {
				t.Fatalf("stored token = %d after a forgery, want 5 (unchanged)", got)
			}
			if v, seq, _, err := s.Data(ctx, res); err != nil || v != 50 || seq != 1 {
				t.Fatalf("data = %d seq %d (%v) after a forgery, want 50 seq 1", v, seq, err)
			}
			if n := opCount(t, s); n != 0 {
				t.Fatalf("%d op records after a forged Do, want 0", n)
			}
		})
	}
	// The honest owner still writes after the forgeries.
	if _, err := s.GuardedWriteSigned(ctx, res, Prod.Sign(res, 6), 60); err != nil {
		t.Fatalf("the honest owner's token 6 was refused after the forgeries: %v", err)
	}
}

// testPausedWorkerSigned: the paused-worker story with signed tokens. A
// holds token 1 and pauses; B is granted token 2 and writes; A wakes and
// writes with token 1: refused STALE_TOKEN with both tokens, B's data stays.
func testPausedWorkerSigned(t *testing.T, newStore NewStore) {
	s := newStore(t, prodKeys())
	ctx := context.Background()
	const res = "sku-42"
	a, b := Prod.Sign(res, 1), Prod.Sign(res, 2)
	if _, err := s.GuardedWriteSigned(ctx, res, b, 20); err != nil {
		t.Fatalf("B's token 2 refused: %v", err)
	}
	_, err := s.GuardedWriteSigned(ctx, res, a, 10)
	wantStale(t, err, res, 1, 2)
	if v, _, _, err := s.Data(ctx, res); err != nil || v != 20 {
		t.Fatalf("data = %d (%v), want B's 20", v, err)
	}
	_, _, err = s.Do(ctx, Op{Resource: res, SignedToken: a, ID: "a-late", Payload: []byte("p")}, noop)
	wantStale(t, err, res, 1, 2)
	if got := lastToken(t, s, res); got != 2 {
		t.Fatalf("stored token = %d, want 2", got)
	}
}

// testUnsignedNeedsAllow: with a key set a bare number is FORGED_TOKEN ("no
// proof"); AllowUnsigned accepts it and still refuses a bad proof.
func testUnsignedNeedsAllow(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s := newStore(t, prodKeys())
	err := s.Check(ctx, "r", 3)
	WantForged(t, err, "r")
	if !strings.Contains(err.Error(), "no proof") {
		t.Fatalf("err = %v, want the reason %q", err, "no proof")
	}
	_, _, err = s.Do(ctx, Op{Resource: "r", Token: 3, ID: "op", Payload: []byte("p")}, noop)
	WantForged(t, err, "r")
	if _, found, err := s.LastToken(ctx, "r"); err != nil || found {
		t.Fatalf("a guard row exists after unsigned tokens were refused (%v)", err)
	}

	allow := prodKeys()
	allow.Keys.AllowUnsigned = true
	s = newStore(t, allow)
	must(t, s.Check(ctx, "r", 3))
	WantForged(t, s.CheckSigned(ctx, "r", Staging.Sign("r", 4)), "r")
	if got := lastToken(t, s, "r"); got != 3 {
		t.Fatalf("stored token = %d, want 3", got)
	}
}

// DocLockFor is the LockFor of docs/guards.md: one-to-one, sku-N to
// stock/N and no other resource to any lock.
func DocLockFor(resource string) string {
	if sku, ok := strings.CutPrefix(resource, "sku-"); ok {
		return "stock/" + sku
	}
	return ""
}

// testLockFor: a resource accepts the proofs of the lock LockFor names,
// and refuses those of the lock of its own name; the documented mapping is
// one-to-one, so resource "42" (which "stock/"+TrimPrefix(r, "sku-") would
// also send to stock/42) refuses stock/42's proof: stock/42's holder
// writes sku-42 only.
func testLockFor(t *testing.T, newStore NewStore) {
	o := prodKeys()
	o.Keys.LockFor = DocLockFor
	s := newStore(t, o)
	ctx := context.Background()
	must(t, s.CheckSigned(ctx, "sku-42", Prod.Sign("stock/42", 7)))
	WantForged(t, s.CheckSigned(ctx, "sku-42", Prod.Sign("sku-42", 8)), "stock/42")
	if got := lastToken(t, s, "sku-42"); got != 7 {
		t.Fatalf("stored token = %d, want 7", got)
	}
	// stock/42's holder cannot write resource "42": outside the mapping,
	// no lock protects it and every proof is refused.
	WantForged(t, s.CheckSigned(ctx, "42", Prod.Sign("stock/42", 9)), "")
	if tok, found, err := s.LastToken(ctx, "42"); err != nil || found {
		t.Fatalf("resource 42: stored token %d (found %v, %v), want none", tok, found, err)
	}
}

// testKeySource: the guard asks its KeySource on every check, so a reloaded
// set takes effect without a new guard; a nil set refuses and changes
// nothing.
func testKeySource(t *testing.T, newStore NewStore) {
	var current atomic.Pointer[fence.KeySet]
	current.Store(Prod.KeySet())
	s := newStore(t, Options{Keys: proof.Config{KeySource: current.Load}})
	ctx := context.Background()
	must(t, s.CheckSigned(ctx, "r", Prod.Sign("r", 1)))
	// Staging's proofs are forged until the operator hands the guard
	// Staging's set (say, a cluster restored and cut over).
	WantForged(t, s.CheckSigned(ctx, "r", Staging.Sign("r", 2)), "r")
	current.Store(Staging.KeySet())
	must(t, s.CheckSigned(ctx, "r", Staging.Sign("r", 2)))
	WantForged(t, s.CheckSigned(ctx, "r", Prod.Sign("r", 3)), "r")
	current.Store(nil)
	if err := s.CheckSigned(ctx, "r", Staging.Sign("r", 3)); !errors.Is(err, proof.ErrNoKeySet) {
		t.Fatalf("with no key set err = %v, want ErrNoKeySet", err)
	}
	if got := lastToken(t, s, "r"); got != 2 {
		t.Fatalf("stored token = %d, want 2", got)
	}
}

// testNoKeySetCompares: without a key set the proof is not looked at: any
// token is compared — including a made-up 2^53-1, which then refuses the
// honest owner (the risk the docs state, and what `fence guard repair`
// undoes).
func testNoKeySetCompares(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	must(t, s.CheckSigned(ctx, "r", Staging.Sign("r", 4)))
	must(t, s.CheckSigned(ctx, "r", fence.SignedToken{Token: fence.MaxTokenJSONInt}))
	wantStale(t, s.CheckSigned(ctx, "r", Prod.Sign("r", 5)), "r", 5, fence.MaxTokenJSONInt)
}
