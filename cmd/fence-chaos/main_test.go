package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/chaos"
)

func writeHistory(t *testing.T, dir, name string, ops ...chaos.Op) {
	t.Helper()
	rec, err := chaos.NewRecorder(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if err := rec.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}

// history: two owners of sku-0 write in turn; with stale set, the first
// owner's late write (token 1) lands after the second's (token 2). plain
// makes them the control run's unfenced PostgreSQL writes.
func history(t *testing.T, stale, plain bool) string {
	dir := t.TempDir()
	w := func(n int, tok uint64, val int64, ver uint64, at int64) chaos.Op {
		op := chaos.Op{Worker: int(tok), N: n, Kind: chaos.KindWrite, Store: chaos.StoreFence, Res: "stock/sku-0",
			Fenced: true, Token: tok, Value: val, Call: at, Return: at + 10, Out: chaos.OutcomeOK, Version: ver, LastToken: tok}
		if plain {
			op.Store, op.Res, op.Fenced = chaos.StorePostgres, "sku-0", false
		}
		return op
	}
	ops := []chaos.Op{w(1, 1, 9, 1, 100), w(1, 2, 8, 2, 200)}
	final := chaos.Op{Worker: -1, Kind: chaos.KindFinal, Store: chaos.StoreFence, Res: "stock/sku-0",
		Call: 1000, Return: 1010, Out: chaos.OutcomeOK, ResValue: 8, LastToken: 2, Version: 2}
	if plain {
		final.Store, final.Res = chaos.StorePostgres, "sku-0"
	}
	if stale {
		late := w(2, 1, 7, 3, 300)
		late.LastToken = 1
		ops = append(ops, late)
		final.ResValue, final.LastToken, final.Version = 7, 1, 3
	}
	writeHistory(t, dir, "history-0.jsonl", ops...)
	writeHistory(t, dir, "final.jsonl", final)
	return dir
}

func TestCheckSubcommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"clean", []string{"check", history(t, false, false)}, 0, "stale_accepted=0"},
		{"stale", []string{"check", history(t, true, false)}, 1, "stale_accepted=1"},
		{"control catches", []string{"check", "-control", history(t, true, true)}, 0, "stale_accepted=1"},
		{"control without hazard", []string{"check", "-control", history(t, false, true)}, 1, "stale_accepted=0"},
		{"final reads missing", []string{"check", func() string {
			d := history(t, false, false)
			if err := os.Remove(filepath.Join(d, "final.jsonl")); err != nil {
				t.Fatal(err)
			}
			return d
		}()}, 1, "missing_final=1"},
		{"no dir", []string{"check"}, 2, ""},
		{"empty dir", []string{"check", t.TempDir()}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := realMain(tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.out)
			}
		})
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := realMain([]string{"run", "-faults", "worker-pause,meteor"}, &out, &errb); code != 2 {
		t.Fatalf("unknown fault kind: exit %d, want 2 (stderr %q)", code, errb.String())
	}
	if !strings.Contains(errb.String(), `"meteor"`) {
		t.Errorf("stderr %q does not name the unknown kind", errb.String())
	}
	if code := realMain([]string{"run", "-duration", "soon"}, &out, &errb); code != 2 {
		t.Fatalf("bad duration: exit %d, want 2", code)
	}
	errb.Reset()
	if code := realMain([]string{"run", "-nodes", "2"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want 1, 3 or 5") {
		t.Fatalf("-nodes 2: exit %d, stderr %q; want 2", code, errb.String())
	}
	errb.Reset()
	if code := realMain([]string{"run", "-faults", "leader-kill"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "needs a cluster") {
		t.Fatalf("a cluster fault on one node: exit %d, stderr %q; want 2", code, errb.String())
	}
	// an -out dir with a run in it: histories of two runs would mix
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "history-0.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := realMain([]string{"run", "-out", used, "-duration", "1s"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "not empty") {
		t.Fatalf("non-empty -out: exit %d, stderr %q; want 2 naming it", code, errb.String())
	}
}
