package redisguard

import (
	"errors"
	"slices"
	"testing"

	"github.com/fenceworks/fence"
)

// A store poisoned by made-up tokens is repaired: Above finds exactly the
// resources above the ceiling under a prefix, Lower lowers them once (the
// value and version kept), others are untouched, and the honest owner's next
// token writes again.
func TestRepairLowersPoisonedTokens(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	const ceiling = 100
	for res, tok := range map[string]fence.Token{"p/a": fence.MaxTokenJSONInt, "p/b": 1 << 52, "q/c": fence.MaxTokenJSONInt, "p/d": 7, "p/e": ceiling} {
		mustSet(t, g, res, tok, "v", "")
	}
	if _, err := g.Set(ctx, "p/a", ceiling+1, []byte("honest"), ""); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("poisoned: %v, want STALE_TOKEN", err)
	}
	got, err := g.Above(ctx, "", "p/", ceiling)
	want := []Stored{{"p/a", fence.MaxTokenJSONInt}, {"p/b", 1 << 52}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Above(prefix p/) = %v, %v; want %v", got, err, want)
	}
	for _, res := range []string{"p/d", "p/e", "nope"} {
		if got, err := g.Above(ctx, res, "", ceiling); err != nil || len(got) != 0 {
			t.Fatalf("Above(%s) = %v, %v; want none", res, got, err)
		}
	}
	var inv *fence.InvalidError
	if _, err := g.Lower(ctx, want[0], fence.MaxTokenJSONInt); !errors.As(err, &inv) || inv.Field != "ceiling" {
		t.Fatalf("Lower to the stored token: %v, want *fence.InvalidError for ceiling", err)
	}
	for _, st := range want {
		if ok, err := g.Lower(ctx, st, ceiling); err != nil || !ok {
			t.Fatalf("Lower(%v) = %v, %v", st, ok, err)
		}
		if ok, err := g.Lower(ctx, st, ceiling); err != nil || ok {
			t.Fatalf("Lower(%v) again = %v, %v; want nothing", st, ok, err)
		}
	}
	wantState(t, g, "p/a", "v", ceiling, 1)
	wantState(t, g, "q/c", "v", fence.MaxTokenJSONInt, 1)
	wantState(t, g, "p/d", "v", 7, 1)
	mustSet(t, g, "p/a", ceiling+1, "honest", "")
	wantState(t, g, "p/a", "honest", ceiling+1, 2)
}
