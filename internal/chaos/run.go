package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config is one chaos run.
type Config struct {
	FenceBin  string // the fence binary the nodes run
	WorkerBin string // the fence-chaos binary; workers run `WorkerBin worker ARGS`
	Dir       string // where histories, logs and visualisations are written (kept)

	Duration  time.Duration // how long the workers run under the nemesis
	Seed      uint64        // the nemesis schedule and every worker's choices
	Workers   int           // worker processes (default 5)
	Resources int           // K locks and resources (default 3)
	Stores    []string      // default: both; the control run uses only PostgreSQL
	// PostgresDSN is the database of the guard store.
	PostgresDSN string
	// TTL of standalone leases and SessionTTL of the workers' sessions
	// (default 1s each): a worker pause lasts 1.5–3× TTL.
	TTL, SessionTTL time.Duration
	// Control switches fencing off in the workers: plain PostgreSQL writes,
	// which checker 1 must catch (the seed's "without fence" row).
	Control bool
	// Kinds are the faults the nemesis may inject (default AllFaults). A run
	// with FaultDiskFull puts the data dir on a tmpfs of DiskBytes.
	Kinds     []FaultKind
	DiskBytes int64
	// ServerArgs and ServerEnv are added to every node's command line and
	// environment (FENCE_PLANTBUG=... for a plantbug build).
	ServerArgs []string
	ServerEnv  []string
	// LinTimeout bounds porcupine per run (default 2m).
	LinTimeout time.Duration
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// AllFaults is every fault kind the nemesis knows.
var AllFaults = []FaultKind{
	FaultWorkerPause, FaultServerPause, FaultServerKill, FaultConnReset,
	FaultConnBlackhole, FaultConnDelay, FaultConnOneWay, FaultDiskFull,
}

// Summary is the outcome of a run: its one-line form is what `fence-chaos`
// prints last.
type Summary struct {
	Seed     uint64
	Duration time.Duration
	Control  bool
	Faults   map[FaultKind]int
	Report   Report
	// Crashes are node exits the nemesis did not cause (a panic, a race,
	// a fatal error other than the disk-full fail-stop).
	Crashes int
	// Wedged counts disk-full faults after which the node neither exited
	// nor became ready again once the disk had room (R2: fail-stop, never
	// wedge); FailStops counts those it answered by exiting non-zero.
	Wedged, FailStops int
	// Planned is the number of faults in the schedule. Missing are kinds
	// that were scheduled but never applied (the nemesis fell behind, or
	// could not inject them): the run did not test what it says, and
	// fails. Unscheduled are requested kinds that did not fit the duration.
	Planned              int
	Missing, Unscheduled []FaultKind
	// Unrecovered counts nodes that could not be restarted at all (after
	// a disk-full, a kill or a crash): a node that fail-stops must come
	// back once its cause is gone.
	Unrecovered int
	// Pass: every checker held (a control run passes when checker 1 caught
	// the hazard and every other checker held).
	Pass bool
	Dir  string
}

// Line is the one summary line.
func (s Summary) Line() string {
	var kinds []string
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(kinds)
	lin := "yes"
	if !s.Report.Linearizable {
		lin = "no"
	}
	result := "PASS"
	if !s.Pass {
		result = "FAIL"
	}
	mode := "fenced"
	if s.Control {
		mode = "control"
	}
	empty := ""
	if s.Report.Empty {
		empty = " empty=yes"
	}
	faults := strings.Join(kinds, ",")
	if len(s.Missing) > 0 {
		faults += fmt.Sprintf(" missing=%v", s.Missing)
	}
	return fmt.Sprintf("chaos %s seed=%d duration=%s ops=%d faults=%s stale_accepted=%d tokens_regressed=%d overlaps=%d early_expiry=%d lost_writes=%d double_applies=%d missing_final=%d malformed=%d%s crashes=%d wedged=%d unrecovered=%d stale_refused=%d linearizable=%s result=%s",
		mode, s.Seed, s.Duration, s.Report.Ops, faults, s.Report.StaleAccepted,
		s.Report.TokensRegressed, s.Report.Overlaps, s.Report.EarlyExpiry, s.Report.LostWrites, s.Report.DoubleApplies,
		s.Report.MissingFinal, s.Report.Malformed, empty, s.Crashes, s.Wedged, s.Unrecovered,
		s.Report.StaleRefused, lin, result)
}

func (c *Config) defaults() error {
	if c.FenceBin == "" || c.WorkerBin == "" {
		return errors.New("chaos: FenceBin and WorkerBin are required")
	}
	if c.Dir == "" {
		return errors.New("chaos: Dir is required")
	}
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Workers <= 0 {
		c.Workers = 5
	}
	if c.Resources <= 0 {
		c.Resources = 3
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = time.Second
	}
	if len(c.Stores) == 0 {
		c.Stores = []string{StoreFence, StorePostgres}
		if c.Control {
			c.Stores = []string{StorePostgres}
		}
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllFaults
	}
	if c.DiskBytes <= 0 {
		c.DiskBytes = 512 << 20 // raft-wal preallocates 64 MiB segments; tmpfs takes RAM only for pages used
	}
	if c.LinTimeout <= 0 {
		c.LinTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// workerProcs are the worker processes, for the nemesis's pauses.
type workerProcs struct {
	mu      sync.Mutex
	windows []string // each worker's write-window marker file (WorkerConfig.WindowFile)
	cmds    []*exec.Cmd
	done    []chan struct{}
	exits   []error
}

func (w *workerProcs) Len() int { return len(w.cmds) }

// InWindow: worker i is between its read and its write (its marker file
// exists), where an aimed pause lands the seed's hazard.
func (w *workerProcs) InWindow(i int) bool {
	if i < 0 || i >= len(w.windows) {
		return false
	}
	_, err := os.Stat(w.windows[i])
	return err == nil
}

func (w *workerProcs) Signal(i int, sig syscall.Signal) error {
	if i < 0 || i >= len(w.cmds) {
		return fmt.Errorf("chaos: no worker %d", i)
	}
	select {
	case <-w.done[i]:
		return fmt.Errorf("chaos: worker %d has exited", i)
	default:
	}
	return w.cmds[i].Process.Signal(sig)
}

// Run starts a node behind its proxy, the workers and the nemesis, runs for
// cfg.Duration, heals every fault, stops the workers, reads every resource's
// final state and checks the history. The error is for a harness that could
// not run; a run that found faults returns a Summary with Pass false.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.defaults(); err != nil {
		return Summary{}, err
	}
	sum := Summary{Seed: cfg.Seed, Duration: cfg.Duration, Control: cfg.Control, Dir: cfg.Dir}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return sum, err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%s chaos: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	ncfg := NodeConfig{
		Bin:     cfg.FenceBin,
		DataDir: filepath.Join(cfg.Dir, "node0-data"),
		// Listen "": StartNode picks a free loopback port, kept across
		// restarts so that the proxy's upstream stays valid.
		Args:    cfg.ServerArgs,
		Env:     cfg.ServerEnv,
		LogPath: filepath.Join(cfg.Dir, "node0.log"),
	}
	if slices.Contains(cfg.Kinds, FaultDiskFull) {
		ncfg.DiskBytes = cfg.DiskBytes
	}
	node, err := StartNode(ctx, ncfg)
	if err != nil {
		return sum, fmt.Errorf("chaos: start node: %w", err)
	}
	cluster := &Cluster{Nodes: []*Node{node}}
	defer cluster.Close()
	logf("node 0 on %s, clients through proxy %s, data %s", node.DirectURL(), node.URL(), ncfg.DataDir)

	prefix := fmt.Sprintf("chaos_%d_%d", os.Getpid(), cfg.Seed%1_000_000)
	if slices.Contains(cfg.Stores, StorePostgres) {
		if err := SetupPostgres(ctx, cfg.PostgresDSN, prefix, cfg.Resources); err != nil {
			return sum, fmt.Errorf("chaos: PostgreSQL guard store: %w", err)
		}
		defer DropPostgres(context.Background(), cfg.PostgresDSN, prefix)
	}

	// Workers, each its own process with its own history file.
	procs := &workerProcs{}
	var histories []string
	// Registered before the first start: a worker that fails to start
	// must not leave the ones started before it running.
	stopWorkers := func() {
		for i, cmd := range procs.cmds {
			select {
			case <-procs.done[i]:
				continue
			default:
			}
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		deadline := time.After(30 * time.Second)
		for i, cmd := range procs.cmds {
			select {
			case <-procs.done[i]:
			case <-deadline:
				_ = cmd.Process.Kill()
				<-procs.done[i]
			}
		}
	}
	defer stopWorkers()
	for i := 0; i < cfg.Workers; i++ {
		wc := WorkerConfig{
			ID: i, Server: node.URL(), Resources: cfg.Resources, Stores: cfg.Stores,
			PostgresDSN: cfg.PostgresDSN, PGPrefix: prefix,
			History: filepath.Join(cfg.Dir, fmt.Sprintf("history-%d.jsonl", i)),
			Seed:    cfg.Seed*1_000_003 + uint64(i) + 1, TTL: cfg.TTL, SessionTTL: cfg.SessionTTL,
			Control: cfg.Control,
		}
		histories = append(histories, wc.History)
		procs.windows = append(procs.windows, wc.WindowFile())
		logFile, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("worker-%d.log", i)))
		if err != nil {
			return sum, err
		}
		cmd := exec.Command(cfg.WorkerBin, append([]string{"worker"}, wc.Args()...)...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// A worker dies with the harness, even a kill -9 of it (the nodes
		// do the same): no orphan goes on writing, or stays stopped.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return sum, fmt.Errorf("chaos: start worker %d: %w", i, err)
		}
		done := make(chan struct{})
		procs.cmds = append(procs.cmds, cmd)
		procs.done = append(procs.done, done)
		procs.exits = append(procs.exits, nil)
		go func(i int) {
			err := cmd.Wait()
			logFile.Close()
			procs.mu.Lock()
			procs.exits[i] = err
			procs.mu.Unlock()
			close(done)
		}(i)
	}
	logf("%d workers on %d resources, stores %v, control=%v, ttl %s, session ttl %s",
		cfg.Workers, cfg.Resources, cfg.Stores, cfg.Control, cfg.TTL, cfg.SessionTTL)

	// The nemesis, on its seeded schedule.
	sched := Schedule(cfg.Seed, cfg.Duration, cfg.Kinds, cfg.Workers, cfg.TTL)
	nem := &Nemesis{Cluster: cluster, Workers: procs, Log: cfg.Log}
	nctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	counts, nerr := nem.Run(nctx, sched)
	cancel()
	sum.Faults = counts
	sum.Planned = len(sched)
	scheduled := map[FaultKind]bool{}
	for _, f := range sched {
		scheduled[f.Kind] = true
	}
	for _, k := range cfg.Kinds {
		switch {
		case !scheduled[k]:
			sum.Unscheduled = append(sum.Unscheduled, k)
		case counts[k] == 0:
			sum.Missing = append(sum.Missing, k)
		}
	}
	if len(sum.Unscheduled) > 0 {
		logf("fault kinds that did not fit in %s: %v", cfg.Duration, sum.Unscheduled)
	}
	if len(sum.Missing) > 0 {
		logf("fault kinds scheduled but never applied (the nemesis fell behind or could not inject them): %v", sum.Missing)
	}
	// A node the nemesis could not bring back is a finding about Fence
	// (R2: fail-stop, then restart), not a harness failure: it fails the
	// run, and the history is still checked (without final reads).
	sum.Unrecovered = len(nem.Unrecovered())
	for _, u := range nem.Unrecovered() {
		logf("unrecovered: %s", u)
	}
	if nerr != nil && sum.Unrecovered == 0 && !errors.Is(nerr, context.DeadlineExceeded) && !errors.Is(nerr, context.Canceled) {
		return sum, fmt.Errorf("chaos: nemesis: %w", nerr)
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	logf("nemesis done: %v; stopping workers", counts)
	stopWorkers()
	procs.mu.Lock()
	for i, err := range procs.exits {
		if err != nil {
			logf("worker %d exited: %v (see worker-%d.log)", i, err, i)
			sum.Crashes++
		}
	}
	procs.mu.Unlock()
	sum.Crashes += nem.Crashes()
	for _, note := range nem.CrashNotes() {
		logf("crash: %s", note)
	}
	for _, d := range nem.DiskFull() {
		if d.Wedged {
			sum.Wedged++
			logf("disk-full: node %d neither exited nor became ready after the disk had room again (wedged)", d.Node)
		}
		if d.FailStopped() {
			sum.FailStops++
		}
	}

	// Final state: every resource read directly from the node (no proxy).
	var final []Op
	if exited, _ := node.Exited(); exited && sum.Unrecovered == 0 {
		if err := node.Restart(ctx); err != nil {
			sum.Unrecovered++
			logf("unrecovered: node 0 could not be restarted for the final reads: %v", err)
		}
	}
	if sum.Unrecovered > 0 {
		// The data dir is the evidence (it lives on the tmpfs that Close
		// unmounts): keep a copy next to the history.
		kept := filepath.Join(cfg.Dir, "node0-data.kept")
		if out, err := exec.Command("cp", "-a", ncfg.DataDir, kept).CombinedOutput(); err != nil {
			logf("could not keep the data dir of the unrecovered node: %v: %s", err, out)
		} else {
			logf("the unrecovered node's data dir is kept in %s", kept)
		}
	}
	if sum.Unrecovered == 0 {
		final, err = FinalReads(ctx, node.DirectURL(), cfg.PostgresDSN, prefix, cfg.Resources, cfg.Stores)
		if err != nil {
			// A node back up but unable to serve a read is a finding, not
			// a harness failure: the resources without a final read fail
			// the check (missing_final), and the history is still judged.
			logf("final reads failed: %v", err)
		}
	} else {
		logf("no final reads: the node is down; checking the workers' histories alone")
	}
	finalPath := filepath.Join(cfg.Dir, "final.jsonl")
	rec, err := NewRecorder(finalPath)
	if err != nil {
		return sum, err
	}
	for _, op := range final {
		if err := rec.Record(op); err != nil {
			rec.Close()
			return sum, err
		}
	}
	if err := rec.Close(); err != nil {
		return sum, err
	}

	ops, err := ReadHistoryFiles(append(histories, finalPath)...)
	if err != nil {
		return sum, fmt.Errorf("chaos: read histories: %w", err)
	}
	logf("checking %d ops", len(ops))
	sum.Report = Check(ops, cfg.Dir, cfg.LinTimeout)
	r := sum.Report
	sum.Pass = r.Holds(cfg.Control) && sum.Crashes == 0 && sum.Wedged == 0 && sum.Unrecovered == 0 && len(sum.Missing) == 0
	for _, p := range r.Problems {
		logf("problem: %s", p)
	}
	return sum, nil
}
