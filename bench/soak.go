package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// SoakConfig is one soak run (issue 24, item 3): a 3-node Fence cluster,
// each node its own process, under a steady paced load of cycles — a
// session acquire, a fenced Write and an Add (each with an op_id) on the
// built-in store, a release — with the leader killed (kill -9) every
// KillEvery and restarted with the same flags at once. Every SampleEvery it
// records each node's RSS, snapshot size, snapshot bytes written, id
// memory, and the cycle latency of the window; at the end it checks that
// no acknowledged write was lost and the steady-state targets.
type SoakConfig struct {
	Duration    time.Duration // whole run (the load's window)
	Rate        float64       // cycles per second, all workers together
	Workers     int           // paced workers (each its own locks and resources)
	Sessions    int           // client.Clients (sessions) the workers share
	Locks       int           // locks (and resource pairs) per worker
	KillEvery   time.Duration // leader kill cadence (0: no kills)
	SampleEvery time.Duration
	Nodes       int
	// MaxIDs is the nodes' --max-ids (0: the server's default).
	MaxIDs int
	// FenceFlags are more `fence serve` flags for every node.
	FenceFlags []string

	Repo     string // repository root, to build fence
	FenceBin string // prebuilt fence ("" = build it)
	Tmp      string
	// CSV, SVG: where the samples and the plot go ("" = not written).
	CSV, SVG string
	// Window is the span of the first and last p99 compared (0: 10
	// minutes, or a third of Duration when that is shorter).
	Window time.Duration

	Log io.Writer `json:"-"`
}

// SoakDefaults is the soak of issue 24: one hour at ~300 cycles/s, the
// leader killed every 4 minutes.
func SoakDefaults() SoakConfig {
	return SoakConfig{Duration: time.Hour, Rate: 300, Workers: 16, Sessions: 8, Locks: 32,
		KillEvery: 4 * time.Minute, SampleEvery: 10 * time.Second, Nodes: 3, Repo: ".."}
}

func (c *SoakConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, time.Now().UTC().Format("15:04:05 ")+"soak: "+format+"\n", args...)
	}
}

// soakCluster is the cluster of a soak: harness nodes, and which is
// down between a kill and its restart.
type soakCluster struct {
	hc  *harness.Cluster
	dir string
	n   int
	mu  sync.Mutex
	// restarting[i]: node i was killed and is not ready again yet.
	restarting []bool
}

func (s *soakCluster) up(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.restarting[i]
}

func (s *soakCluster) addrs() []string {
	var as []string
	for _, n := range s.hc.Nodes() {
		as = append(as, n.Addr())
	}
	return as
}

