package sqlguard

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
)

func TestParseIdent(t *testing.T) {
	good := map[string]string{
		"fence_guard":     `"fence_guard"`,
		"app.fence_guard": `"app"."fence_guard"`,
		"_T1":             `"_T1"`,
	}
	for in, want := range good {
		parts, err := ParseIdent("table", in)
		if err != nil || Quote(parts) != want {
			t.Errorf("ParseIdent(%q) = %v, %v; want %s", in, parts, err, want)
		}
	}
	for _, in := range []string{"", "1abc", "a.b.c", `a"; DROP TABLE x; --`, "a b", "a.", ".a", "ä", strings.Repeat("a", 64)} {
		_, err := ParseIdent("table", in)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "table" || inv.Bound == "" {
			t.Errorf("ParseIdent(%q) err = %v, want *fence.InvalidError for field table", in, err)
		}
	}
}

func TestExplainNoRows(t *testing.T) {
	if err := ExplainNoRows("k", 3, false, 0); !errors.Is(err, ErrNoRow) {
		t.Errorf("missing row: %v", err)
	}
	err := ExplainNoRows("k", 3, true, 5)
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || *stale != (fence.StaleTokenError{Resource: "k", Token: 3, LastAccepted: 5}) {
		t.Errorf("newer row token: %v", err)
	}
	for _, current := range []fence.Token{2, 3} {
		if err := ExplainNoRows("k", 3, true, current); !errors.Is(err, ErrNoMatch) || errors.Is(err, fence.ErrStaleToken) {
			t.Errorf("row token %d not newer: %v, want ErrNoMatch", current, err)
		}
	}
}

func TestReplay(t *testing.T) {
	h := PayloadHash([]byte("a"))
	if res, err := Replay("op", h, PayloadHash([]byte("a")), []byte("r")); err != nil || string(res) != "r" {
		t.Errorf("same payload: %q, %v", res, err)
	}
	var conflict *fence.OpConflictError
	if _, err := Replay("op", h, PayloadHash([]byte("b")), nil); !errors.As(err, &conflict) || conflict.Field != "op_id" || conflict.ID != "op" {
		t.Errorf("other payload: %v", err)
	}
}

func TestPruner(t *testing.T) {
	count := func(p *Pruner, calls int) (due int) {
		for range calls {
			if p.Due() {
				due++
			}
		}
		return due
	}
	if got := count(NewPruner(3), 9); got != 3 {
		t.Errorf("every 3 over 9 calls: %d due, want 3", got)
	}
	if got := count(NewPruner(0), 2*DefaultPruneEvery); got != 2 {
		t.Errorf("default over 2×%d calls: %d due, want 2", DefaultPruneEvery, got)
	}
	if got := count(NewPruner(-1), 100); got != 0 {
		t.Errorf("disabled: %d due, want 0", got)
	}
}

func TestValidateOp(t *testing.T) {
	if err := ValidateOp("r", 1, "op"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		res, op, field string
		tok            fence.Token
	}{
		{"", "op", "resource", 1},
		{"r", "op", "token", 0},
		{"r", "", "op_id", 1},
		{"r", strings.Repeat("x", fence.MaxIDBytes+1), "op_id", 1},
	} {
		var inv *fence.InvalidError
		if err := ValidateOp(c.res, c.tok, c.op); !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("ValidateOp(%q, %d, %q) = %v, want invalid %s", c.res, c.tok, c.op, err, c.field)
		}
	}
}

func TestResolveTables(t *testing.T) {
	got, err := ResolveTables("", "", 0)
	if err != nil || Quote(got.Table) != `"fence_guard"` || Quote(got.Ops) != `"fence_ops"` ||
		got.OpsIndex != "fence_ops_created_at_idx" || got.Retention != DefaultRetention {
		t.Fatalf("defaults: %+v, %v", got, err)
	}
	got, err = ResolveTables("app.guard", "app.ops", time.Hour)
	if err != nil || Quote(got.Table) != `"app"."guard"` || Quote(got.Ops) != `"app"."ops"` || got.OpsIndex != "ops_created_at_idx" || got.Retention != time.Hour {
		t.Fatalf("schema-qualified: %+v, %v", got, err)
	}
	long, err := ResolveTables("", strings.Repeat("o", MaxIdentBytes), 0)
	if err != nil || len(long.OpsIndex) != MaxIdentBytes {
		t.Fatalf("a long ops table: index %q, %v; want it cut to %d bytes", long.OpsIndex, err, MaxIdentBytes)
	}
	for _, tc := range []struct {
		table, ops string
		retention  time.Duration
		field      string
	}{
		{"no;such", "", 0, "table"},
		{"", "bad table", 0, "ops_table"},
		{"", "", -time.Second, "retention"},
	} {
		_, err := ResolveTables(tc.table, tc.ops, tc.retention)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("ResolveTables(%q, %q, %v) = %v; want *fence.InvalidError on %s", tc.table, tc.ops, tc.retention, err, tc.field)
		}
	}
}
