package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/bench"
)

// TestSoakModeEndToEnd runs the soak mode for ~20 s — a real 3-node cluster,
// paced cycles, a leader killed and restarted — and checks what the mode
// must produce: no acknowledged write or add missing from the final read
// (the exact check the long soak makes), a restart recorded with the
// restarted node's own restore numbers, samples of every node, the CSV and
// the SVG. It asserts no speed and no target that depends on the machine
// (RSS, snapshot rate, p99: those are the long run's, in
// docs/benchmarks.md).
func TestSoakModeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster for ~20 s")
	}
	dir := t.TempDir()
	cfg := bench.SoakDefaults()
	cfg.Duration, cfg.KillEvery, cfg.SampleEvery = 20*time.Second, 7*time.Second, 2*time.Second
	cfg.Rate, cfg.Workers, cfg.Sessions, cfg.Locks = 60, 4, 2, 4
	cfg.Repo, cfg.Tmp, cfg.Log = "..", dir, logWriter{t}
	cfg.FenceBin = os.Getenv("FENCEBENCH_FENCE_BIN")
	cfg.CSV, cfg.SVG = filepath.Join(dir, "out", "soak.csv"), filepath.Join(dir, "soak.svg")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := bench.RunSoak(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 0 {
		t.Errorf("%d acknowledged writes/adds lost: %v", res.Lost, res.LostExample)
	}
	if res.Cycles == 0 || res.Resources != 2*cfg.Workers*cfg.Locks {
		t.Errorf("cycles %d, resources read back %d (want %d)", res.Cycles, res.Resources, 2*cfg.Workers*cfg.Locks)
	}
	if len(res.Restarts) == 0 {
		t.Fatal("no leader was killed and restarted")
	}
	for _, r := range res.Restarts {
		if r.Err != "" || r.Node == "" || r.KillReady <= 0 {
			t.Errorf("restart %+v", r)
		}
	}
	if len(res.Samples) < 2 {
		t.Fatalf("%d samples", len(res.Samples))
	}
	for _, s := range res.Samples {
		if len(s.Nodes) != cfg.Nodes {
			t.Fatalf("sample at %v has %d nodes", s.At, len(s.Nodes))
		}
	}
	last := res.Samples[len(res.Samples)-1]
	for i, n := range last.Nodes {
		if n.RSS <= 0 || n.OpIDs <= 0 || n.IDMemBytes <= 0 {
			t.Errorf("node %d at the end: %+v (want RSS, remembered op_ids and id memory read)", i+1, n)
		}
	}
	if len(res.Checks) != 6 {
		t.Errorf("%d checks, want 6: %+v", len(res.Checks), res.Checks)
	}
	b, err := os.ReadFile(cfg.CSV)
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(string(b), "\n"); rows != len(res.Samples)+1 {
		t.Errorf("CSV has %d lines, want %d samples + a header", rows, len(res.Samples))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "soak-restarts.csv")); err != nil || strings.Count(string(b), "\n") != len(res.Restarts)+1 {
		t.Errorf("restarts CSV: %v\n%s", err, b)
	}
	svg, err := os.ReadFile(cfg.SVG)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || strings.Count(string(svg), "<polyline") < 2*cfg.Nodes+2 {
		t.Errorf("SVG without its polylines:\n%s", svg)
	}
}
