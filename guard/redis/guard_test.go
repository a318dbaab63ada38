package redisguard

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

var ctx = context.Background()

func mustSet(t *testing.T, g *Guard, res string, tok fence.Token, v, op string) Result {
	t.Helper()
	r, err := g.Set(ctx, res, tok, []byte(v), op)
	if err != nil {
		t.Fatalf("Set(%q, %d, %q, %q): %v", res, tok, v, op, err)
	}
	return r
}

func wantState(t *testing.T, g *Guard, res string, value string, tok fence.Token, version int64) {
	t.Helper()
	st, err := g.Get(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Value) != value || st.Token != tok || st.Version != version {
		t.Fatalf("state of %q = {%q, token %d, version %d}, want {%q, token %d, version %d}",
			res, st.Value, st.Token, st.Version, value, tok, version)
	}
}

// The story's timeline on Redis: B writes 8 with token 2, A's late 5 with
// token 1 is refused naming both tokens, B writes again with token 2.
func TestStoryTimeline(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	wantState(t, g, "sku-42", "", 0, 0)
	if r := mustSet(t, g, "sku-42", 2, "8", ""); r.Token != 2 || r.Version != 1 || string(r.Value) != "8" || r.Replayed {
		t.Fatalf("B's write: %+v", r)
	}
	_, err := g.Set(ctx, "sku-42", 1, []byte("5"), "")
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) {
		t.Fatalf("A's late write: err = %v, want a *fence.StaleTokenError", err)
	}
	if stale.Token != 1 || stale.LastAccepted != 2 || stale.Resource != "sku-42" {
		t.Fatalf("stale error facts = %+v", stale)
	}
	if err.Error() != "token 1 is older than accepted token 2" {
		t.Fatalf("message = %q", err)
	}
	wantState(t, g, "sku-42", "8", 2, 1)
	mustSet(t, g, "sku-42", 2, "9", "") // equal token accepted
	wantState(t, g, "sku-42", "9", 2, 2)
	mustSet(t, g, "sku-42", 3, "10", "") // newer accepted
	wantState(t, g, "sku-42", "10", 3, 3)
}

func TestAdd(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	r, err := g.Add(ctx, "n", 1, 5, "")
	if err != nil || r.Sum != 5 || r.Token != 1 || r.Version != 1 {
		t.Fatalf("Add 5 = %+v, %v", r, err)
	}
	r, err = g.Add(ctx, "n", 1, -7, "")
	if err != nil || r.Sum != -2 || string(r.Value) != "-2" {
		t.Fatalf("Add -7 = %+v, %v", r, err)
	}
	if _, err = g.Add(ctx, "n", 0, 1, ""); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("token 0: %v", err)
	}
	mustSet(t, g, "n", 2, "9223372036854775807", "")
	_, err = g.Add(ctx, "n", 2, 1, "")
	var inv *fence.InvalidError
	if !errors.As(err, &inv) || inv.Field != "value" {
		t.Fatalf("overflow: err = %v, want *fence.InvalidError on value", err)
	}
	wantState(t, g, "n", "9223372036854775807", 2, 3)
}

