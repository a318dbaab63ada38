package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// FaultKind names a fault the nemesis injects.
type FaultKind string

const (
	// FaultWorkerPause stops a worker process (SIGSTOP) for 1.5–3× the TTL
	// and continues it (SIGCONT): the story's pause, after which the worker
	// sends its now stale write.
	FaultWorkerPause FaultKind = "worker-pause"
	// FaultServerPause stops the node's process, then continues it.
	FaultServerPause FaultKind = "server-pause"
	// FaultServerKill kills the node with SIGKILL and restarts it after For,
	// sometimes with other flags (Fault.RestartArgs).
	FaultServerKill FaultKind = "server-kill"
	// FaultConnReset cuts every client connection to the node, again every
	// 250ms during For.
	FaultConnReset FaultKind = "conn-reset"
	// FaultConnBlackhole drops every byte both ways (connections stay open).
	FaultConnBlackhole FaultKind = "conn-blackhole"
	// FaultConnDelay delays each direction by Fault.Delay.
	FaultConnDelay FaultKind = "conn-delay"
	// FaultConnOneWay drops the bytes of one direction (Fault.Dir): requests
	// (Upstream: never arrive) or replies (Downstream: applied, unanswered).
	FaultConnOneWay FaultKind = "conn-oneway"
	// FaultDiskFull shrinks the node's tmpfs to what it uses and writes
	// large values to the node (directly, not through the proxy) until the
	// log needs space it does not get: the node must fail-stop (exit
	// non-zero). The disk gets its size back and a dead node is restarted
	// after For. Needs NodeConfig.DiskBytes.
	FaultDiskFull FaultKind = "disk-full"
)

// nodeFault reports whether k targets a node (else a worker).
func (k FaultKind) nodeFault() bool { return k != FaultWorkerPause }

// Fault is one scheduled fault.
type Fault struct {
	At   time.Duration // from the start of Nemesis.Run
	For  time.Duration // how long it lasts (server-kill: how long the node stays down)
	Kind FaultKind
	// Target indexes Workers for worker-pause, Cluster.Nodes otherwise.
	Target int
	Dir    Direction     // conn-oneway: the direction dropped (conn-blackhole: Both)
	Delay  time.Duration // conn-delay: per direction
	// RestartArgs are added to the node's args when server-kill restarts
	// it (e.g. --max-ttl 1h): a restart with other flags.
	RestartArgs []string
	// Aimed (worker-pause): wait up to For for a worker in its write
	// window (it read the stock and has yet to write: the story's pause) and
	// stop that one; Target when none is, or Workers cannot tell.
	Aimed bool

	// The cluster kinds (see ClusterFaults) choose their nodes when they
	// are applied, by role: Target then picks among the candidates
	// (followers, in index order, Target modulo their number).
	//
	// LeaderInMinority (split-majority): the leader is on the minority
	// side (else the minority is followers only).
	LeaderInMinority bool
	// FromLeader (peer-oneway): the messages cut are the leader's to a
	// follower (else a follower's to the leader).
	FromLeader bool
	// ClockOffset and ClockRate (clock-skew): the node's
	// FENCE_TEST_CLOCK_OFFSET and FENCE_TEST_CLOCK_RATE.
	ClockOffset time.Duration
	ClockRate   float64
	// BackupLead (restore): the backup is taken this long before At.
	BackupLead time.Duration
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", f.Kind)
	switch {
	case f.Kind.clusterFault() || f.Kind == FaultRestore:
		fmt.Fprintf(&b, " pick=%d", f.Target)
	case f.Kind.nodeFault():
		fmt.Fprintf(&b, " node=%d", f.Target)
	default:
		fmt.Fprintf(&b, " worker=%d", f.Target)
	}
	fmt.Fprintf(&b, " at=%s for=%s", f.At.Round(time.Millisecond), f.For.Round(time.Millisecond))
	if f.Kind == FaultConnOneWay || f.Kind == FaultConnBlackhole {
		fmt.Fprintf(&b, " dir=%s", f.Dir)
	}
	if f.Kind == FaultConnDelay {
		fmt.Fprintf(&b, " delay=%s", f.Delay)
	}
	if len(f.RestartArgs) > 0 {
		fmt.Fprintf(&b, " restart-args=%q", strings.Join(f.RestartArgs, " "))
	}
	switch f.Kind {
	case FaultSplitMajority:
		fmt.Fprintf(&b, " leader-in-minority=%v", f.LeaderInMinority)
	case FaultPeerOneWay:
		fmt.Fprintf(&b, " from-leader=%v", f.FromLeader)
	case FaultClockSkew:
		fmt.Fprintf(&b, " offset=%s rate=%s", f.ClockOffset, formatRate(f.ClockRate))
	case FaultRestore:
		fmt.Fprintf(&b, " backup-lead=%s", f.BackupLead.Round(time.Millisecond))
	}
	return b.String()
}

