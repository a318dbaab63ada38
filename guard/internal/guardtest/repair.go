package guardtest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/guard/internal/sqlguard"
)

// testRepair: a store poisoned by made-up tokens (a guard without a key
// set accepted 2^53-1 and 2^52) is repaired: Above finds exactly the rows
// above the ceiling under a prefix, Lower lowers them (once: a second Lower
// of the same reading changes nothing), other rows are untouched, and the
// honest owner's next token writes again.
func testRepair(t *testing.T, newStore NewStore) {
	s := newStore(t, Options{})
	ctx := context.Background()
	const ceiling = 100
	for res, tok := range map[string]fence.Token{"p/a": fence.MaxTokenJSONInt, "p/b": 1 << 52, "q/c": fence.MaxTokenJSONInt, "p/d": 7, "p/e": ceiling} {
		must(t, s.Check(ctx, res, tok))
	}
	wantStale(t, s.Check(ctx, "p/a", ceiling+1), "p/a", ceiling+1, fence.MaxTokenJSONInt)

	got, err := s.Above(ctx, "", "p/", ceiling)
	must(t, err)
	want := []sqlguard.Stored{{Resource: "p/a", Token: fence.MaxTokenJSONInt}, {Resource: "p/b", Token: 1 << 52}}
	if !slices.Equal(got, want) {
		t.Fatalf("Above(prefix p/, %d) = %v, want %v", ceiling, got, want)
	}
	for _, res := range []string{"p/d", "p/e", "nope"} {
		if got, err := s.Above(ctx, res, "", ceiling); err != nil || len(got) != 0 {
			t.Fatalf("Above(%s) = %v, %v; want none (at or below the ceiling, or absent)", res, got, err)
		}
	}
	if got, err := s.Above(ctx, "q/c", "", ceiling); err != nil || len(got) != 1 || got[0].Token != fence.MaxTokenJSONInt {
		t.Fatalf("Above(q/c) = %v, %v", got, err)
	}
	var inv *fence.InvalidError
	if _, err := s.Lower(ctx, want[0], fence.MaxTokenJSONInt); !errors.As(err, &inv) || inv.Field != "ceiling" {
		t.Fatalf("Lower to a ceiling at the stored token: %v, want *fence.InvalidError for ceiling", err)
	}
	if _, err := s.Above(ctx, "", "", 0); !errors.As(err, &inv) || inv.Field != "ceiling" {
		t.Fatalf("Above with ceiling 0: %v, want *fence.InvalidError for ceiling", err)
	}
	for _, st := range want {
		if ok, err := s.Lower(ctx, st, ceiling); err != nil || !ok {
			t.Fatalf("Lower(%v) = %v, %v; want lowered", st, ok, err)
		}
		if ok, err := s.Lower(ctx, st, ceiling); err != nil || ok {
			t.Fatalf("Lower(%v) again = %v, %v; want nothing (the row no longer holds that token)", st, ok, err)
		}
	}
	for res, tok := range map[string]fence.Token{"p/a": ceiling, "p/b": ceiling, "q/c": fence.MaxTokenJSONInt, "p/d": 7, "p/e": ceiling} {
		if got := lastToken(t, s, res); got != tok {
			t.Fatalf("after the repair %s holds %d, want %d", res, got, tok)
		}
	}
	// The honest owner's next token (above the cluster's last) writes again.
	if _, err := s.GuardedWrite(ctx, "p/a", ceiling+1, 1); err != nil {
		t.Fatalf("the honest owner after the repair: %v", err)
	}
}
