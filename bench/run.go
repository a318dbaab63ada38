package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Config is one run of the runner. Counts and durations come from the
// command line (cmd/fencebench); ForMode fills the defaults of a mode.
type Config struct {
	Mode    string // "full", "quick" or "smoke": the defaults used
	Rounds  int    // rounds of workloads 1–3 (every system once per round, in order)
	Systems string // comma-separated names, "" = all registered

	Workloads string // which workloads, e.g. "1,2,3,4,5"

	// Cluster > 1: workloads 1–3 run against clusters of this many nodes,
	// each node its own process (fence and etcd only; Redis is left out).
	Cluster int
	// Failover > 0: that many kill -9 runs of the leader per system, on a
	// fresh cluster each (needs Cluster ≥ 3; see failover.go).
	Failover int
	// ViaFollower: the workloads' clients list a follower first (the Fence
	// client then sends everything through it: forwarded to the leader).
	ViaFollower bool
	// FailoverTimeout bounds one failover run's wait for a grant.
	FailoverTimeout time.Duration
	// ClusterFlags go to every node of a cluster (raft timeouts, say).
	ClusterFlags ClusterFlags
	// PerfDir, if set: `perf record -e cpu-clock -g` of the leading server process
	// during every workload-1 window, into PerfDir/w1-SYSTEM-cCLIENTS-rROUND.data.
	PerfDir string
	// PerfHz is perf's sampling rate (0: 499 Hz).
	PerfHz int

	W1Clients    []int
	W1Duration   time.Duration
	W2Clients    []int
	W2Duration   time.Duration
	W3Clients    int
	W3Duration   time.Duration
	W4N          int
	W4Workers    int
	W4Rounds     int
	W5N          int
	W5Workers    int
	W5Rounds     int
	W5MinTTL     time.Duration // least time from a storm's start to its holders' TTL end
	W5EtcdTTL    int           // etcd session TTL of the storm's holders, seconds
	W4SessionTTL int           // session TTL of workload 4's holders (etcd, fence-session), seconds; 0: the default
	W4FenceFlags []string      // more `fence serve` flags for workload 4's fence servers (e.g. --memory-limit 450MiB)
	W4ClientEnv  []string      // more environment of workload 4's client process (e.g. GOMEMLIMIT=250MiB: what a user of the client would set)

	// Workloads 6 (leader election hand-off) and 7 (an order's 3 SKUs as
	// one set), boundaries.go: the systems with Boundaries() only.
	W6Candidates []int
	W6Duration   time.Duration
	W7Clients    []int
	W7Duration   time.Duration
	W7SKUs       int           // the catalog the orders pick 3 SKUs from
	SetRetry     time.Duration // etcd's pause between two tries of a set's txn (workload 7)

	RedisRetry      time.Duration // Redis polling pause of a waiting acquire (workload 3)
	RedisStormRetry time.Duration // ... in the storm (100,000 pollers)

	Repo     string // repository root (the main module), to build fence
	BenchDir string // the bench module, to build etcdserver
	FenceBin string // prebuilt fence binary ("" = build it)
	// FenceVersion names the fence measured in the report ("" = the commit
	// of Repo, from git).
	FenceVersion string
	EtcdBin      string // prebuilt etcdserver ("" = build it)
	RedisBin     string // redis-server
	ChildExe     string // executable started as the workloads 4–5 client ("" = this one)
	Tmp          string // parent of every temp dir ("" = os.TempDir)

	Log io.Writer `json:"-"` // progress lines
}