// ScheduleConfig is Schedule's input. Nodes > 1 spreads node faults over
// the nodes; the cluster kinds (ClusterFaults) choose their nodes when
// applied.
type ScheduleConfig struct {
	Seed     uint64
	Duration time.Duration
	Kinds    []FaultKind
	Workers  int           // worker-pause targets 0..Workers-1 (none: no worker pauses)
	Nodes    int           // node faults target 0..Nodes-1 (default 1)
	TTL      time.Duration // the workers' lease TTL (default 1s)
	// Warmup is fault-free time at the start, Tail at the end, for the
	// workload to settle (defaults: Duration/20, within 0.5–3s).
	Warmup, Tail time.Duration
}

// Schedule is ScheduleConfig{...}.Schedule() for one node.
func Schedule(seed uint64, d time.Duration, kinds []FaultKind, workers int, ttl time.Duration) []Fault {
	return ScheduleConfig{Seed: seed, Duration: d, Kinds: kinds, Workers: workers, Nodes: 1, TTL: ttl}.Schedule()
}

// Schedule returns the faults, deterministic in the config, sorted by At,
// in two lanes. Node faults come one after another (each starts after the
// previous one's For and a gap of 0.2–1s): the first round is every node
// kind once, in a shuffled order, as far as the duration allows; then
// kinds are drawn at random until the duration (less Tail) is used up.
// Worker pauses, the story's hazard, run alongside them, one after another
// on a worker drawn each time, 0.5–2× TTL apart. Durations: worker-pause
// 1.5–3× TTL; server-pause, conn-blackhole and conn-oneway 0.5–2× TTL (at
// least 300ms); conn-delay 1–3× TTL with 50ms, 200ms or 600ms per
// direction; conn-reset 0.5–1.5s; server-kill down for 0.2–1s and, one time
// in three, restarted with --max-ttl 4×TTL (whole seconds, rounded up), 1h
// or 24h; disk-full 4–8s (the time the node has to fail-stop under the
// nemesis's large writes: about 64 MiB of them, as raft-wal's preallocated
// segment must fill first). The cluster kinds' lengths are in
// scheduleClusterFault.
func (c ScheduleConfig) Schedule() []Fault {
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	clamp := func(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }
	if c.Warmup <= 0 {
		c.Warmup = clamp(c.Duration/20, 500*time.Millisecond, 3*time.Second)
	}
	if c.Tail <= 0 {
		c.Tail = clamp(c.Duration/20, 500*time.Millisecond, 3*time.Second)
	}
	var kinds []FaultKind
	for _, k := range c.Kinds {
		if k == FaultWorkerPause && c.Workers <= 0 {
			continue
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6e656d65736973)) // "nemesis"
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	ttlTimes := func(lo, hi float64) time.Duration {
		return time.Duration(float64(c.TTL) * (lo + (hi-lo)*rng.Float64())).Round(time.Millisecond)
	}
	end := c.Duration - c.Tail
	make1 := func(k FaultKind) Fault {
		f := Fault{Kind: k, Dir: Both}
		if k == FaultWorkerPause {
			f.Target = rng.IntN(c.Workers)
		} else {
			f.Target = rng.IntN(c.Nodes)
		}
		switch k {
		case FaultWorkerPause:
			f.For = ttlTimes(1.5, 3)
			f.Aimed = rng.IntN(3) != 0 // two in three at the story's window
		case FaultServerPause, FaultConnBlackhole:
			f.For = max(ttlTimes(0.5, 2), 300*time.Millisecond)
		case FaultConnOneWay:
			f.For = max(ttlTimes(0.5, 2), 300*time.Millisecond)
			f.Dir = []Direction{Upstream, Downstream}[rng.IntN(2)]
		case FaultConnDelay:
			f.For = ttlTimes(1, 3)
			f.Delay = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 600 * time.Millisecond}[rng.IntN(3)]
		case FaultConnReset:
			f.For = between(500*time.Millisecond, 1500*time.Millisecond).Round(time.Millisecond)
		case FaultServerKill:
			f.For = between(200*time.Millisecond, time.Second).Round(time.Millisecond)
			if rng.IntN(3) == 0 {
				long := (4 * c.TTL).Round(time.Second)
				if long < 4*c.TTL {
					long += time.Second
				}
				f.RestartArgs = []string{"--max-ttl", []string{long.String(), "1h", "24h"}[rng.IntN(3)]}
			}
		case FaultDiskFull:
			f.For = between(4*time.Second, 8*time.Second).Round(time.Millisecond)
		case FaultRestore:
			// For: how long the clients are cut off (the nemesis makes it
			// at least the longest TTL, RestoreConfig.MinCut); the backup
			// 1–10 s before, placed below
			f.For = max(ttlTimes(1.5, 3), between(1500*time.Millisecond, 3*time.Second)).Round(time.Millisecond)
			f.BackupLead = between(time.Second, 10*time.Second).Round(time.Millisecond)
		default:
			if !scheduleClusterFault(&f, between) {
				// a kind this schedule does not know: a second, to the Nemesis's judgement
				f.For = time.Second
			}
		}
		return f
	}
	// Node faults, one after another.
	var nodeKinds []FaultKind
	for _, k := range kinds {
		if k != FaultWorkerPause {
			nodeKinds = append(nodeKinds, k)
		}
	}
	var out []Fault
	at := c.Warmup
	place := func(f Fault) bool {
		if at+f.For > end {
			return false
		}
		f.At = at
		if f.Kind == FaultRestore {
			f.BackupLead = min(f.BackupLead, at/2)
		}
		out = append(out, f)
		at += f.For + between(200*time.Millisecond, time.Second).Round(time.Millisecond)
		return true
	}
	if len(nodeKinds) > 0 {
		first := append([]FaultKind(nil), nodeKinds...)
		rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
		for _, k := range first {
			place(make1(k)) // one that does not fit is left out; a shorter one may still fit
		}
		for misses := 0; misses < 20; {
			if !place(make1(nodeKinds[rng.IntN(len(nodeKinds))])) {
				misses++
			}
		}
	}
	// Worker pauses, the story's hazard, alongside: one after another, on
	// a worker drawn each time, 0.5–2× TTL apart.
	if len(nodeKinds) < len(kinds) {
		at := c.Warmup
		for {
			f := make1(FaultWorkerPause)
			if at+f.For > end {
				break
			}
			f.At = at
			out = append(out, f)
			at += f.For + ttlTimes(0.5, 2)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Workers are the worker processes, for worker-pause.
type Workers interface {
	Signal(i int, sig syscall.Signal) error
	Len() int
}

// WindowWorkers are Workers that can tell which of them is in its write
// window (between reading a resource and writing it under a lease), for
// aimed worker pauses.
type WindowWorkers interface {
	Workers
	InWindow(i int) bool
}

// Event is a fault as the nemesis applied it.
type Event struct {
	Fault
	Index      int       // in the schedule
	Start, End time.Time // applied, healed
	Applied    bool      // false: skipped (see Note)
	Note       string    // what happened (disk-full: whether the node fail-stopped)
}

// DiskFullResult is what a disk-full fault did to its node.
type DiskFullResult struct {
	Node     int
	Exited   bool // the node exited while its disk was full
	ExitCode int  // its exit code (-1: a signal)
	Writes   int  // the nemesis's large writes the node acknowledged meanwhile
	Wedged   bool // it neither exited nor answered /readyz afterwards
	// RestartFailed: the restart after the disk was freed failed (the
	// node is then down: see Nemesis.Unrecovered), e.g. raft-wal's tail
	// segment left "sealed" by the partial write that hit ENOSPC.
	RestartFailed bool
}

// FailStopped: the node exited non-zero when its disk filled.
func (r DiskFullResult) FailStopped() bool { return r.Exited && r.ExitCode != 0 }

// Nemesis applies a fault schedule to a cluster and its workers.
type Nemesis struct {
	Cluster *Cluster
	Workers Workers   // may be nil: worker pauses are skipped
	Log     io.Writer // one line per fault applied, healed or skipped; nil: discarded
	// HealTimeout bounds each repair after the run's context ended (a
	// restart waits for readiness): default 90s.
	HealTimeout time.Duration
	// ResetEvery is conn-reset's interval during For (default 250ms).
	ResetEvery time.Duration
	// Custom injects faults of kinds the nemesis does not know (a test's
	// own), by kind. They take turns with the other faults on node
	// Target's lane.
	Custom map[FaultKind]FaultFunc
	// DiskFillValue is the size of the disk-full fault's writes (default
	// fence.MaxValueBytes, 1 MiB). Negative: no writes, only the shrunk
	// disk.
	DiskFillValue int
	// Restore configures FaultRestore (nil: restores are skipped).
	Restore *RestoreConfig

	mu       sync.Mutex
	start    time.Time
	counts   map[FaultKind]int
	events   []Event
	crashes  []string
	diskFull []DiskFullResult
	errs     []error
	lanes    map[string]chan struct{}
	paused   map[int]bool // workers stopped by the nemesis
	fills    int
	down     map[int]*downNode // nodes the nemesis failed to restart

	restores   []restoreDone // the restores made, with their records
	nRestores  int
	lastBackup backupResult // the backup the last restore restored
	restoreMu  sync.RWMutex // a restore holds it; a backup attempt reads it
}

// downNode is a node whose restart failed: retried every 5s, not counted as
// a crash again.
type downNode struct {
	since    time.Time
	last     time.Time
	attempts int
	err      error
}

// FaultFunc injects f, calls hold (which returns when f.For has passed or
// the run's context ended), heals f and returns what happened: a note for
// the log, whether it was applied (counted), and an error only for a heal
// that failed. Use ctx only for the injection: it is done when hold returns
// early.
type FaultFunc func(ctx context.Context, f Fault, hold func()) (note string, applied bool, err error)

// Run applies sched, each fault at its At (faults on one node, or one
// worker, take turns: a fault waits for the previous one on its target to
// be healed), heals each after its For, and restarts a node that exited
// without the nemesis killing it (counted in Crashes). It returns when ctx
// ends, after healing everything: every proxy fault removed, every disk freed,
// every paused process continued, every node running (restarted with its
// base args if need be). The counts are the faults applied, by kind. The
// error is a repair that failed (a node that could not be restarted).
func (n *Nemesis) Run(ctx context.Context, sched []Fault) (map[FaultKind]int, error) {
	if n.Cluster == nil {
		return nil, errors.New("chaos: Nemesis needs a Cluster")
	}
	if n.HealTimeout <= 0 {
		n.HealTimeout = 90 * time.Second
	}
	if n.ResetEvery <= 0 {
		n.ResetEvery = 250 * time.Millisecond
	}
	if n.DiskFillValue == 0 {
		n.DiskFillValue = fence.MaxValueBytes
	}
	n.mu.Lock()
	n.start = time.Now()
	n.counts = map[FaultKind]int{}
	n.events, n.crashes, n.diskFull, n.errs = nil, nil, nil, nil
	n.lanes = map[string]chan struct{}{}
	n.paused = map[int]bool{}
	n.down = map[int]*downNode{}
	n.mu.Unlock()
	n.logf("nemesis: %d faults scheduled on %d node(s)", len(sched), len(n.Cluster.Nodes))

	var wg sync.WaitGroup
	for i, f := range sched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.run(ctx, i, f)
		}()
	}
	for i := range n.Cluster.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.watch(ctx, i)
		}()
	}
	wg.Wait()
	n.healAll(ctx)
	n.mu.Lock()
	for i, d := range n.down {
		n.errs = append(n.errs, fmt.Errorf("node %d could not be restarted (down since %s, %d attempts): %w",
			i, d.since.UTC().Format("15:04:05.000"), d.attempts, d.err))
	}
	n.mu.Unlock()

	counts := n.Counts()
	n.logf("nemesis: done: %s", formatFaultCounts(counts))
	n.mu.Lock()
	defer n.mu.Unlock()
	return counts, errors.Join(n.errs...)
}

