// Command fence-chaos is Fence's fault harness (package testkit/chaos): it
// starts a Fence server — or a raft cluster of 3 or 5 (-nodes), with a
// fault-injecting proxy on every peer link — as real processes behind
// fault-injecting client proxies, runs the paused-worker story's workload from worker
// processes against the built-in store and a PostgreSQL guard store, injects
// faults on a seeded schedule while a forger sends the PostgreSQL guard
// forged tokens, and checks the recorded history for stale writes, token
// regressions, overlapping holds, leases ended before their TTL (on the
// host's monotonic clock), lost writes, double applies, linearizability and
// forgeries accepted.
//
//	fence-chaos run [-nodes 1|3|5] [-duration 1m] [-seed N] [-control] [-fence bin/fence] [-out DIR] ...
//	fence-chaos check DIR        (check a recorded run again: history-*.jsonl and final.jsonl)
//	fence-chaos worker ARGS      (started by run; one worker process)
//
// The last line of run is the summary; the exit code is 0 only when every
// checker held (a -control run: when checker 1 caught the unfenced writes
// and the forgery checker the forgeries its keyless guard accepted;
// -expect-caught: when the run failed, for plantbug builds).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence/testkit/chaos"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "worker" {
		return workerMain(args[1:])
	}
	if len(args) > 0 && args[0] == "check" {
		return checkMain(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	return runMain(args, stdout, stderr)
}

func runMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fence-chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", time.Minute, "how long the workload runs under faults")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule and the workers (0: pick one and print it)")
	nodes := fs.Int("nodes", 1, "Fence nodes: 1 (a single server) or 3 or 5 (a raft cluster with a fault proxy on every peer link; adds the cluster fault kinds)")
	workers := fs.Int("workers", 5, "worker processes")
	resources := fs.Int("resources", 3, "locks and resources (sku-0..sku-K-1)")
	control := fs.Bool("control", false, "control run: the workers write to PostgreSQL without fencing and the forger's guard has no key set; passes when the harness catches the stale writes and the accepted forgeries")
	fenceBin := fs.String("fence", "", "fence binary the nodes run (default: fence next to this binary, else bin/fence)")
	out := fs.String("out", "", "directory for histories, logs and visualisations (default: a new temp dir, kept)")
	pg := fs.String("pg", envOr("FENCE_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN of the guard store")
	kinds := fs.String("faults", "", "comma-separated fault kinds (default: all that -nodes allows): "+kindNames())
	ttl := fs.Duration("ttl", time.Second, "TTL of standalone leases; worker pauses last 1.5–3× this")
	sessionTTL := fs.Duration("session-ttl", time.Second, "TTL of the workers' sessions")
	disk := fs.Int64("disk-mib", 512, "size of the tmpfs data dir for the disk-full fault, MiB (raft-wal preallocates 64 MiB segments: the first must fit)")
	plant := fs.String("plantbug", "", "FENCE_PLANTBUG for the server (needs a -tags plantbug build of fence)")
	expectCaught := fs.Bool("expect-caught", false, "exit 0 only when the run FAILS its checks (for planted bugs)")
	linTimeout := fs.Duration("lin-timeout", 2*time.Minute, "porcupine time bound")
	useTLS := fs.Bool("tls", false, "serve every node's client port over TLS (certificates from `fence cert`): workers, nemesis and final reads speak HTTPS")
	useAuth := fs.Bool("auth", false, "turn authentication on once the nodes are up: each worker calls with a token of its own (its own principal), the harness and the nemesis as admin")
	quiet := fs.Bool("q", false, "print only the summary line")
	boundaries := fs.Bool("boundaries", true, "add the lock-boundary workers (sets, shared/exclusive, permits: "+strings.Join(chaos.BoundaryMix, ",")+") after the -workers story workers; not in a control run")
	restoreInProcess := fs.Bool("restore-in-process", false, "restore fault: restore with package backup in the harness's process instead of `fence restore` (the same rule)")
	plantRestore := fs.Bool("plant-restore-no-raise", false, "PLANTED BUG of the harness's own: every restore leaves the counter at the backup's (no floor, wall clock of 1970); use with -expect-caught (tokens_regressed)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *seed == 0 {
		*seed = rand.Uint64()%1_000_000_000 + 1
	}
	cfg := chaos.Config{
		FenceBin: *fenceBin, Duration: *duration, Seed: *seed, Nodes: *nodes, Workers: *workers,
		Resources: *resources, Control: *control, PostgresDSN: *pg, TTL: *ttl,
		SessionTTL: *sessionTTL, DiskBytes: *disk << 20, LinTimeout: *linTimeout, Log: stderr,
		RestoreInProcess: *restoreInProcess, PlantRestoreNoRaise: *plantRestore, TLS: *useTLS, Auth: *useAuth,
		Boundaries: *boundaries,
	}
	if *quiet {
		cfg.Log = io.Discard
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "fence-chaos:", err)
		return 1
	}
	cfg.WorkerBin = self
	if cfg.FenceBin == "" {
		cfg.FenceBin = filepath.Join(filepath.Dir(self), "fence")
		if _, err := os.Stat(cfg.FenceBin); err != nil {
			cfg.FenceBin = "bin/fence"
		}
	}
	if *kinds != "" {
		for _, k := range strings.Split(*kinds, ",") {
			if !validKind(chaos.FaultKind(k)) {
				fmt.Fprintf(stderr, "fence-chaos: -faults: unknown fault kind %q (known: %s)\n", k, kindNames())
				return 2
			}
			cfg.Kinds = append(cfg.Kinds, chaos.FaultKind(k))
		}
	}
	if *nodes != 1 && *nodes != 3 && *nodes != 5 {
		fmt.Fprintf(stderr, "fence-chaos: -nodes %d: want 1, 3 or 5\n", *nodes)
		return 2
	}
	for _, k := range cfg.Kinds {
		if slices.Contains(chaos.ClusterFaults, k) && *nodes == 1 {
			fmt.Fprintf(stderr, "fence-chaos: -faults %s needs a cluster: -nodes 3 or 5\n", k)
			return 2
		}
	}
	if *plant != "" {
		cfg.ServerEnv = append(cfg.ServerEnv, "FENCE_PLANTBUG="+*plant)
	}
	if *out == "" {
		d, err := os.MkdirTemp("", fmt.Sprintf("fence-chaos-%d-", *seed))
		if err != nil {
			fmt.Fprintln(stderr, "fence-chaos:", err)
			return 1
		}
		*out = d
	}
	if entries, err := os.ReadDir(*out); err == nil && len(entries) > 0 {
		fmt.Fprintf(stderr, "fence-chaos: -out %s is not empty: a run needs a directory of its own (histories of two runs would mix)\n", *out)
		return 2
	}
	cfg.Dir = *out
	// The replay line repeats every flag that shapes the run (the seed
	// drives the schedule and each worker's choices, and the worker count,
	// TTLs and fault kinds change both), with the seed made explicit.
	var replay []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seed", "out", "q":
			return
		}
		replay = append(replay, fmt.Sprintf("-%s=%s", f.Name, f.Value))
	})
	replay = append(replay, fmt.Sprintf("-seed=%d", *seed))
	fmt.Fprintf(stderr, "fence-chaos: seed=%d duration=%s control=%v out=%s (replay: fence-chaos run %s)\n",
		*seed, *duration, *control, *out, strings.Join(replay, " "))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "fence-chaos:", err)
		return 1
	}
	fmt.Fprintln(stdout, sum.Line())
	if *expectCaught {
		if sum.Pass {
			fmt.Fprintln(stderr, "fence-chaos: -expect-caught: the run passed every check; the planted bug was NOT caught")
			return 1
		}
		return 0
	}
	if !sum.Pass {
		fmt.Fprintf(stderr, "fence-chaos: FAILED; history and logs in %s\n", *out)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func kindNames() string {
	var s []string
	for _, k := range chaos.AllFaults {
		s = append(s, string(k))
	}
	c := []string{}
	for _, k := range chaos.ClusterFaults {
		c = append(c, string(k))
	}
	return strings.Join(s, ",") + "; with -nodes 3 or 5 also " + strings.Join(c, ",")
}

func validKind(k chaos.FaultKind) bool {
	return slices.Contains(chaos.AllFaults, k) || slices.Contains(chaos.ClusterFaults, k)
}

// checkMain runs the checkers again on a run's recorded histories (DIR's
// history-*.jsonl, the workers' and the forger's, and final.jsonl), for a replay of the
// verdict without the run, or for a history edited by hand.
func checkMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fence-chaos check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	linTimeout := fs.Duration("lin-timeout", 2*time.Minute, "porcupine time bound")
	control := fs.Bool("control", false, "the history is a control run's: pass when checker 1 caught stale writes and the forgery checker saw forgeries accepted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: fence-chaos check [-control] [-lin-timeout D] DIR")
		return 2
	}
	dir := fs.Arg(0)
	files, err := filepath.Glob(filepath.Join(dir, "history-*.jsonl"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(stderr, "fence-chaos check: no history-*.jsonl in %s\n", dir)
		return 2
	}
	// final.jsonl: the harness's final reads; without it the lost-write
	// and double-apply checkers have nothing to explain, and the check fails.
	if _, err := os.Stat(filepath.Join(dir, "final.jsonl")); err == nil {
		files = append(files, filepath.Join(dir, "final.jsonl"))
	}
	ops, err := chaos.ReadHistoryFiles(files...)
	if err != nil {
		fmt.Fprintln(stderr, "fence-chaos check:", err)
		return 1
	}
	r := chaos.Check(ops, dir, *linTimeout)
	for _, p := range r.Problems {
		fmt.Fprintln(stderr, "problem:", p)
	}
	for _, v := range r.Visualizations {
		fmt.Fprintln(stderr, "visualisation:", v)
	}
	lin := "yes"
	if !r.Linearizable {
		lin = "no (" + r.LinearDetail + ")"
	}
	empty := ""
	if r.Empty {
		empty = " empty=yes"
	}
	restores := ""
	if r.Restores > 0 {
		restores = fmt.Sprintf(" restores=%d restore_mismatch=%d", r.Restores, r.RestoreMismatch)
	}
	forged := ""
	if r.Forgeries > 0 || r.HonestAccepted > 0 {
		forged = fmt.Sprintf(" forgeries=%d forgeries_accepted=%d forgeries_changed=%d honest_refused=%d", r.Forgeries, r.ForgeriesAccepted, r.ForgeriesChanged, r.HonestRefused)
	}
	bounds := ""
	if r.PermitsExceeded > 0 || r.SetsBroken > 0 || r.HolderLooks > 0 {
		bounds = fmt.Sprintf(" permits_exceeded=%d sets_broken=%d holder_looks=%d", r.PermitsExceeded, r.SetsBroken, r.HolderLooks)
	}
	fmt.Fprintf(stdout, "check %s ops=%d stale_accepted=%d tokens_regressed=%d overlaps=%d%s early_expiry=%d/%d lost_writes=%d double_applies=%d%s%s missing_final=%d malformed=%d%s stale_refused=%d linearizable=%s\n",
		dir, r.Ops, r.StaleAccepted, r.TokensRegressed, r.Overlaps, bounds, r.EarlyExpiry, r.Expiries, r.LostWrites, r.DoubleApplies, restores, forged,
		r.MissingFinal, r.Malformed, empty, r.StaleRefused, lin)
	if r.Holds(*control) {
		return 0
	}
	return 1
}