// A refused or failing call changes neither the value nor the token.
func TestRefusalsChangeNothing(t *testing.T) {
	g, rdb := newTestGuard(t, Options{})
	mustSet(t, g, "r", 5, "text", "")
	_, err := g.Add(ctx, "r", 6, 1, "op-add") // value is not an integer
	if !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("add on text: %v", err)
	}
	if _, err := g.Set(ctx, "r", 4, []byte("old"), "op-stale"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale set: %v", err)
	}
	if _, err := g.Add(ctx, "r", 4, 1, ""); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale add: %v", err)
	}
	if _, err := g.Check(ctx, "r", 3); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale check: %v", err)
	}
	// Arguments the Go side would refuse, sent to the script directly: the
	// script validates them itself.
	key := resourceKey(g.Prefix(), "r")
	for _, args := range [][]any{
		{"set", "abc", "v", 1000, 0},
		{"set", "0", "v", 1000, 0},
		{"set", "9007199254740992", "v", 1000, 0},
		{"set", "7", "v", "-1", 0},
		{"set", "7", "v", 1000, "x"},
		{"add", "7", "1.5", 1000, 0},
		{"add", "7", "", 1000, 0},
		{"drop", "7", "v", 1000, 0},
		{"check", "7", "v", 1000, 0},
	} {
		reply, err := guardScript.Run(ctx, rdb, []string{key}, args...).Slice()
		if err != nil || len(reply) == 0 || reply[0] != "INVALID" {
			t.Errorf("script%v = %v, %v; want an INVALID reply", args, reply, err)
		}
	}
	wantState(t, g, "r", "text", 5, 1)
	for _, op := range []string{"op-add", "op-stale"} {
		if n := rdb.Exists(ctx, opKey(g.Prefix(), "r", op)).Val(); n != 0 {
			t.Errorf("refused op %q was remembered", op)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	long := string(bytes.Repeat([]byte("x"), fence.MaxNameBytes+1))
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"empty resource", func() error { _, err := g.Set(ctx, "", 1, nil, ""); return err }(), "resource"},
		{"long resource", func() error { _, err := g.Set(ctx, long, 1, nil, ""); return err }(), "resource"},
		{"token 0", func() error { _, err := g.Set(ctx, "r", 0, nil, ""); return err }(), "token"},
		{"token 2^53", func() error { _, err := g.Check(ctx, "r", 1<<53); return err }(), "token"},
		{"big value", func() error {
			_, err := g.Set(ctx, "r", 1, make([]byte, fence.MaxValueBytes+1), "")
			return err
		}(), "value"},
		{"long op_id", func() error { _, err := g.Add(ctx, "r", 1, 1, string(make([]byte, 257))); return err }(), "op_id"},
		{"bad utf8", func() error { _, err := g.Get(ctx, "\xff"); return err }(), "resource"},
	}
	for _, c := range cases {
		var inv *fence.InvalidError
		if !errors.As(c.err, &inv) || inv.Field != c.field {
			t.Errorf("%s: err = %v, want *fence.InvalidError on %s", c.name, c.err, c.field)
		}
	}
	for _, o := range []Options{{Prefix: "a{b"}, {Prefix: "a*"}, {OpTTL: -time.Second}, {OpTTL: time.Microsecond}, {KeyTTL: -1}} {
		if _, err := New(g.rdb, o); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want invalid", o, err)
		}
	}
	// The edges of the prefix and TTL rules.
	for _, o := range []Options{
		{Prefix: strings.Repeat("p", MaxPrefixBytes)},
		{Prefix: "azAZ09._-:/"},
		{KeyTTL: time.Millisecond, OpTTL: time.Millisecond},
		{WaitReplicas: 1, WaitTimeout: time.Millisecond},
	} {
		if _, err := New(g.rdb, o); err != nil {
			t.Errorf("New(%+v) = %v, want accepted", o, err)
		}
	}
	for _, p := range []string{strings.Repeat("p", MaxPrefixBytes+1), "a`", "a@", "a[", "a{", "a~", "a b", "a*", "a?", "ä"} {
		var inv *fence.InvalidError
		if _, err := New(g.rdb, Options{Prefix: p}); !errors.As(err, &inv) || inv.Field != "prefix" {
			t.Errorf("prefix %q: %v, want invalid prefix", p, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("New(nil) = %v", err)
	}
	wantState(t, g, "r", "", 0, 0)
}

func TestCheckAdvancesTokenOnly(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	mustSet(t, g, "r", 2, "v", "")
	r, err := g.Check(ctx, "r", 4)
	if err != nil || r.Token != 4 || r.Version != 1 {
		t.Fatalf("Check 4 = %+v, %v", r, err)
	}
	if _, err := g.Check(ctx, "r", 4); err != nil {
		t.Fatalf("equal Check: %v", err)
	}
	wantState(t, g, "r", "v", 4, 1)
	if _, err := g.Set(ctx, "r", 3, []byte("w"), ""); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Set 3 after Check 4: %v", err)
	}
	if r, err := g.Check(ctx, "fresh", 1); err != nil || r.Token != 1 {
		t.Fatalf("Check on a fresh resource = %+v, %v", r, err)
	}
}