func formatFaultCounts(c map[FaultKind]int) string {
	var parts []string
	known := append(append([]FaultKind(nil), AllFaults...), ClusterFaults...)
	if !slices.Contains(known, FaultRestore) {
		known = append(known, FaultRestore)
	}
	for _, k := range known {
		if c[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, c[k]))
		}
	}
	var other []string
	for k, v := range c {
		if !slices.Contains(known, k) {
			other = append(other, fmt.Sprintf("%s:%d", k, v))
		}
	}
	sort.Strings(other)
	parts = append(parts, other...)
	if parts == nil {
		return "no faults"
	}
	return strings.Join(parts, " ")
}

// Counts are the faults applied so far, by kind.
func (n *Nemesis) Counts() map[FaultKind]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[FaultKind]int, len(n.counts))
	for k, v := range n.counts {
		out[k] = v
	}
	return out
}

// Events are the faults of the last Run, in the order they were healed or
// skipped.
func (n *Nemesis) Events() []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Event(nil), n.events...)
}

// Crashes counts the node exits the nemesis did not cause (it restarted
// each): a panic, a fatal error. A fail-stop during disk-full is not one.
func (n *Nemesis) Crashes() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.crashes)
}

// CrashNotes describe each crash.
func (n *Nemesis) CrashNotes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.crashes...)
}

