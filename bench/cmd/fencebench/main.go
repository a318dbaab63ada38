// Command fencebench measures Fence against etcd and Redis on this machine:
// it builds and starts every server in its own process on free loopback
// ports and temp dirs, runs the workloads with each system's own Go client,
// interleaved round by round, and prints the tables (markdown) that
// docs/benchmarks.md holds between <!-- bench:begin --> and
// <!-- bench:end -->; -docs rewrites that section in place.
//
//	cd bench && go run ./cmd/fencebench -docs ../docs/benchmarks.md   # full
//	cd bench && go run ./cmd/fencebench -quick                        # < 3 min
//	cd bench && go run ./cmd/fencebench -smoke                        # seconds
//
// Run it from the bench directory (or pass -repo and -bench-dir).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence/bench"
)

func main() {
	if bench.IsChild() {
		os.Exit(bench.ChildMain())
	}
	os.Exit(run(os.Args[1:]))
}

type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("want a list of positive counts, got %q", v)
		}
		*l = append(*l, n)
	}
	return nil
}

func run(args []string) int {
	mode := "full"
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "quick", "quick=true":
			mode = "quick"
		case "smoke", "smoke=true":
			mode = "smoke"
		}
	}
	cfg := bench.ForMode(mode)
	fs := flag.NewFlagSet("fencebench", flag.ContinueOnError)
	fs.Bool("quick", false, "quick mode: short runs, 5,000 held leases, a 1,000-lease storm (under 3 minutes on 2 cores)")
	fs.Bool("smoke", false, "smoke mode: tiny counts, a few seconds per system (the smoke test)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of workloads 1-3")
	fs.StringVar(&cfg.Systems, "systems", cfg.Systems, "comma-separated systems (default: all registered: "+strings.Join(bench.Registered(), ", ")+")")
	fs.StringVar(&cfg.Workloads, "workloads", cfg.Workloads, "workloads to run: 1 uncontended, 2 fenced write, 3 handoff, 4 held leases, 5 expiry storm, 6 leader election hand-off, 7 an order's 3 SKUs as one set (6 and 7: fence-unary, fence-session and etcd only; \"none\": none, for -failover)")
	w1 := intList(cfg.W1Clients)
	fs.Var(&w1, "w1-clients", "client counts of workload 1")
	fs.DurationVar(&cfg.W1Duration, "w1-duration", cfg.W1Duration, "timed window of one workload-1 run")
	w2 := intList(cfg.W2Clients)
	fs.Var(&w2, "w2-clients", "client counts of workload 2")
	fs.DurationVar(&cfg.W2Duration, "w2-duration", cfg.W2Duration, "timed window of one workload-2 run")
	fs.IntVar(&cfg.W3Clients, "w3-clients", cfg.W3Clients, "clients handing one lock around (workload 3)")
	fs.DurationVar(&cfg.W3Duration, "w3-duration", cfg.W3Duration, "timed window of one workload-3 run")
	fs.IntVar(&cfg.W4N, "held", cfg.W4N, "leases held at once (workload 4)")
	fs.IntVar(&cfg.W4Workers, "held-workers", cfg.W4Workers, "concurrent acquirers of workload 4")
	fs.IntVar(&cfg.W4Rounds, "held-rounds", cfg.W4Rounds, "rounds of workload 4")
	fs.IntVar(&cfg.W4SessionTTL, "held-session-ttl", 0, "session TTL (seconds) of workload 4's holders, etcd and fence-session (0: the default, 10); a longer one keeps a loaded machine's sessions from being lost while a million are acquired")
	heldFenceFlags := fs.String("held-fence-flags", "", "extra `fence serve` flags of workload 4's fence servers (space-separated, e.g. \"--memory-limit 450MiB\")")
	heldClientEnv := fs.String("held-client-env", "", "extra environment of workload 4's client process (space-separated, e.g. \"GOMEMLIMIT=250MiB\": what a user of the client would set; the library sets none)")
	fs.IntVar(&cfg.W5N, "storm", cfg.W5N, "leases (and waiters) of the expiry storm (workload 5)")
	fs.IntVar(&cfg.W5Workers, "storm-workers", cfg.W5Workers, "concurrent acquirers of the storm's holders")
	fs.IntVar(&cfg.W5Rounds, "storm-rounds", cfg.W5Rounds, "rounds of workload 5")
	fs.DurationVar(&cfg.W5MinTTL, "storm-min-ttl", cfg.W5MinTTL, "least time from a storm's start to its holders' TTL end")
	fs.IntVar(&cfg.W5EtcdTTL, "storm-etcd-ttl", cfg.W5EtcdTTL, "etcd session TTL (seconds) of the storm's holders")
	w6 := intList(cfg.W6Candidates)
	fs.Var(&w6, "w6-candidates", "candidate counts of workload 6 (leader election hand-off)")
	fs.DurationVar(&cfg.W6Duration, "w6-duration", cfg.W6Duration, "timed window of one workload-6 run")
	w7 := intList(cfg.W7Clients)
	fs.Var(&w7, "w7-clients", "client counts of workload 7 (an order's 3 SKUs as one set)")
	fs.DurationVar(&cfg.W7Duration, "w7-duration", cfg.W7Duration, "timed window of one workload-7 run")
	fs.IntVar(&cfg.W7SKUs, "w7-skus", cfg.W7SKUs, "the SKUs workload 7's orders pick 3 of")
	fs.DurationVar(&cfg.SetRetry, "set-retry", cfg.SetRetry, "etcd: least pause between two tries of workload 7's txn")
	fs.DurationVar(&cfg.RedisRetry, "redis-retry", cfg.RedisRetry, "Redis: least pause between polls of a waiting acquire")
	fs.DurationVar(&cfg.RedisStormRetry, "redis-storm-retry", cfg.RedisStormRetry, "Redis: the same in the storm")
	fs.StringVar(&cfg.Repo, "repo", cfg.Repo, "repository root (to build fence)")
	fs.StringVar(&cfg.BenchDir, "bench-dir", cfg.BenchDir, "the bench module (to build etcdserver)")
	fs.StringVar(&cfg.FenceBin, "fence-bin", "", "a fence binary to use instead of building one")
	fs.StringVar(&cfg.EtcdBin, "etcd-bin", "", "an etcdserver binary to use instead of building one")
	fs.StringVar(&cfg.RedisBin, "redis-bin", cfg.RedisBin, "redis-server")
	fs.StringVar(&cfg.Tmp, "tmp", "", "parent of the temp dirs (default $TMPDIR)")
	fs.IntVar(&cfg.Cluster, "cluster", 0, "run workloads 1-3 against clusters of this many nodes (fence and etcd, each node its own process; Redis left out); defaults then: -workloads 1,2,3 -w1-clients 1,16,64")
	fs.IntVar(&cfg.Failover, "failover", 0, "kill -9 the leader of a fresh cluster this many times per system and time the first grant after it (implies -cluster 3 unless given)")
	fs.BoolVar(&cfg.ViaFollower, "via-follower", false, "cluster workloads: list a follower first (the Fence client's calls are then forwarded by it to the leader)")
	fs.BoolVar(&bench.EndpointsInOrder, "fence-in-order", false, "cluster workloads: the Fence clients start at the first endpoint listed (the leader; a follower with -via-follower) instead of finding the leader themselves (client.WithEndpointsInOrder)")
	fs.DurationVar(&cfg.FailoverTimeout, "failover-timeout", cfg.FailoverTimeout, "longest wait for the first grant after a kill")
	fenceFlags := fs.String("fence-flags", "", "extra flags for every fence node of a cluster (space-separated, e.g. \"--election-timeout 500ms\")")
	etcdFlags := fs.String("etcd-flags", "", "extra flags for every etcd node of a cluster (space-separated, e.g. \"--election-timeout 500\")")
	fs.StringVar(&cfg.PerfDir, "perf", "", "record `perf record -g` of the leading server during every workload-1 window into this directory")
	fs.IntVar(&cfg.PerfHz, "perf-hz", 499, "perf's sampling rate with -perf (samples per second)")
	docs := fs.String("docs", "", "rewrite the bench section of this file (docs/benchmarks.md) with the results")
	section := fs.String("section", "", "with -docs: the section's name (markers <!-- bench:begin NAME -->); \"\" = <!-- bench:begin -->")
	fs.StringVar(&cfg.FenceVersion, "fence-version", "", "what to call the fence measured in the report (default: the commit of -repo)")
	jsonOut := fs.String("json", "", "also write the raw results as JSON to this file")
	fromJSON := fs.String("from-json", "", "run nothing: render the report saved by -json in this file (with -docs: write it)")
	commandFlag := fs.String("command", "", "the command the report names (default: this one)")
	soak := fs.Bool("soak", false, "soak mode (issue 24): a 3-node cluster under a paced load of session acquire → write → add → release cycles with leader kills; samples every 10 s, checks the targets at the end (the -soak-* flags; -docs rewrites the \"soak\" section)")
	scfg := bench.SoakDefaults()
	fs.DurationVar(&scfg.Duration, "soak-duration", scfg.Duration, "soak: how long the load runs")
	fs.Float64Var(&scfg.Rate, "soak-rate", scfg.Rate, "soak: cycles per second, all workers together")
	fs.IntVar(&scfg.Workers, "soak-workers", scfg.Workers, "soak: paced workers (each its own locks and resources)")
	fs.IntVar(&scfg.Sessions, "soak-sessions", scfg.Sessions, "soak: sessions (clients) the workers share, spread over the nodes")
	fs.IntVar(&scfg.Locks, "soak-locks", scfg.Locks, "soak: locks (and resource pairs) per worker")
	fs.DurationVar(&scfg.KillEvery, "soak-kill-every", scfg.KillEvery, "soak: kill -9 the leader (and restart it) this often (0: never)")
	fs.DurationVar(&scfg.SampleEvery, "soak-sample", scfg.SampleEvery, "soak: sample interval")
	fs.DurationVar(&scfg.Window, "soak-window", 0, "soak: span of the first and last p99 compared (0: 10m, or a third of the run if shorter)")
	fs.IntVar(&scfg.MaxIDs, "soak-max-ids", 0, "soak: the nodes' --max-ids (0: the server's default)")
	soakCSV := fs.String("soak-csv", "", "soak: the samples' CSV (default results/soak-UTCTIME.csv)")
	soakSVG := fs.String("soak-svg", "", "soak: write the plot (SVG) here")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.W1Clients, cfg.W2Clients, cfg.W6Candidates, cfg.W7Clients = w1, w2, w6, w7
	cfg.ClusterFlags.Fence, cfg.ClusterFlags.Etcd = strings.Fields(*fenceFlags), strings.Fields(*etcdFlags)
	cfg.W4FenceFlags, cfg.W4ClientEnv = strings.Fields(*heldFenceFlags), strings.Fields(*heldClientEnv)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.Failover > 0 && !set["cluster"] {
		cfg.Cluster = 3
	}
	if cfg.Cluster > 1 {
		if !set["workloads"] {
			cfg.Workloads = "1,2,3"
			if set["failover"] && !set["cluster"] {
				cfg.Workloads = "" // -failover without -cluster: only the failover runs
			}
		}
		if !set["w1-clients"] && mode == "full" {
			cfg.W1Clients = []int{1, 16, 64}
		}
		if !set["section"] && *docs != "" {
			*section = "cluster"
		}
	}
	cfg.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *soak {
		scfg.Repo, scfg.FenceBin, scfg.Tmp, scfg.Log = cfg.Repo, cfg.FenceBin, cfg.Tmp, os.Stderr
		scfg.FenceFlags = cfg.ClusterFlags.Fence
		scfg.CSV, scfg.SVG = *soakCSV, *soakSVG
		if scfg.CSV == "" {
			scfg.CSV = "results/soak-" + time.Now().UTC().Format("20060102-1504") + ".csv"
		}
		command := strings.TrimSpace("cd bench && go run ./cmd/fencebench " + strings.Join(args, " "))
		if *commandFlag != "" {
			command = *commandFlag
		}
		return runSoak(ctx, cfg, scfg, *docs, command)
	}
	var rep *bench.Report
	var err error
	if *fromJSON != "" {
		rep = &bench.Report{}
		b, rerr := os.ReadFile(*fromJSON)
		if rerr == nil {
			rerr = json.Unmarshal(b, rep)
		}
		err = rerr
	} else {
		rep, err = bench.Run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fencebench:", err)
		return 1
	}
	command := strings.TrimSpace("cd bench && go run ./cmd/fencebench " + strings.Join(args, " "))
	if *commandFlag != "" {
		command = *commandFlag
	}
	md := rep.Markdown(bench.Environment(rep.Config), command)
	fmt.Print(md)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fencebench:", err)
			return 1
		}
	}
	if *docs != "" {
		if err := bench.WriteNamedSection(*docs, *section, md); err != nil {
			fmt.Fprintln(os.Stderr, "fencebench:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "fencebench: wrote the section of %s (%s)\n", *docs, time.Now().UTC().Format(time.RFC3339))
	}
	if p := rep.Problems(); len(p) > 0 {
		fmt.Fprintln(os.Stderr, "fencebench: problems:")
		for _, x := range p {
			fmt.Fprintln(os.Stderr, "  "+x)
		}
		return 1
	}
	return 0
}