// leader is the index of the node that leads now (asking the nodes up).
func (s *soakCluster) leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for i, n := range s.hc.Nodes() {
			if !s.up(i) {
				continue
			}
			sctx, c := context.WithTimeout(ctx, 500*time.Millisecond)
			st, err := n.Status(sctx)
			c()
			if err == nil && st.GetRole() == "leader" && st.GetReady() {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, errors.New("no leader within 30s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RestartRecord is one leader kill and the restart of the killed node.
type RestartRecord struct {
	At        time.Duration // since the soak began
	Node      string
	KillReady time.Duration // kill -9 → the restarted node's /readyz answers 200
	// From the restarted node's own log (0: no such line):
	// SnapshotRestore: `snapshot restored … took=`; Replay: `log replayed
	// … took=`, with Entries replayed; SnapshotBytes: the restored size.
	SnapshotRestore time.Duration
	SnapshotBytes   int64
	Replay          time.Duration
	Entries         int64
	Err             string
}

// SoakResult is what a soak measured.
type SoakResult struct {
	Config   SoakConfig
	Started  time.Time
	Finished time.Time
	Samples  []SoakSample
	Restarts []RestartRecord
	Cycles   int64 // cycles that completed
	Failed   int64 // cycles that failed at some step (e.g. during a failover)
	// Lost: acknowledged writes or adds that the final read does not show
	// (an Add counter off its acknowledged total, a Write value not the
	// last acknowledged one), with examples.
	Lost        int
	LostExample []string
	Ambiguous   int // writes/adds that never got an answer (outcome unknown; allowed either way)
	Resources   int // resources checked
	// FirstP99, LastP99: cycle p99 of the first and last Window.
	FirstP99, LastP99 time.Duration
	Window            time.Duration
	Checks            []SoakCheck
	NodeIDs           []string
}

// SoakCheck is one target, pass or fail.
type SoakCheck struct {
	Name   string
	Pass   bool
	Detail string
}

// Passed reports whether every check passed.
func (r *SoakResult) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return len(r.Checks) > 0
}

// RunSoak builds fence (unless FenceBin), runs the soak and returns its
// result; CSV and SVG are written when set. An error means the soak could
// not run; a failed target is a failed check in the result.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if cfg.Nodes < 3 {
		return nil, fmt.Errorf("soak: Nodes = %d, want at least 3 (a leader kill needs a majority left)", cfg.Nodes)
	}
	if cfg.Workers < 1 || cfg.Sessions < 1 || cfg.Locks < 1 || cfg.Rate <= 0 || cfg.SampleEvery <= 0 {
		return nil, fmt.Errorf("soak: Workers, Sessions, Locks, Rate and SampleEvery must be positive")
	}
	tmp, err := os.MkdirTemp(cfg.Tmp, "fencesoak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if cfg.FenceBin == "" {
		cfg.FenceBin = filepath.Join(tmp, "fence")
		cfg.logf("building fence from %s", cfg.Repo)
		if err := buildGo(ctx, cfg.Repo, "./cmd/fence", cfg.FenceBin); err != nil {
			return nil, err
		}
	}
	args := []string{"--max-locks", "0", "--max-waiters", "0", "--max-waiters-per-lock", "0", "--max-conns", "16384"}
	if cfg.MaxIDs > 0 {
		args = append(args, "--max-ids", strconv.Itoa(cfg.MaxIDs))
	}
	args = append(args, cfg.FenceFlags...)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	hc, err := harness.StartCluster(sctx, harness.ClusterConfig{N: cfg.Nodes, Bin: cfg.FenceBin, Dir: tmp, LogDir: tmp,
		LogLimit: 256 << 10, Args: args})
	cancel()
	if err != nil {
		return nil, err
	}
	cl := &soakCluster{hc: hc, dir: tmp, n: cfg.Nodes, restarting: make([]bool, cfg.Nodes)}
	defer hc.Close()
	res := &SoakResult{Config: cfg}
	for _, n := range hc.Nodes() {
		res.NodeIDs = append(res.NodeIDs, n.ID())
	}
	cfg.logf("cluster of %d up (%v); %d workers over %d sessions at %.0f cycles/s for %v, leader killed every %v",
		cfg.Nodes, cl.addrs(), cfg.Workers, cfg.Sessions, cfg.Rate, cfg.Duration, cfg.KillEvery)

	ld, err := newSoakLoad(ctx, &cfg, cl)
	if err != nil {
		return nil, err
	}
	defer ld.close()
	res.Started = time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	ld.start(loadCtx, &wg)

	smp := newSampler(&cfg, cl, ld, res.Started)
	var rmu sync.Mutex
	killDone := make(chan struct{})
	go func() {
		defer close(killDone)
		if cfg.KillEvery <= 0 {
			return
		}
		t := time.NewTicker(cfg.KillEvery)
		defer t.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-t.C:
			}
			// No kill in the window's last half-minute (half a kill
			// period if shorter): its restart would outlive the load,
			// and a tick that races the window's end must not count as
			// a failed restart.
			if dl, ok := loadCtx.Deadline(); loadCtx.Err() != nil || ok && time.Until(dl) < min(30*time.Second, cfg.KillEvery/2) {
				return
			}
			rec := killAndRestart(loadCtx, &cfg, cl, res.Started)
			smp.noteRestart(rec)
			rmu.Lock()
			res.Restarts = append(res.Restarts, rec)
			rmu.Unlock()
		}
	}()
	tick := time.NewTicker(cfg.SampleEvery)