// DiskFull is what each disk-full fault did.
func (n *Nemesis) DiskFull() []DiskFullResult {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]DiskFullResult(nil), n.diskFull...)
}

func (n *Nemesis) logf(format string, args ...any) {
	if n.Log == nil {
		return
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.Log, "%s +%06.3fs %s\n", now.UTC().Format("15:04:05.000"),
		now.Sub(n.start).Seconds(), fmt.Sprintf(format, args...))
}

func (n *Nemesis) lane(key string) chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.lanes[key]
	if !ok {
		l = make(chan struct{}, 1)
		n.lanes[key] = l
	}
	return l
}

func (n *Nemesis) laneOf(f Fault) string {
	if f.Kind.nodeFault() {
		return fmt.Sprintf("node-%d", f.Target)
	}
	return fmt.Sprintf("worker-%d", f.Target)
}

// healCtx is for repairs: it outlives the run's context by HealTimeout.
func (n *Nemesis) healCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), n.HealTimeout)
}

// hold waits d or until ctx ends.
func holdFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (n *Nemesis) run(ctx context.Context, i int, f Fault) {
	var bk backupResult
	if f.Kind == FaultRestore && n.Restore != nil {
		// the backup, BackupLead before the restore, under whatever
		// other fault runs then (retried until the restore is due)
		holdFor(ctx, time.Until(n.start.Add(f.At-f.BackupLead)))
		if ctx.Err() != nil {
			return
		}
		bk = n.takeBackup(ctx, i, n.start.Add(f.At))
	}
	t := time.NewTimer(time.Until(n.start.Add(f.At)))
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	// A cluster fault picks its nodes when it is applied (the leader, a
	// follower) and may touch any of them: it holds every node's lane, in
	// index order (the others hold one lane at a time: no deadlock).
	keys := []string{n.laneOf(f)}
	if f.Kind.clusterFault() || f.Kind == FaultRestore {
		keys = keys[:0]
		for j := range n.Cluster.Nodes {
			keys = append(keys, fmt.Sprintf("node-%d", j))
		}
	}
	for k, key := range keys {
		lane := n.lane(key)
		select {
		case <-ctx.Done():
			for _, held := range keys[:k] {
				<-n.lane(held)
			}
			return
		case lane <- struct{}{}:
		}
	}
	defer func() {
		for _, key := range keys {
			<-n.lane(key)
		}
	}()

	ev := Event{Fault: f, Index: i, Start: time.Now()}
	var note string
	var applied bool
	var err error
	if f.Kind == FaultRestore {
		note, applied, err = n.restoreFault(ctx, i, f, bk)
	} else {
		note, applied, err = n.apply(ctx, i, f)
	}
	ev.End, ev.Note, ev.Applied = time.Now(), note, applied
	n.mu.Lock()
	n.events = append(n.events, ev)
	if applied {
		n.counts[f.Kind]++
	}
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("fault #%d %s: %w", i, f.Kind, err))
	}
	n.mu.Unlock()
	switch {
	case err != nil:
		n.logf("heal  #%d %s: FAILED: %v", i, f, err)
	case applied:
		n.logf("heal  #%d %s: %s (%s)", i, f, note, ev.End.Sub(ev.Start).Round(time.Millisecond))
	default:
		n.logf("skip  #%d %s: %s", i, f, note)
	}
	switch {
	case f.Kind.clusterFault() || f.Kind == FaultRestore:
		for j, node := range n.Cluster.Nodes {
			n.ensureRunning(ctx, j, node, fmt.Sprintf("after fault #%d %s", i, f.Kind))
		}
	case f.Kind.nodeFault():
		if node, err := n.Cluster.Node(f.Target); err == nil {
			n.ensureRunning(ctx, f.Target, node, fmt.Sprintf("after fault #%d %s", i, f.Kind))
		}
	}
}

