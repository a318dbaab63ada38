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

	Duration time.Duration // how long the workers run under the nemesis
	// Nodes is 1 (default: the single-node server), or 3 or 5: a raft
	// cluster (static --peers) with a fault proxy on every directed peer
	// link; the workers get every node's client proxy as endpoints.
	Nodes     int
	Seed      uint64   // the nemesis schedule and every worker's choices
	Workers   int      // worker processes (default 5)
	Resources int      // K locks and resources (default 3)
	Stores    []string // default: both; the control run uses only PostgreSQL
	// PostgresDSN is the database of the guard store.
	PostgresDSN string
	// TTL of standalone leases and SessionTTL of the workers' sessions
	// (default 1s each): a worker pause lasts 1.5–3× TTL.
	TTL, SessionTTL time.Duration
	// Control switches fencing off in the workers: plain PostgreSQL writes,
	// which checker 1 must catch (the story's "without fencing" row).
	Control bool
	// Kinds are the faults the nemesis may inject (default AllFaults, and
	// ClusterFaults with Nodes > 1). A run with FaultDiskFull puts the data
	// dirs on tmpfs of DiskBytes each.
	Kinds     []FaultKind
	DiskBytes int64
	// ServerArgs and ServerEnv are added to every node's command line and
	// environment (FENCE_PLANTBUG=... for a plantbug build).
	ServerArgs []string
	ServerEnv  []string
	// RestoreInProcess restores with package backup in the harness's
	// process instead of `fence restore` (the same rule).
	RestoreInProcess bool
	// PlantRestoreNoRaise is a PLANTED BUG for the harness's own test:
	// every restore leaves the counter at the backup's (no floor, wall
	// clock of 1970): tokens issued after the backup are issued again,
	// which the tokens-regressed checker must catch.
	PlantRestoreNoRaise bool
	// TLS serves every node's client port over TLS (certificates from the
	// fence binary's `fence cert`, in Dir/pki): the workers, the nemesis
	// and the final reads all speak HTTPS.
	TLS bool
	// Auth turns authentication on once the nodes are up (EnableAuth):
	// each worker calls with a token of its own, the harness and the
	// nemesis as admin.
	Auth bool
	// Boundaries adds the lock-boundary workers (issue 23), one per
	// workload of BoundaryMix, after the Workers story workers: the
	// catalog pattern's SKU workers and import, set workers and permit
	// workers. Not in a control run (its stores are PostgreSQL's alone,
	// without the import's built-in store).
	Boundaries bool
	// LinTimeout bounds porcupine per run (default 2m).
	LinTimeout time.Duration
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

// AllFaults is every fault kind the nemesis knows.
var AllFaults = []FaultKind{
	FaultWorkerPause, FaultServerPause, FaultServerKill, FaultConnReset,
	FaultConnBlackhole, FaultConnDelay, FaultConnOneWay, FaultDiskFull,
	FaultRestore,
}