// ForMode returns the defaults of mode ("full", "quick", "smoke").
func ForMode(mode string) Config {
	c := Config{Mode: mode, Rounds: 3, Workloads: "1,2,3,4,5",
		W1Clients: []int{1, 16, 64, 256}, W2Clients: []int{1, 16}, W3Clients: 16,
		W4Workers: 64, W5Workers: 64, W5EtcdTTL: 5,
		W6Candidates: []int{4, 16}, W7Clients: []int{16, 64}, W7SKUs: 32, SetRetry: 2 * time.Millisecond,
		RedisRetry: 2 * time.Millisecond, RedisStormRetry: 50 * time.Millisecond,
		Repo: "..", BenchDir: ".", RedisBin: "redis-server", FailoverTimeout: 30 * time.Second}
	switch mode {
	case "smoke":
		c.Rounds = 1
		c.Workloads = "1,2,3,4,5,6,7"
		c.W6Candidates, c.W7Clients = []int{3}, []int{4}
		// A second, not 200 ms: one fence-unary hand-off took longer than
		// 200 ms beside make test's main run on a loaded machine, and a
		// window without one result is a failed smoke run.
		c.W6Duration, c.W7Duration = time.Second, time.Second
		c.W1Clients, c.W2Clients, c.W3Clients = []int{1, 4}, []int{2}, 4
		c.W1Duration, c.W2Duration, c.W3Duration = 200*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond
		c.W4N, c.W4Workers, c.W4Rounds = 100, 8, 1
		// Holders' TTL 3 s, not 1: make test runs this beside its main go test,
		// and on a loaded box (load ~25) a 1 s storm lost most of its waiters'
		// sessions before they were granted.
		c.W5N, c.W5Workers, c.W5Rounds, c.W5MinTTL, c.W5EtcdTTL = 100, 8, 1, 3*time.Second, 5
	case "quick":
		c.W1Duration, c.W2Duration, c.W3Duration = 400*time.Millisecond, 400*time.Millisecond, 800*time.Millisecond
		c.W2Clients = []int{16}
		c.W6Duration, c.W7Duration = 400*time.Millisecond, 400*time.Millisecond
		c.W4N, c.W4Rounds = 5_000, 1
		c.W5N, c.W5Rounds, c.W5MinTTL, c.W5EtcdTTL = 1_000, 1, 2*time.Second, 5
	default:
		c.Mode = "full"
		c.W1Duration, c.W2Duration, c.W3Duration = 5*time.Second, 5*time.Second, 10*time.Second
		c.W6Duration, c.W7Duration = 5*time.Second, 5*time.Second
		c.W4N, c.W4Rounds = 1_000_000, 1
		c.W5N, c.W5Rounds, c.W5MinTTL = 100_000, 1, 10*time.Second
	}
	return c
}

// Report is everything one run measured.
type Report struct {
	Config   Config
	Started  time.Time
	Finished time.Time
	Systems  []string
	Fenced   map[string]bool
	W1       []OpsResult
	W2       []OpsResult
	W3       []HandoffResult
	W4       []HeldResult
	W5       []StormResult
	W6       []ElectionResult
	W7       []OrderResult
	Failover []FailoverResult
	// LeaderChanges: cluster runs after which a different node led (an
	// election under load), or no leader was found.
	LeaderChanges []string
	Failures      []string // runs that failed outright
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, time.Now().UTC().Format("15:04:05 ")+format+"\n", args...)
	}
}

func (c *Config) has(w string) bool {
	for _, x := range strings.Split(c.Workloads, ",") {
		if strings.TrimSpace(x) == w {
			return true
		}
	}
	return false
}

// servers holds one server (or cluster) of each kind.
type servers map[string]target

func (ss servers) stop() {
	for _, s := range ss {
		s.Stop()
	}
}

// startTarget starts a server of kind, or a cluster of c.Cluster nodes.
func (c *Config) startTarget(kind string) (target, error) {
	if c.Cluster > 1 {
		return c.startCluster(kind)
	}
	return c.start(kind)
}

func (c *Config) start(kind string) (*Server, error) {
	switch kind {
	case "fence":
		return StartFence(c.FenceBin, c.Tmp)
	case "fence-lean":
		return StartFenceLean(c.FenceBin, c.Tmp)
	case "fence-tls":
		return StartFenceTLS(c.FenceBin, c.Tmp)
	case "fence-tls-auth":
		return StartFenceTLSAuth(c.FenceBin, c.Tmp)
	case "etcd":
		return StartEtcd(c.EtcdBin, c.Tmp)
	case "redis-always":
		return StartRedis(c.RedisBin, "always", c.Tmp)
	case "redis-everysec":
		return StartRedis(c.RedisBin, "everysec", c.Tmp)
	}
	return nil, fmt.Errorf("unknown server kind %q", kind)
}