// apply injects f, holds it and heals it. note says what happened; applied
// is false for a fault that could not be injected (a worker that has
// exited, a node without a tmpfs); err is a failed repair.
func (n *Nemesis) apply(ctx context.Context, i int, f Fault) (note string, applied bool, err error) {
	if f.Kind == FaultWorkerPause {
		return n.workerPause(ctx, i, f)
	}
	if fn, ok := n.Custom[f.Kind]; ok {
		n.logf("fault #%d %s", i, f)
		return fn(ctx, f, func() { holdFor(ctx, f.For) })
	}
	if f.Kind.clusterFault() {
		return n.clusterFault(ctx, i, f)
	}
	node, err := n.Cluster.Node(f.Target)
	if err != nil {
		return err.Error(), false, nil
	}
	start := func(format string, args ...any) {
		n.logf("fault #%d %s: %s", i, f, fmt.Sprintf(format, args...))
	}
	p := node.Proxy()
	switch f.Kind {
	case FaultServerPause:
		if err := node.Pause(); err != nil {
			return err.Error(), false, nil
		}
		start("SIGSTOP pid %d", node.Pid())
		holdFor(ctx, f.For)
		if err := node.Resume(); err != nil {
			return "", true, err
		}
		return "SIGCONT", true, nil

	case FaultServerKill:
		pid := node.Pid()
		if err := node.Kill(); err != nil {
			return err.Error(), false, nil
		}
		start("SIGKILL pid %d", pid)
		holdFor(ctx, f.For)
		t0 := time.Now()
		if err := n.restart(ctx, f.Target, node, f.RestartArgs); err != nil {
			return fmt.Sprintf("restart with %q FAILED: %s", f.RestartArgs, brief(err)), true, nil
		}
		return fmt.Sprintf("restarted pid %d with %q, ready in %s", node.Pid(), f.RestartArgs,
			time.Since(t0).Round(time.Millisecond)), true, nil

	case FaultConnReset:
		resets := 0
		deadline := time.Now().Add(f.For)
		for {
			if err := p.Reset(); err != nil {
				return "", resets > 0, err
			}
			if resets++; resets == 1 {
				start("connections cut, again every %s", n.ResetEvery)
			}
			if ctx.Err() != nil || time.Until(deadline) < n.ResetEvery {
				break
			}
			holdFor(ctx, n.ResetEvery)
		}
		return fmt.Sprintf("%d resets", resets), true, nil

	case FaultConnBlackhole, FaultConnOneWay:
		dir := f.Dir
		if f.Kind == FaultConnBlackhole {
			dir = Both
		}
		if err := p.Blackhole(dir); err != nil {
			p.Heal()
			return err.Error(), false, nil
		}
		start("dropping %s bytes", dir)
		holdFor(ctx, f.For)
		return "healed", true, p.Heal()

	case FaultConnDelay:
		if err := p.Delay(f.Delay); err != nil {
			p.Heal()
			return err.Error(), false, nil
		}
		start("latency %s each way", f.Delay)
		holdFor(ctx, f.For)
		return "healed", true, p.Heal()

	case FaultDiskFull:
		return n.diskFullFault(ctx, i, f, node)
	}
	return fmt.Sprintf("unknown fault kind %q", f.Kind), false, nil
}