// Summary is the outcome of a run: its one-line form is what `fence-chaos`
// prints last.
type Summary struct {
	Seed     uint64
	Duration time.Duration
	Nodes    int
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
	restores := ""
	if s.Report.Restores > 0 || s.Faults[FaultRestore] > 0 {
		restores = fmt.Sprintf(" restores=%d restore_mismatch=%d", s.Report.Restores, s.Report.RestoreMismatch)
	}
	faults := strings.Join(kinds, ",")
	if len(s.Missing) > 0 {
		faults += fmt.Sprintf(" missing=%v", s.Missing)
	}
	forged := ""
	if s.Report.Forgeries > 0 || s.Report.HonestAccepted > 0 {
		forged = fmt.Sprintf(" forgeries=%d forgeries_accepted=%d forgeries_changed=%d honest_refused=%d", s.Report.Forgeries, s.Report.ForgeriesAccepted, s.Report.ForgeriesChanged, s.Report.HonestRefused)
	}
	bounds := ""
	if s.Report.PermitsExceeded > 0 || s.Report.SetsBroken > 0 || s.Report.HolderLooks > 0 {
		bounds = fmt.Sprintf(" permits_exceeded=%d sets_broken=%d holder_looks=%d", s.Report.PermitsExceeded, s.Report.SetsBroken, s.Report.HolderLooks)
	}
	return fmt.Sprintf("chaos %s seed=%d duration=%s nodes=%d ops=%d faults=%s stale_accepted=%d tokens_regressed=%d overlaps=%d%s early_expiry=%d/%d lost_writes=%d double_applies=%d%s%s missing_final=%d malformed=%d%s crashes=%d wedged=%d unrecovered=%d stale_refused=%d linearizable=%s result=%s",
		mode, s.Seed, s.Duration, max(s.Nodes, 1), s.Report.Ops, faults, s.Report.StaleAccepted,
		s.Report.TokensRegressed, s.Report.Overlaps, bounds, s.Report.EarlyExpiry, s.Report.Expiries, s.Report.LostWrites, s.Report.DoubleApplies, restores, forged,
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
	if c.Control {
		c.Boundaries = false
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
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	if c.Nodes != 1 && c.Nodes != 3 && c.Nodes != 5 {
		return fmt.Errorf("chaos: Nodes %d: want 1, 3 or 5", c.Nodes)
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllFaults
		if c.Nodes > 1 {
			c.Kinds = append(append([]FaultKind(nil), AllFaults...), ClusterFaults...)
		}
	}
	for _, k := range c.Kinds {
		if k.clusterFault() && c.Nodes < 3 {
			return fmt.Errorf("chaos: fault %s needs a cluster (Nodes 3 or 5)", k)
		}
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
// exists), where an aimed pause lands the story's hazard.
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
	sum := Summary{Seed: cfg.Seed, Duration: cfg.Duration, Nodes: cfg.Nodes, Control: cfg.Control, Dir: cfg.Dir}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return sum, err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%s chaos: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	var err error
	ccfg := ClusterConfig{
		Nodes: cfg.Nodes, Bin: cfg.FenceBin, Dir: cfg.Dir,
		Args: cfg.ServerArgs, Env: cfg.ServerEnv,
	}
	if cfg.TLS {
		if ccfg.Security, err = NewSecurity(cfg.FenceBin, filepath.Join(cfg.Dir, "pki")); err != nil {
			return sum, err
		}
	}
	if slices.Contains(cfg.Kinds, FaultDiskFull) {
		ccfg.DiskBytes = cfg.DiskBytes
	}
	if cfg.Auth && ccfg.Security == nil {
		ccfg.Security = &Security{}
	}
	// The workers' workloads: the story's, then the lock-boundary ones.
	workloads := make([]string, cfg.Workers)
	if cfg.Boundaries {
		workloads = append(workloads, BoundaryMix...)
	}
	cluster, err := StartCluster(ctx, ccfg)
	if err != nil {
		return sum, fmt.Errorf("chaos: start the nodes: %w", err)
	}
	defer cluster.Close()
	if cfg.Auth {
		if err := ccfg.Security.EnableAuth(ctx, cfg.FenceBin, strings.Join(cluster.DirectURLs(), ","), len(workloads), cluster.Nodes); err != nil {
			return sum, err
		}
		logf("authentication on: an admin token for the harness, a token of its own for each of %d workers", len(workloads))
	}
	for i, node := range cluster.Nodes {
		raft := ""
		if node.RaftAddr() != "" {
			raft = ", raft " + node.RaftAddr()
		}
		logf("node %d (%s) on %s%s, clients through proxy %s, data %s", i, node.Name(), node.DirectURL(), raft, node.URL(), node.Config().DataDir)
	}

	prefix := runPrefix(cfg.Seed)
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
	for i, wl := range workloads {
		wc := WorkerConfig{
			Workload: wl,
			ID:       i, Server: strings.Join(rotate(cluster.Endpoints(), i), ","), Resources: cfg.Resources, Stores: cfg.Stores,
			PostgresDSN: cfg.PostgresDSN, PGPrefix: prefix,
			History: filepath.Join(cfg.Dir, fmt.Sprintf("history-%d.jsonl", i)),
			Seed:    cfg.Seed*1_000_003 + uint64(i) + 1, TTL: cfg.TTL, SessionTTL: cfg.SessionTTL,
			Control: cfg.Control,
		}
		if ccfg.Security != nil && ccfg.Security.TLS != nil {
			wc.CACert = filepath.Join(ccfg.Security.Dir, "ca.crt")
		}
		if ccfg.Security != nil && i < len(ccfg.Security.WorkerTokens) {
			wc.AuthToken = ccfg.Security.WorkerTokens[i]
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
	if cfg.Boundaries {
		logf("%d lock-boundary workers: %v", len(BoundaryMix), BoundaryMix)
	}

	// The forger (forger.go), with the PostgreSQL store: forged tokens at
	// the run's guard for the whole run. Its guard verifies with the
	// cluster's key set (GET /v1/keys of the nodes, fetched directly);
	// in the control run it has none, and must be seen accepting them.
	forging := slices.Contains(cfg.Stores, StorePostgres)
	stopForger := func() error { return nil }
	if forging {
		fcfg := ForgerConfig{
			Server: strings.Join(cluster.Endpoints(), ","), ClientOptions: ccfg.Security.ClientOptions(),
			PostgresDSN: cfg.PostgresDSN, PGPrefix: prefix, Seed: cfg.Seed,
			History: filepath.Join(cfg.Dir, "history-forger.jsonl"),
		}
		if !cfg.Control {
			fcfg.Keys = newKeyCache(cluster.DirectURLs(), ccfg.Security.tlsConfig(), ccfg.Security.token())
		}
		histories = append(histories, fcfg.History)
		fctx, fcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- RunForger(fctx, fcfg) }()
		var once sync.Once
		var ferr error
		stopForger = func() error {
			once.Do(func() { fcancel(); ferr = <-done })
			return ferr
		}
		defer stopForger()
		logf("forger on forge-0, forge-1, forge-max at the PostgreSQL guard, key set: %v", !cfg.Control)
	}

	// The nemesis, on its seeded schedule.
	sched := ScheduleConfig{Seed: cfg.Seed, Duration: cfg.Duration, Kinds: cfg.Kinds,
		Workers: len(workloads), Nodes: cfg.Nodes, TTL: cfg.TTL}.Schedule()
	nem := &Nemesis{Cluster: cluster, Workers: procs, Log: cfg.Log}
	if slices.Contains(cfg.Kinds, FaultRestore) {
		rc := &RestoreConfig{Bin: cfg.FenceBin, Dir: cfg.Dir, Resources: cfg.Resources,
			// every lease and session granted before the cut has ended
			// by its holder's clock (less the 1% drift) before the
			// restored cluster can grant again
			MinCut:    max(cfg.TTL, cfg.SessionTTL)*102/100 + 200*time.Millisecond,
			NoRaise:   cfg.PlantRestoreNoRaise,
			InProcess: cfg.RestoreInProcess,
		}
		if slices.Contains(cfg.Stores, StorePostgres) && !cfg.Control {
			rc.PostgresDSN, rc.GuardTable = cfg.PostgresDSN, prefix+"_guard"
		}
		nem.Restore = rc
	}
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
	if err := stopForger(); err != nil {
		return sum, fmt.Errorf("chaos: forger: %w", err)
	}
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

	// Final state: every resource read directly from the nodes (no proxy;
	// a follower forwards to the leader).
	var final []Op
	var downNodes []int
	for i, node := range cluster.Nodes {
		if exited, _ := node.Exited(); exited && sum.Unrecovered == 0 {
			if err := node.Restart(ctx); err != nil {
				sum.Unrecovered++
				downNodes = append(downNodes, i)
				logf("unrecovered: node %d could not be restarted for the final reads: %v", i, err)
			}
		}
	}
	if sum.Unrecovered > 0 {
		// The data dirs are the evidence (they live on the tmpfs that
		// Close unmounts): keep a copy next to the history.
		for i, node := range cluster.Nodes {
			kept := filepath.Join(cfg.Dir, fmt.Sprintf("node%d-data.kept", i))
			if out, err := exec.Command("cp", "-a", node.Config().DataDir, kept).CombinedOutput(); err != nil {
				logf("could not keep the data dir of node %d: %v: %s", i, err, out)
			} else {
				logf("node %d's data dir is kept in %s", i, kept)
			}
		}
	}
	running := 0
	for _, node := range cluster.Nodes {
		if node.Running() {
			running++
		}
	}
	// A cluster with a majority up can still answer (the run fails on the
	// unrecovered node either way, but the history is judged in full).
	if sum.Unrecovered == 0 || cluster.Raft() && running > len(cluster.Nodes)/2 {
		final, err = FinalReads(ctx, strings.Join(cluster.DirectURLs(), ","), cfg.PostgresDSN, prefix, cfg.Resources, cfg.Stores, ccfg.Security.ClientOptions()...)
		if err != nil {
			// A node back up but unable to serve a read is a finding, not
			// a harness failure: the resources without a final read fail
			// the check (missing_final), and the history is still judged.
			logf("final reads failed: %v", err)
		}
	} else {
		logf("no final reads: node(s) %v down (%d of %d running); checking the workers' histories alone", downNodes, running, len(cluster.Nodes))
	}
	// The restores' records (backups, cuts, end-of-epoch and restored
	// reads) go with the final reads: `fence-chaos check DIR` sees them.
	final = append(nem.Restores(), final...)
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
	if forging && r.Forgeries+r.HonestAccepted+r.HonestRefused == 0 {
		sum.Pass = false
		sum.Report.Problems = append(sum.Report.Problems, errNoForger.Error())
		r.Problems = sum.Report.Problems
	}
	if forging {
		logf("forgeries: %d judged, %d accepted %v, %d refused with the store changed, %d refused not as FORGED_TOKEN; the forger's own tokens: %d accepted, %d refused",
			r.Forgeries, r.ForgeriesAccepted, r.ForgeriesAcceptedBy, r.ForgeriesChanged, r.ForgeriesMisrefused, r.HonestAccepted, r.HonestRefused)
	}
	for _, p := range r.Problems {
		logf("problem: %s", p)
	}
	return sum, nil
}

// rotate is eps starting at index i (mod its length): each worker's client
// starts on another node (it stays on the endpoint that works), so that
// clients reach the leader directly and through followers that forward.
func rotate(eps []string, i int) []string {
	if len(eps) == 0 {
		return nil
	}
	i %= len(eps)
	return append(append([]string(nil), eps[i:]...), eps[:i]...)
}