// Run builds what it needs, starts the servers, runs the workloads, stops
// everything and returns the report. A failed run of one system is
// recorded in Report.Failures and the runner goes on; Run returns an error
// only when it cannot run at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	systems, err := Systems(cfg.Systems)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster > 1 {
		var keep []System
		for _, s := range systems {
			if Clusterable(s) {
				keep = append(keep, s)
			} else if cfg.Systems != "" && cfg.Systems != "all" {
				return nil, fmt.Errorf("system %s cannot run against a cluster (only fence and etcd can)", s.Name())
			}
		}
		systems = keep
		if cfg.has("4") || cfg.has("5") {
			return nil, fmt.Errorf("workloads 4 and 5 run against single servers only; with -cluster use -workloads 1,2,3")
		}
	}
	if cfg.Failover > 0 && cfg.Cluster < 3 {
		return nil, fmt.Errorf("failover runs need a cluster of at least 3 nodes (-cluster 3)")
	}
	if len(systems) == 0 {
		return nil, fmt.Errorf("no systems to run")
	}
	tmp, err := os.MkdirTemp(cfg.Tmp, "fencebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg.Tmp = tmp
	if cfg.FenceBin == "" {
		cfg.FenceBin = filepath.Join(tmp, "fence")
		cfg.logf("building fence from %s", cfg.Repo)
		if err := buildGo(ctx, cfg.Repo, "./cmd/fence", cfg.FenceBin); err != nil {
			return nil, err
		}
	}
	if cfg.EtcdBin == "" {
		cfg.EtcdBin = filepath.Join(tmp, "etcdserver")
		cfg.logf("building etcdserver from %s", cfg.BenchDir)
		if err := buildGo(ctx, cfg.BenchDir, "./cmd/etcdserver", cfg.EtcdBin); err != nil {
			return nil, err
		}
	}
	if p, err := exec.LookPath(cfg.RedisBin); err == nil {
		cfg.RedisBin = p
	} else if cfg.Cluster <= 1 {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	if cfg.ChildExe == "" {
		if cfg.ChildExe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	RedisRetry = cfg.RedisRetry
	SetRetry = cfg.SetRetry

	rep := &Report{Config: cfg, Started: time.Now().UTC(), Fenced: map[string]bool{}}
	for _, s := range systems {
		rep.Systems = append(rep.Systems, s.Name())
		rep.Fenced[s.Name()] = s.Fenced()
	}
	// checkLeader notes an election during a cluster run.
	checkLeader := func(what string, t target) {
		if cl, ok := t.(*Cluster); ok {
			if m := cl.checkLeader(ctx); m != "" {
				cfg.logf("%s %s: %s", what, cl.Kind, m)
				rep.LeaderChanges = append(rep.LeaderChanges, fmt.Sprintf("%s (%s): %s", what, cl.Kind, m))
			}
		}
	}
	fail := func(what string, err error) {
		msg := oneLine(fmt.Sprintf("%s: %v", what, err))
		cfg.logf("FAILED %s", msg)
		rep.Failures = append(rep.Failures, msg)
	}

	if cfg.has("6") || cfg.has("7") {
		if err := cfg.runBoundaries(ctx, systems, rep, checkLeader, fail); err != nil {
			return nil, err
		}
	}
	if cfg.has("1") || cfg.has("2") || cfg.has("3") {
		ss := servers{}
		defer ss.stop()
		for _, s := range systems {
			if ss[s.Server()] != nil {
				continue
			}
			srv, err := cfg.startTarget(s.Server())
			if err != nil {
				return nil, err
			}
			ss[s.Server()] = srv
			cfg.logf("started %s on %s", s.Server(), srv.addr())
		}
		if cfg.has("1") {
			for _, n := range cfg.W1Clients {
				for r := 1; r <= cfg.Rounds; r++ {
					for _, s := range systems {
						if err := ctx.Err(); err != nil {
							return nil, err
						}
						res, err := runOps(ctx, s, ss[s.Server()], r, n, cfg.W1Duration, false, cfg.perf(fmt.Sprintf("w1-%s-c%d-r%d", s.Name(), n, r)))
						checkLeader(fmt.Sprintf("w1 %s clients=%d round %d", s.Name(), n, r), ss[s.Server()])
						if err != nil {
							fail(fmt.Sprintf("w1 %s clients=%d round %d", s.Name(), n, r), err)
							continue
						}
						cfg.logf("w1 clients=%d round %d %-14s %8.0f ops/s p99 %v errors %d %s", n, r, s.Name(), res.OpsPerSec, res.P99, res.Errors, res.FirstErr)
						rep.W1 = append(rep.W1, res)
					}
				}
			}
		}
		if cfg.has("2") {
			for _, n := range cfg.W2Clients {
				for r := 1; r <= cfg.Rounds; r++ {
					for _, s := range systems {
						if err := ctx.Err(); err != nil {
							return nil, err
						}
						res, err := runOps(ctx, s, ss[s.Server()], r, n, cfg.W2Duration, true, nil)
						checkLeader(fmt.Sprintf("w2 %s clients=%d round %d", s.Name(), n, r), ss[s.Server()])
						if err != nil {
							fail(fmt.Sprintf("w2 %s clients=%d round %d", s.Name(), n, r), err)
							continue
						}
						cfg.logf("w2 clients=%d round %d %-14s %8.0f ops/s p99 %v errors %d %s", n, r, s.Name(), res.OpsPerSec, res.P99, res.Errors, res.FirstErr)
						rep.W2 = append(rep.W2, res)
					}
				}
			}
		}
		if cfg.has("3") {
			for r := 1; r <= cfg.Rounds; r++ {
				for _, s := range systems {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					res, err := runHandoff(ctx, s, ss[s.Server()], r, cfg.W3Clients, cfg.W3Duration)
					checkLeader(fmt.Sprintf("w3 %s round %d", s.Name(), r), ss[s.Server()])
					if err != nil {
						fail(fmt.Sprintf("w3 %s round %d", s.Name(), r), err)
						continue
					}
					cfg.logf("w3 round %d %-14s %8.0f grants/s max wait %v fairness %.2f errors %d %s", r, s.Name(), res.GrantsPerSec, res.MaxWait, res.Fairness, res.Errors, res.FirstErr)
					rep.W3 = append(rep.W3, res)
				}
			}
		}
		ss.stop()
	}
	if cfg.has("4") {
		for r := 1; r <= cfg.W4Rounds; r++ {
			for _, s := range systems {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				res, err := cfg.runHeld(s, r)
				if err != nil {
					fail(fmt.Sprintf("w4 %s round %d", s.Name(), r), err)
					continue
				}
				cfg.logf("w4 round %d %-14s %d held in %v, server RSS %d MB, client RSS %d MB, errors %d %s", r, s.Name(), res.Held, res.Grant.Round(time.Millisecond), res.ServerRSS>>20, res.ClientRSS>>20, res.Errors, res.FirstErr)
				rep.W4 = append(rep.W4, res)
			}
		}
	}
	if cfg.has("5") {
		for r := 1; r <= cfg.W5Rounds; r++ {
			for _, s := range systems {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				res, err := cfg.runStorm(s, r, rep.W4)
				if err != nil {
					fail(fmt.Sprintf("w5 %s round %d", s.Name(), r), err)
					continue
				}
				cfg.logf("w5 round %d %-14s %d waiters, all hold %v after the TTL end (p50 %v), setup %v overran=%t, errors %d %s", r, s.Name(), res.Granted, res.LastLag.Round(time.Millisecond), res.P50Lag.Round(time.Millisecond), res.Setup.Round(time.Millisecond), res.Overran, res.Errors, res.FirstErr)
				rep.W5 = append(rep.W5, res)
			}
		}
	}
	for r := 1; r <= cfg.Failover; r++ {
		for _, s := range systems {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			res, err := cfg.runFailover(ctx, s, r)
			if err != nil {
				fail(fmt.Sprintf("failover %s run %d", s.Name(), r), err)
				continue
			}
			cfg.logf("failover run %d %-14s killed %s: first grant %v after the kill (probe %d, sent at %v; leader seen %v), first error: %s", r, s.Name(), res.Killed, res.Grant.Round(time.Millisecond), res.Attempts, res.Started.Round(time.Millisecond), res.Elected.Round(time.Millisecond), res.FirstErr)
			rep.Failover = append(rep.Failover, res)
		}
	}
	rep.Finished = time.Now().UTC()
	return rep, nil
}

// oneLine is s on one line, at most 400 bytes (a child's stderr can be
// long).
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// runHeld: a fresh server; a child process acquires N leases and holds them
// while the runner reads both processes' memory.
func (c *Config) runHeld(s System, round int) (HeldResult, error) {
	res := HeldResult{System: s.Name(), Round: round, N: c.W4N}
	var srv *Server
	var err error
	if s.Server() == "fence" && len(c.W4FenceFlags) > 0 {
		srv, err = startFence(c.FenceBin, c.Tmp, "fence", nil, c.W4FenceFlags...)
	} else {
		srv, err = c.start(s.Server())
	}
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	res.ServerRSSBefore, _, _ = RSS(srv.Pid())
	cpu0, _ := CPUSeconds(srv.Pid())
	ch, err := startChild(c.ChildExe, ChildSpec{Kind: "held", System: s.Name(), Addr: srv.Addr, N: c.W4N, Workers: c.W4Workers, EtcdTTL: c.W4SessionTTL}, c.Log, c.W4ClientEnv...)
	if err != nil {
		return res, err
	}
	defer ch.stop()
	cr, err := ch.report()
	if err != nil {
		return res, err
	}
	cpu1, _ := CPUSeconds(srv.Pid())
	time.Sleep(500 * time.Millisecond) // let the servers settle (the Go ones return freed memory lazily)
	res.ServerRSS, _, _ = RSS(srv.Pid())
	res.ClientRSS, res.ClientPeak, _ = RSS(ch.cmd.Process.Pid)
	res.Held, res.Errors, res.FirstErr, res.Grant = cr.Held, cr.Errors, cr.FirstErr, cr.Grant
	if cr.Grant > 0 {
		res.GrantsPerSec = float64(cr.Held) / cr.Grant.Seconds()
	}
	if cr.Held > 0 {
		res.CPUPer10k = (cpu1 - cpu0) / float64(cr.Held) * 10000
	}
	return res, nil
}

// runStorm: a fresh server; one child process holds N leases, a second
// one queues a waiter on each; when all are queued the holder stops
// renewing and is killed (SIGKILL), and the waiter reports when each waiter
// got its lock, from the holders' TTL end. For systems whose leases carry
// their own TTL the holders' deadline leaves room for the set-up: four times
// the time workload 4 took to grant as many, at least W5MinTTL.
func (c *Config) runStorm(s System, round int, held []HeldResult) (StormResult, error) {
	res := StormResult{System: s.Name(), Round: round, N: c.W5N}
	ttl := c.W5MinTTL
	var rates []float64
	for _, h := range held {
		if h.System == s.Name() && h.GrantsPerSec > 0 {
			rates = append(rates, h.GrantsPerSec)
		}
	}
	if r := median(rates); r > 0 {
		ttl = max(ttl, time.Duration(4*float64(c.W5N)/r*float64(time.Second))+3*time.Second)
	} else {
		ttl = max(ttl, time.Duration(c.W5N)*time.Millisecond) // 1,000 grants/s assumed
	}
	srv, err := c.start(s.Server())
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	start := time.Now()
	spec := ChildSpec{System: s.Name(), Addr: srv.Addr, N: c.W5N, Workers: c.W5Workers,
		Deadline: start.Add(ttl), EtcdTTL: c.W5EtcdTTL, Retry: c.RedisStormRetry}
	spec.Kind = "storm-hold"
	h, err := startChild(c.ChildExe, spec, c.Log)
	if err != nil {
		return res, err
	}
	defer h.stop()
	hr, err := h.report()
	if err != nil {
		return res, err
	}
	res.Held, res.Errors, res.FirstErr = hr.Held, hr.Errors, hr.FirstErr
	spec.Kind = "storm-wait"
	w, err := startChild(c.ChildExe, spec, c.Log)
	if err != nil {
		return res, err
	}
	defer w.stop()
	wr, err := w.report()
	if err != nil {
		return res, err
	}
	if err := h.send("expire"); err != nil {
		return res, err
	}
	er, err := h.report()
	if err != nil {
		return res, err
	}
	h.kill()
	tEnd, _ := er.TEnd.MarshalText()
	if err := w.send(string(tEnd)); err != nil {
		return res, err
	}
	cr, err := w.report()
	if err != nil {
		return res, err
	}
	_, res.ServerPeak, _ = RSS(srv.Pid())
	_, res.ClientPeak, _ = RSS(w.cmd.Process.Pid)
	res.Granted, res.Errors = cr.Granted, res.Errors+cr.Errors
	if res.FirstErr == "" {
		res.FirstErr = cr.FirstErr
	}
	res.Setup, res.Overran = wr.QueuedAt.Sub(start), wr.QueuedAt.After(er.TEnd)
	res.LastLag, res.P50Lag, res.P99Lag = cr.LastLag, cr.P50Lag, cr.P99Lag
	return res, nil
}