func (n *Nemesis) workerPause(ctx context.Context, i int, f Fault) (string, bool, error) {
	if n.Workers == nil || f.Target < 0 || f.Target >= n.Workers.Len() {
		return fmt.Sprintf("no worker %d", f.Target), false, nil
	}
	// claim marks a worker paused, unless a pause (an aimed one, from
	// another lane) holds it already: a second SIGSTOP would be a no-op and
	// its SIGCONT would end the first pause early.
	claim := func(w int) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.paused[w] {
			return false
		}
		n.paused[w] = true
		return true
	}
	aim := ""
	if ww, ok := n.Workers.(WindowWorkers); ok && f.Aimed {
		var claimed bool
		f.Target, aim, claimed = aimAt(ctx, ww, f.Target, f.For, claim)
		if !claimed {
			return fmt.Sprintf("worker %d is paused already", f.Target), false, nil
		}
	} else if !claim(f.Target) {
		return fmt.Sprintf("worker %d is paused already", f.Target), false, nil
	}
	if err := n.Workers.Signal(f.Target, syscall.SIGSTOP); err != nil {
		n.mu.Lock()
		delete(n.paused, f.Target)
		n.mu.Unlock()
		return err.Error(), false, nil
	}
	n.logf("fault #%d %s: SIGSTOP worker %d%s", i, f, f.Target, aim)
	holdFor(ctx, f.For)
	err := n.Workers.Signal(f.Target, syscall.SIGCONT)
	n.mu.Lock()
	delete(n.paused, f.Target)
	n.mu.Unlock()
	if err != nil {
		return "SIGCONT: " + err.Error(), true, nil // it exited meanwhile: nothing to continue
	}
	return "SIGCONT", true, nil
}