sampling:
	for {
		select {
		case <-loadCtx.Done():
			break sampling
		case <-tick.C:
			s := smp.sample(ctx)
			res.Samples = append(res.Samples, s)
			cfg.logf("%s", s.line())
			if cfg.CSV != "" { // kept up to date: a run cut short still leaves its samples
				rmu.Lock()
				err := writeSoakCSV(cfg.CSV, res)
				rmu.Unlock()
				if err != nil {
					cfg.logf("%v", err)
				}
			}
		}
	}
	tick.Stop()
	wg.Wait()
	<-killDone
	res.Finished = time.Now()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// One last sample: the window since the last one, cycles that ran to
	// their end after the load's window closed included.
	s := smp.sample(ctx)
	res.Samples = append(res.Samples, s)
	cfg.logf("%s", s.line())
	res.Cycles, res.Failed = ld.cycles.Load(), ld.failed.Load()
	cfg.logf("load over: %d cycles, %d failed; checking every resource", res.Cycles, res.Failed)
	if err := ld.verify(ctx, res); err != nil {
		return nil, fmt.Errorf("soak: final read: %w", err)
	}
	res.Window = cfg.Window
	if res.Window <= 0 {
		res.Window = min(10*time.Minute, cfg.Duration/3)
	}
	res.FirstP99, res.LastP99 = ld.windowP99(res.Window)
	res.Checks = soakChecks(res)
	if cfg.CSV != "" {
		if err := writeSoakCSV(cfg.CSV, res); err != nil {
			return res, err
		}
	}
	if cfg.SVG != "" {
		if err := os.WriteFile(cfg.SVG, []byte(soakSVG(res)), 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

// killAndRestart kills the node that leads with SIGKILL and restarts it at
// once with the same flags, timing kill → ready and reading the restore
// and replay times from the restarted node's log.
func killAndRestart(ctx context.Context, cfg *SoakConfig, cl *soakCluster, t0 time.Time) RestartRecord {
	var rec RestartRecord
	i, err := cl.leader(ctx)
	if err != nil {
		rec.Err = err.Error()
		rec.At = time.Since(t0)
		cfg.logf("kill: %v", err)
		return rec
	}
	n := cl.hc.Node(i)
	rec.Node = n.ID()
	cl.mu.Lock()
	cl.restarting[i] = true
	cl.mu.Unlock()
	killed := time.Now()
	rec.At = killed.Sub(t0)
	if err := n.Kill(); err != nil {
		rec.Err = err.Error()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	err = n.Restart(rctx)
	cancel()
	rec.KillReady = time.Since(killed)
	if err != nil && rec.Err == "" {
		rec.Err = oneLine(err.Error())
	}
	cl.mu.Lock()
	cl.restarting[i] = false
	cl.mu.Unlock()
	// `log replayed` may come just after /readyz answers: wait for it a
	// little (a node that restored a snapshot and replays nothing logs it
	// too).
	for wait := time.Now().Add(10 * time.Second); ; {
		rec.SnapshotRestore, rec.SnapshotBytes, rec.Replay, rec.Entries = restartTimes(n.LastLog())
		if rec.Replay > 0 || time.Now().After(wait) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfg.logf("killed leader %s (kill -9) and restarted it: ready %v after the kill; snapshot restored in %v (%d bytes), %d entries replayed in %v [%s]%s",
		rec.Node, rec.KillReady.Round(time.Millisecond), rec.SnapshotRestore, rec.SnapshotBytes, rec.Entries, rec.Replay, restartParts(n.LastLog()), errSuffix(rec.Err))
	return rec
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "; error: " + e
}
