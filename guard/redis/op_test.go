package redisguard

import (
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestOpIDAppliesOnce(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	first, err := g.Add(ctx, "stock", 2, 3, "op-1")
	if err != nil || first.Sum != 3 || first.Replayed {
		t.Fatalf("first Add = %+v, %v", first, err)
	}
	mustSet(t, g, "other", 2, "x", "op-1") // op_ids are per resource
	again, err := g.Add(ctx, "stock", 2, 3, "op-1")
	if err != nil || !again.Replayed || again.Sum != 3 || again.Token != 2 || again.Version != first.Version {
		t.Fatalf("repeat = %+v, %v; want the saved result %+v, replayed", again, err, first)
	}
	wantState(t, g, "stock", "3", 2, 1)

	// The replay check comes before the token check: after a newer owner
	// wrote, the old owner's retry still learns its write was applied.
	if _, err := g.Add(ctx, "stock", 3, 10, ""); err != nil {
		t.Fatal(err)
	}
	late, err := g.Add(ctx, "stock", 2, 3, "op-1")
	if err != nil || !late.Replayed || late.Sum != 3 || late.Version != 1 {
		t.Fatalf("replay after a newer token = %+v, %v", late, err)
	}
	wantState(t, g, "stock", "13", 3, 2)

	s1 := mustSet(t, g, "doc", 1, "hello", "op-s")
	s2 := mustSet(t, g, "doc", 1, "hello", "op-s")
	if !s2.Replayed || s2.Version != s1.Version || string(s2.Value) != "hello" {
		t.Fatalf("Set replay = %+v", s2)
	}
	wantState(t, g, "doc", "hello", 1, 1)
}

func TestOpIDConflict(t *testing.T) {
	g, _ := newTestGuard(t, Options{})
	mustSet(t, g, "r", 2, "8", "op-x")
	for name, call := range map[string]func() error{
		"other value": func() error { _, err := g.Set(ctx, "r", 2, []byte("9"), "op-x"); return err },
		"other token": func() error { _, err := g.Set(ctx, "r", 3, []byte("8"), "op-x"); return err },
		"other op":    func() error { _, err := g.Add(ctx, "r", 2, 8, "op-x"); return err },
	} {
		err := call()
		var conflict *fence.OpConflictError
		if !errors.As(err, &conflict) || conflict.Field != "op_id" || conflict.ID != "op-x" || !errors.Is(err, fence.ErrOpConflict) {
			t.Errorf("%s: err = %v, want *fence.OpConflictError{op_id, op-x}", name, err)
		}
	}
	wantState(t, g, "r", "8", 2, 1)
}

// Op records expire after OpTTL; resource keys have no TTL unless KeyTTL.
func TestKeyExpiry(t *testing.T) {
	g, rdb := newTestGuard(t, Options{OpTTL: 5 * time.Second})
	mustSet(t, g, "r", 1, "v", "op-1")
	if pttl := rdb.PTTL(ctx, opKey(g.Prefix(), "r", "op-1")).Val(); pttl <= 0 || pttl > 5*time.Second {
		t.Fatalf("op record PTTL = %v, want in (0, 5s]", pttl)
	}
	if pttl := rdb.PTTL(ctx, resourceKey(g.Prefix(), "r")).Val(); pttl != -1 {
		t.Fatalf("resource key PTTL = %v, want none (-1)", pttl)
	}
	// After expiry (deleted here instead of waiting) the op_id is forgotten.
	rdb.Del(ctx, opKey(g.Prefix(), "r", "op-1"))
	if r := mustSet(t, g, "r", 1, "v", "op-1"); r.Replayed || r.Version != 2 {
		t.Fatalf("after expiry = %+v, want applied again", r)
	}

	g2, err := New(rdb, Options{Prefix: g.Prefix(), KeyTTL: time.Hour, AcceptVolatile: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	mustSet(t, g2, "k", 1, "v", "")
	if pttl := rdb.PTTL(ctx, resourceKey(g.Prefix(), "k")).Val(); pttl <= 0 || pttl > time.Hour {
		t.Fatalf("resource key PTTL with KeyTTL = %v, want in (0, 1h]", pttl)
	}
}

// After SCRIPT FLUSH the next call falls back from EVALSHA to EVAL.
func TestScriptReloadedAfterFlush(t *testing.T) {
	g, rdb := newTestGuard(t, Options{})
	mustSet(t, g, "r", 1, "a", "")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustSet(t, g, "r", 1, "b", "")
	if ok := rdb.ScriptExists(ctx, guardScript.Hash()).Val(); len(ok) != 1 || !ok[0] {
		t.Fatalf("script not cached again after EVAL: %v", ok)
	}
	wantState(t, g, "r", "b", 1, 2)
}