func (n *Nemesis) diskFullFault(ctx context.Context, i int, f Fault, node *Node) (string, bool, error) {
	if err := node.FillDisk(); err != nil {
		return err.Error(), false, nil
	}
	used, _, _ := node.DiskUsage()
	n.logf("fault #%d %s: disk shrunk to its %d bytes in use", i, f, used)
	n.mu.Lock()
	n.fills++
	fill := n.fills
	n.mu.Unlock()

	res := DiskFullResult{Node: f.Target}
	hctx, cancel := context.WithTimeout(ctx, f.For)
	if n.DiskFillValue > 0 {
		res.Writes = n.diskPressure(hctx, node, fill)
	}
	// Wait out For, or the node's exit.
	select {
	case <-hctx.Done():
	case <-node.Done():
	}
	cancel()
	// A node that failed its write is exiting: give it a moment.
	select {
	case <-node.Done():
	case <-time.After(500 * time.Millisecond):
	}
	if err := node.FreeDisk(); err != nil {
		return "", true, err
	}
	res.Exited, res.ExitCode = node.Exited()
	var note string
	if res.Exited {
		note = fmt.Sprintf("node exited with %v after %d large writes (fail-stop: %v); disk freed",
			node.ExitState(), res.Writes, res.FailStopped())
		t0 := time.Now()
		if err := n.restart(ctx, f.Target, node, nil); err != nil {
			res.RestartFailed = true
			n.recordDisk(res)
			return note + "; restart FAILED: " + brief(err), true, nil
		}
		note += fmt.Sprintf("; restarted, ready in %s", time.Since(t0).Round(time.Millisecond))
	} else {
		note = fmt.Sprintf("node survived %d large writes; disk freed", res.Writes)
		if !n.ready(ctx, node, 5*time.Second) {
			res.Wedged = true
			note += "; WEDGED: not ready 5s later, killed and restarted"
			node.Kill()
			if err := n.restart(ctx, f.Target, node, nil); err != nil {
				res.RestartFailed = true
				n.recordDisk(res)
				return note + "; restart FAILED: " + brief(err), true, nil
			}
		}
	}
	n.recordDisk(res)
	return note, true, nil
}

func (n *Nemesis) recordDisk(r DiskFullResult) {
	n.mu.Lock()
	n.diskFull = append(n.diskFull, r)
	n.mu.Unlock()
}

// diskPressure writes DiskFillValue-byte values to resource chaos/disk-fill
// from two goroutines, under a lease of its own (lock chaos/disk-fill-N),
// straight to the node, until ctx ends or the node exits; it returns the
// writes acknowledged.
func (n *Nemesis) diskPressure(ctx context.Context, node *Node, fill int) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-node.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := client.New(node.DirectURL(), node.ClientOptions(client.WithoutSession(), client.WithAttemptTimeout(2*time.Second))...)
	if err != nil {
		return 0
	}
	defer c.Close()
	// TTL 2s: below every --max-ttl a kill-restart may set (4×TTL, whole
	// seconds, at least 4s); a 10s lease was refused after a restart with
	// --max-ttl 4s, and 5 of 35 disk-fulls of a 10-minute run wrote nothing.
	lease, err := c.Acquire(ctx, fmt.Sprintf("chaos/disk-fill-%d", fill), client.TTL(2*time.Second))
	if err != nil {
		n.logf("disk-full: the fill lease was refused: %v", err)
		return 0
	}
	var mu sync.Mutex
	writes := 0
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := bytes.Repeat([]byte{'x'}, n.DiskFillValue)
			for i := 0; ctx.Err() == nil; i++ {
				copy(val, fmt.Sprintf("fill=%d writer=%d write=%d;", fill, w, i))
				if _, err := c.Write(ctx, "chaos/disk-fill", lease.Token(), val); err != nil {
					if ctx.Err() == nil {
						time.Sleep(20 * time.Millisecond)
					}
					continue
				}
				mu.Lock()
				writes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	select {
	case <-node.Done():
	default:
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		lease.Release(rctx)
		rcancel()
	}
	return writes
}

// ready polls the node's /readyz for up to d.
func (n *Nemesis) ready(ctx context.Context, node *Node, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	for !node.Ready(ctx) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// restart restarts node i with args (within HealTimeout, even after ctx
// ended). A failure marks the node down: ensureRunning retries it every 5s
// and Run returns the error at the end unless a retry succeeds.
func (n *Nemesis) restart(ctx context.Context, i int, node *Node, args []string) error {
	hctx, cancel := n.healCtx(ctx)
	defer cancel()
	err := node.Restart(hctx, args...)
	n.mu.Lock()
	d := n.down[i]
	if err != nil {
		if d == nil {
			d = &downNode{since: time.Now()}
			n.down[i] = d
		}
		d.last, d.err = time.Now(), err
		d.attempts++
	} else {
		delete(n.down, i)
	}
	n.mu.Unlock()
	if err == nil && d != nil {
		n.logf("node %d is back after %d failed restarts (down %s)", i, d.attempts, time.Since(d.since).Round(time.Millisecond))
	}
	return err
}

// Unrecovered describes the nodes the nemesis could not restart (after
// Run: nodes left down).
func (n *Nemesis) Unrecovered() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for i, d := range n.down {
		out = append(out, fmt.Sprintf("node %d down since %s after %d failed restarts: %s",
			i, d.since.UTC().Format("15:04:05.000"), d.attempts, brief(d.err)))
	}
	return out
}

