package bench_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/bench"
)

// The workloads 4–5 client runs as a child process; in the test it is this
// test binary.
func TestMain(m *testing.M) {
	if bench.IsChild() {
		os.Exit(bench.ChildMain())
	}
	os.Exit(m.Run())
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSmoke runs the whole runner with tiny counts against real processes —
// fence built from this checkout, etcd built from this module, two
// redis-server — and checks only that every system produced results in
// every workload without errors. It asserts no speed.
func TestSmoke(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("!!! SKIPPING: redis-server not found (%v)", err)
	}
	cfg := bench.ForMode("smoke")
	cfg.Repo, cfg.BenchDir = "..", "."
	cfg.Tmp = t.TempDir()
	cfg.Log = logWriter{t}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ChildExe = exe
	// A prebuilt fence (for running this test against another checkout's
	// binary); by default the test builds ../cmd/fence.
	cfg.FenceBin = os.Getenv("FENCEBENCH_FENCE_BIN")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	want := bench.Registered()
	if len(rep.Systems) != len(want) {
		t.Errorf("ran systems %v, want every registered one %v", rep.Systems, want)
	}
	md := rep.Markdown(bench.Environment(cfg), "go test ./bench")
	for _, sys := range rep.Systems {
		if n := strings.Count(md, "| "+sys+" |"); n < 3 {
			t.Errorf("report has %d rows for %s, want one per table:\n%s", n, sys, md)
		}
	}
	if strings.Contains(md, "failed") {
		t.Errorf("report shows a failed run:\n%s", md)
	}
}

// TestWriteSection keeps everything outside the markers and replaces what is
// between them.
func TestWriteSection(t *testing.T) {
	path := t.TempDir() + "/b.md"
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nold text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench.WriteSection(path, "first\n"); err != nil {
		t.Fatal(err)
	}
	if err := bench.WriteSection(path, "second\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := "# Benchmarks\n\nold text\n\n" + bench.BeginMarker + "\nsecond\n" + bench.EndMarker + "\n"
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	if err := os.WriteFile(path, []byte("a\n"+bench.BeginMarker+"\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := bench.WriteSection(path, "y"); err == nil {
		t.Fatal("a begin marker without an end marker was accepted")
	}
}

// TestSmokeCluster runs the cluster mode with tiny counts: workload 1 at
// one client against a 3-node Fence and a 3-node etcd (every node its own
// process), then one failover run per system (kill -9 of the leader, a
// grant after it). It checks only that every system produced results
// without errors; it asserts no speed and no failover time.
func TestSmokeCluster(t *testing.T) {
	cfg := bench.ForMode("smoke")
	cfg.Repo, cfg.BenchDir = "..", "."
	cfg.Tmp = t.TempDir()
	cfg.Log = logWriter{t}
	cfg.Cluster, cfg.Failover = 3, 1
	cfg.Workloads, cfg.W1Clients = "1", []int{1}
	cfg.FenceBin = os.Getenv("FENCEBENCH_FENCE_BIN")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	want := []string{"fence-unary", "fence-session", "fence-lean", "etcd"}
	if strings.Join(rep.Systems, ",") != strings.Join(want, ",") {
		t.Errorf("ran systems %v, want %v (Redis is left out of clusters; fence-lean runs on them, each node with its lean port)", rep.Systems, want)
	}
	if len(rep.Failover) != len(want) {
		t.Errorf("%d failover results, want %d", len(rep.Failover), len(want))
	}
	for _, f := range rep.Failover {
		if !f.OK || f.Grant <= 0 || f.Killed == "" || f.Elected <= 0 {
			t.Errorf("failover result %+v: want a grant after killing a leader, and a new leader among the others", f)
		}
	}
	md := rep.Markdown(bench.Environment(cfg), "go test ./bench")
	for _, s := range want {
		if n := strings.Count(md, "| "+s+" |"); n < 2 {
			t.Errorf("report has %d rows for %s, want one in workload 1 and one in the failover table:\n%s", n, s, md)
		}
	}
}