// brief is err's first line and the last lines of the output it quotes.
func brief(err error) string {
	if err == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) <= 4 {
		return strings.Join(lines, " | ")
	}
	return lines[0] + " ... " + strings.Join(lines[len(lines)-3:], " | ")
}

// ensureRunning restarts node i if its process has exited: a crash (the
// faults that stop a node restart it themselves before they let go of it),
// or a node whose earlier restart failed (retried every 5s, not a new
// crash).
func (n *Nemesis) ensureRunning(ctx context.Context, i int, node *Node, when string) {
	if node.Running() {
		return
	}
	n.mu.Lock()
	d := n.down[i]
	var wait time.Duration
	if d != nil {
		wait = 5*time.Second - time.Since(d.last)
	}
	n.mu.Unlock()
	if d != nil {
		if wait > 0 && ctx.Err() == nil {
			return
		}
		if err := n.restart(ctx, i, node, nil); err != nil {
			n.logf("node %d still down: restart %d FAILED: %s", i, d.attempts, brief(err))
		}
		return
	}
	st := node.ExitState()
	lines := strings.Split(strings.TrimSpace(node.LogTail()), "\n")
	lines = lines[max(0, len(lines)-5):]
	note := fmt.Sprintf("node %d exited unexpectedly (%v) %s; its output ends:\n    %s", i, st, when, strings.Join(lines, "\n    "))
	n.mu.Lock()
	n.crashes = append(n.crashes, note)
	n.mu.Unlock()
	n.logf("CRASH %s", note)
	if err := n.restart(ctx, i, node, nil); err != nil {
		n.logf("restart node %d after its crash FAILED: %s", i, brief(err))
		return
	}
	n.logf("node %d restarted after its crash", i)
}

// watch restarts node i whenever it is found dead while no fault holds it,
// until ctx ends.
func (n *Nemesis) watch(ctx context.Context, i int) {
	node := n.Cluster.Nodes[i]
	lane := n.lane(fmt.Sprintf("node-%d", i))
	for {
		// A node that is down (a restart failed) has Done closed for good:
		// wait on the timer alone, or this loop spins.
		done := node.Done()
		if !node.Running() {
			done = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-done:
		case <-time.After(250 * time.Millisecond):
		}
		select {
		case lane <- struct{}{}: // no fault holds the node
			if ctx.Err() == nil {
				n.ensureRunning(ctx, i, node, "while no fault held it")
			}
			<-lane
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond): // a fault has it
		}
	}
}

// healAll runs after every fault goroutine has returned: whatever a fault
// left behind (none should), it repairs.
func (n *Nemesis) healAll(ctx context.Context) {
	if err := n.Cluster.HealLinks(); err != nil {
		n.mu.Lock()
		n.errs = append(n.errs, fmt.Errorf("heal the peer links: %w", err))
		n.mu.Unlock()
	}
	for i, node := range n.Cluster.Nodes {
		if err := node.Proxy().Heal(); err != nil {
			n.mu.Lock()
			n.errs = append(n.errs, fmt.Errorf("heal node %d's proxy: %w", i, err))
			n.mu.Unlock()
		}
		if node.DiskFull() {
			if err := node.FreeDisk(); err != nil {
				n.mu.Lock()
				n.errs = append(n.errs, err)
				n.mu.Unlock()
			}
		}
		if node.Paused() {
			n.logf("node %d was left paused: SIGCONT", i)
		}
		node.Resume()
		n.ensureRunning(ctx, i, node, "at the end of the run")
	}
	if n.Workers != nil {
		n.mu.Lock()
		left := len(n.paused)
		n.mu.Unlock()
		if left > 0 {
			n.logf("%d worker(s) were left paused: SIGCONT", left)
		}
		for i := 0; i < n.Workers.Len(); i++ {
			n.Workers.Signal(i, syscall.SIGCONT) // a worker that has exited: nothing to do
		}
	}
}

// aimAt waits up to limit for a worker in its write window, looking from
// target on, and claims it (see workerPause); it returns the worker, a note
// for the log, and whether it was claimed. When none entered a window in
// time it tries to claim target itself. A paused worker keeps its window
// marker, so the claim is what keeps a second pause off it.
func aimAt(ctx context.Context, ww WindowWorkers, target int, limit time.Duration, claim func(int) bool) (int, string, bool) {
	deadline := time.Now().Add(limit)
	for {
		for j := 0; j < ww.Len(); j++ {
			w := (target + j) % ww.Len()
			if ww.InWindow(w) && claim(w) {
				return w, " (aimed: in its write window)", true
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return target, " (aimed, but no worker was in its write window)", claim(target)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
