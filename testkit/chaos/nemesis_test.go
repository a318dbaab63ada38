//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
	"github.com/fenceworks/fence/testkit/testutil"
)

var everyKind = []FaultKind{FaultWorkerPause, FaultServerPause, FaultServerKill, FaultConnReset,
	FaultConnBlackhole, FaultConnDelay, FaultConnOneWay, FaultDiskFull}

func TestSchedule(t *testing.T) {
	const ttl = time.Second
	a := Schedule(42, time.Minute, everyKind, 5, ttl)
	if b := Schedule(42, time.Minute, everyKind, 5, ttl); !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if c := Schedule(43, time.Minute, everyKind, 5, ttl); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	restarts := map[string]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		s := Schedule(seed, time.Minute, everyKind, 5, ttl)
		if len(s) <= len(everyKind) {
			t.Fatalf("seed %d: %d faults in a minute", seed, len(s))
		}
		// The first round of node faults is every node kind once; worker
		// pauses run alongside.
		first := map[FaultKind]bool{}
		pauses := 0
		for _, f := range s {
			if f.Kind == FaultWorkerPause {
				pauses++
			} else if len(first) < len(everyKind)-1 {
				first[f.Kind] = true
			}
		}
		if len(first) != len(everyKind)-1 || pauses < 10 {
			t.Fatalf("seed %d: first round %v is not every node kind, or few pauses (%d)", seed, first, pauses)
		}
		ends := map[bool]time.Duration{} // by lane: worker pause or not
		var last time.Duration
		for i, f := range s {
			lane := f.Kind == FaultWorkerPause
			if f.At < ends[lane] || f.At < last {
				t.Fatalf("seed %d: fault %d (%s) overlaps the previous one of its lane (%s), or is out of order", seed, i, f, ends[lane])
			}
			ends[lane], last = f.At+f.For, f.At
			end := f.At + f.For
			if f.At < 500*time.Millisecond || end > time.Minute-500*time.Millisecond {
				t.Fatalf("seed %d: fault %d (%s) outside warm-up and tail", seed, i, f)
			}
			switch f.Kind {
			case FaultWorkerPause:
				if f.For < 3*ttl/2 || f.For > 3*ttl || f.Target < 0 || f.Target >= 5 {
					t.Fatalf("seed %d: %s: a worker pause must last 1.5–3× TTL on one of 5 workers", seed, f)
				}
			case FaultConnOneWay:
				if f.Dir != Upstream && f.Dir != Downstream {
					t.Fatalf("seed %d: %s: one-way without a direction", seed, f)
				}
			case FaultConnDelay:
				if f.Delay <= 0 {
					t.Fatalf("seed %d: %s: no delay", seed, f)
				}
			case FaultServerKill:
				if len(f.RestartArgs) > 0 {
					restarts[strings.Join(f.RestartArgs, " ")] = true
				}
			}
			if f.Kind != FaultWorkerPause && f.Target != 0 {
				t.Fatalf("seed %d: %s: one node, target %d", seed, f, f.Target)
			}
		}
	}
	for _, want := range []string{"--max-ttl 4s", "--max-ttl 1h", "--max-ttl 24h"} {
		if !restarts[want] {
			t.Errorf("no server-kill restarts with %q in 200 seeds (saw %v)", want, restarts)
		}
	}
	// --max-ttl is at least 4× TTL, rounded up to whole seconds.
	for seed := uint64(0); seed < 100; seed++ {
		for _, f := range Schedule(seed, time.Minute, []FaultKind{FaultServerKill}, 0, 1300*time.Millisecond) {
			if len(f.RestartArgs) == 2 && f.RestartArgs[1] != "1h" && f.RestartArgs[1] != "24h" && f.RestartArgs[1] != "6s" {
				t.Fatalf("TTL 1.3s: %s, want --max-ttl 6s, 1h or 24h", f)
			}
		}
	}
	if s := Schedule(1, time.Minute, everyKind, 0, ttl); len(s) == 0 || scheduleHas(s, FaultWorkerPause) {
		t.Fatalf("no workers: %v", s)
	}
	if s := Schedule(1, 2*time.Second, everyKind, 5, ttl); len(s) >= len(everyKind) {
		t.Fatalf("2s cannot hold every kind: %v", s)
	}
	// Several nodes: node faults spread over them.
	targets := map[int]bool{}
	for _, f := range (ScheduleConfig{Seed: 7, Duration: 5 * time.Minute, Kinds: everyKind, Workers: 2, Nodes: 3, TTL: ttl}).Schedule() {
		if f.Kind != FaultWorkerPause {
			targets[f.Target] = true
		}
	}
	if len(targets) != 3 {
		t.Fatalf("node targets over 3 nodes: %v", targets)
	}
}

// The cluster kinds: each in the first round of a long enough run, with
// its parameters drawn from their ranges, spread over both values of its
// switches.
func TestScheduleClusterFaults(t *testing.T) {
	kinds := append(append([]FaultKind(nil), everyKind...), ClusterFaults...)
	seen := map[string]bool{}
	for seed := uint64(0); seed < 100; seed++ {
		s := ScheduleConfig{Seed: seed, Duration: 2 * time.Minute, Kinds: kinds, Workers: 5, Nodes: 5, TTL: time.Second}.Schedule()
		first := map[FaultKind]bool{}
		for _, f := range s {
			if f.Kind != FaultWorkerPause && len(first) < len(kinds)-1 {
				first[f.Kind] = true
			}
			if !f.Kind.clusterFault() {
				continue
			}
			if f.Target < 0 || f.Target >= 5 {
				t.Fatalf("seed %d: %s: pick out of range", seed, f)
			}
			r := map[FaultKind][2]time.Duration{
				FaultLeaderIsolate: {1500 * time.Millisecond, 4 * time.Second},
				FaultSplitMajority: {1500 * time.Millisecond, 4 * time.Second},
				FaultPeerOneWay:    {time.Second, 3 * time.Second},
				FaultLeaderPause:   {500 * time.Millisecond, 3 * time.Second},
				FaultLeaderKill:    {500 * time.Millisecond, 2 * time.Second},
				FaultFollowerKill:  {200 * time.Millisecond, 2 * time.Second},
				FaultClockSkew:     {3 * time.Second, 6 * time.Second},
				FaultMemberChange:  {time.Second, 3 * time.Second},
			}[f.Kind]
			if f.For < r[0] || f.For > r[1] {
				t.Fatalf("seed %d: %s: outside %s–%s", seed, f, r[0], r[1])
			}
			switch f.Kind {
			case FaultClockSkew:
				if f.ClockOffset != time.Hour && f.ClockOffset != -time.Hour || f.ClockRate < 0.99 || f.ClockRate > 1.01 {
					t.Fatalf("seed %d: %s: offset ±1h and rate within 1%%", seed, f)
				}
				seen[fmt.Sprint("offset ", f.ClockOffset)] = true
				seen[fmt.Sprint("rate>1 ", f.ClockRate > 1)] = true
			case FaultSplitMajority:
				seen[fmt.Sprint("minority ", f.LeaderInMinority)] = true
			case FaultPeerOneWay:
				seen[fmt.Sprint("from-leader ", f.FromLeader)] = true
			}
		}
		if len(first) != len(kinds)-1 {
			t.Fatalf("seed %d: first round %v lacks a node kind", seed, first)
		}
	}
	if len(seen) != 8 {
		t.Fatalf("parameters seen over 100 seeds: %v", seen)
	}
}

func scheduleHas(s []Fault, k FaultKind) bool {
	for _, f := range s {
		if f.Kind == k {
			return true
		}
	}
	return false
}

// sleeperWorkers are stand-in worker processes (sleep), for worker-pause.
// Each SIGCONT that ends a SIGSTOP of theirs first waits (a hang guard
// aside) for /proc to show the worker stopped and records what it saw:
// the pause observed at its end, whatever the machine's speed.
type sleeperWorkers struct {
	cmds []*exec.Cmd

	mu      sync.Mutex
	stopped map[int]bool   // SIGSTOPped, not yet continued
	seen    map[int][]bool // per worker: stopped in /proc when continued
}

func startSleeperWorkers(t *testing.T, n int) *sleeperWorkers {
	t.Helper()
	s := &sleeperWorkers{}
	for i := 0; i < n; i++ {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.cmds = append(s.cmds, cmd)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	return s
}

func (s *sleeperWorkers) Len() int { return len(s.cmds) }
func (s *sleeperWorkers) Signal(i int, sig syscall.Signal) error {
	if i < 0 || i >= len(s.cmds) {
		return fmt.Errorf("no worker %d", i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pid := s.cmds[i].Process.Pid
	switch {
	case sig == syscall.SIGSTOP:
		if s.stopped == nil {
			s.stopped = map[int]bool{}
		}
		s.stopped[i] = true
	case sig == syscall.SIGCONT && s.stopped[i]:
		delete(s.stopped, i)
		// SIGSTOP takes effect when the kernel next runs the worker:
		// wait for it, bounded only as a hang guard (a worker never
		// stopped is the failure this records).
		ok := false
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if st, err := harness.ProcStopped(pid); err == nil && st {
				ok = true
				break
			}
			if time.Now().After(deadline) {
				break
			}
		}
		if s.seen == nil {
			s.seen = map[int][]bool{}
		}
		s.seen[i] = append(s.seen[i], ok)
	}
	return s.cmds[i].Process.Signal(sig)
}

// pausesSeen is, for worker i, whether /proc showed it stopped at the end
// of each of its pauses.
func (s *sleeperWorkers) pausesSeen(i int) []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.seen[i]...)
}

// waitLog polls log until it has a line containing every one of parts, or
// fails t after a hang guard.
func waitLog(t *testing.T, log *testutil.Buffer, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(log.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", parts, log.String())
		}
	}
}

// runNemesisAsync runs nem in the background; the returned func waits for it.
func runNemesisAsync(ctx context.Context, nem *Nemesis, sched []Fault) func() (map[FaultKind]int, error) {
	type result struct {
		counts map[FaultKind]int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c, err := nem.Run(ctx, sched)
		done <- result{c, err}
	}()
	return func() (map[FaultKind]int, error) {
		r := <-done
		return r.counts, r.err
	}
}

// Every fault kind once on a real node and stand-in workers, then a crash
// the nemesis did not cause: each is applied and healed, the disk-full
// makes the node fail-stop (exit 70) and it is restarted, the crash is
// counted and repaired, and at the end nothing is left broken.
func TestNemesisEveryFault(t *testing.T) {
	node := startTestNode(t, NodeConfig{DiskBytes: 256 << 20})
	workers := startSleeperWorkers(t, 2)
	tok1 := acquireTestToken(t, node.URL(), "nemesis-before")

	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	sched := []Fault{
		{At: ms(200), For: ms(1000), Kind: FaultWorkerPause, Target: 1},
		{At: ms(200), For: ms(500), Kind: FaultConnDelay, Delay: ms(100)}, // concurrent: another target
		{At: ms(800), For: ms(400), Kind: FaultConnBlackhole, Dir: Both},
		{At: ms(1300), For: ms(400), Kind: FaultConnOneWay, Dir: Downstream},
		{At: ms(1800), For: ms(600), Kind: FaultConnReset},
		{At: ms(2500), For: ms(400), Kind: FaultServerPause},
		{At: ms(3000), For: ms(300), Kind: FaultServerKill, RestartArgs: []string{"--max-ttl", "1h"}},
		{At: ms(3500), For: 20 * time.Second, Kind: FaultDiskFull}, // until the node fail-stops
	}
	var log testutil.Buffer
	nem := &Nemesis{Cluster: &Cluster{Nodes: []*Node{node}}, Workers: workers, Log: &log}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wait := runNemesisAsync(ctx, nem, sched)

	// Once every fault is healed, a crash the nemesis did not cause.
	deadline := time.Now().Add(50 * time.Second)
	for len(nem.Events()) < len(sched) && time.Now().Before(deadline) {
		time.Sleep(ms(50))
	}
	if len(nem.Events()) < len(sched) {
		t.Fatalf("faults not all healed in time:\n%s", log.String())
	}
	pid := node.Pid()
	syscall.Kill(pid, syscall.SIGKILL)
	for (node.Pid() == pid || !node.Ready(ctx)) && time.Now().Before(deadline) {
		time.Sleep(ms(50))
	}
	cancel()
	counts, err := wait()
	t.Logf("nemesis log:\n%s", log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// While the worker pause lasted, the worker was stopped: seen in /proc
	// when the nemesis continued it. (It was a look 500ms into the run: a
	// slow start put that before the pause, a slow test after it.)
	if seen := workers.pausesSeen(1); len(seen) != 1 || !seen[0] {
		t.Errorf("worker 1's pauses, stopped in /proc at their end: %v; want [true]", seen)
	}
	for _, k := range everyKind {
		if counts[k] != 1 {
			t.Errorf("%s applied %d times, want 1 (counts %v)", k, counts[k], counts)
		}
		if !strings.Contains(log.String(), "fault #") || !logHasLine(log.String(), "fault #", string(k)) {
			t.Errorf("no log line for %s", k)
		}
	}
	if nem.Crashes() != 1 || !strings.Contains(strings.Join(nem.CrashNotes(), "\n"), "exited unexpectedly") {
		t.Errorf("crashes %d %q, want the one the test caused", nem.Crashes(), nem.CrashNotes())
	}
	df := nem.DiskFull()
	if len(df) != 1 || !df[0].FailStopped() || df[0].ExitCode != 70 || df[0].Wedged || df[0].RestartFailed {
		t.Errorf("disk-full results %+v, want one fail-stop with exit 70", df)
	} else {
		t.Logf("disk-full: the node took %d writes of 1 MiB before it fail-stopped", df[0].Writes)
	}
	for _, ev := range nem.Events() {
		if ev.Kind == FaultServerKill && !strings.Contains(ev.Note, "--max-ttl") {
			t.Errorf("server-kill event %q does not name its restart args", ev.Note)
		}
	}

	// Everything healed: node running and ready through its proxy, no
	// toxic, disk back to size, no worker stopped.
	if !node.Running() || node.Paused() || !node.Ready(context.Background()) {
		t.Fatalf("node after Run: running %v paused %v", node.Running(), node.Paused())
	}
	if code, err := getStatus(node.URL()+"/readyz", 5*time.Second); err != nil || code != 200 {
		t.Fatalf("readyz through the proxy after Run: %d %v", code, err)
	}
	if got := node.Proxy().Toxics(); len(got) != 0 {
		t.Fatalf("toxics left: %v", got)
	}
	if _, size, _ := node.DiskUsage(); size != 256<<20 || node.DiskFull() {
		t.Fatalf("disk after Run: size %d, full %v", size, node.DiskFull())
	}
	for i, c := range workers.cmds {
		if isStopped(t, c.Process.Pid) {
			t.Fatalf("worker %d left stopped", i)
		}
	}
	// Every restart kept the data: a new grant's token is above the first.
	if tok2 := acquireTestToken(t, node.URL(), "nemesis-after"); tok2 <= tok1 {
		t.Fatalf("token after the run %d, not above %d before it", tok2, tok1)
	}
}

func logHasLine(log, a, b string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, a) && strings.Contains(l, b) {
			return true
		}
	}
	return false
}

// The run's context ends in the middle of long faults: Run heals them at
// once — the worker continued, the node restarted (after a kill) or
// continued (after a pause) and its proxy healed — and returns.
func TestNemesisHealsOnCancel(t *testing.T) {
	for _, kind := range []FaultKind{FaultServerKill, FaultServerPause, FaultConnBlackhole} {
		t.Run(string(kind), func(t *testing.T) {
			node := startTestNode(t, NodeConfig{})
			workers := startSleeperWorkers(t, 1)
			var log testutil.Buffer
			nem := &Nemesis{Cluster: &Cluster{Nodes: []*Node{node}}, Workers: workers, Log: &log}
			sched := []Fault{
				{At: 0, For: time.Hour, Kind: FaultWorkerPause, Target: 0},
				{At: 0, For: time.Hour, Kind: kind, Dir: Both},
				{At: 2 * time.Hour, For: time.Second, Kind: FaultConnReset}, // never reached
			}
			// The context ends once both faults are in place (their log
			// lines), not after a fixed 1.5s a slow start could outlast.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := runNemesisAsync(ctx, nem, sched)
			waitLog(t, &log, "fault #0 ", "SIGSTOP worker 0")
			waitLog(t, &log, "fault #1 ")
			t0 := time.Now()
			cancel()
			counts, err := wait()
			t.Logf("nemesis log:\n%s", log.String())
			if err != nil {
				t.Fatal(err)
			}
			// A hang guard, not a bound on a healthy machine: the heals
			// take well under a second; an hour-long hold not cut short by
			// the cancel would not return at all.
			if d := time.Since(t0); d > 30*time.Second {
				t.Fatalf("Run took %v after its context ended", d)
			}
			if counts[FaultWorkerPause] != 1 || counts[kind] != 1 || counts[FaultConnReset] != 0 {
				t.Fatalf("counts %v", counts)
			}
			if isStopped(t, workers.cmds[0].Process.Pid) {
				t.Fatal("worker left stopped")
			}
			if seen := workers.pausesSeen(0); len(seen) != 1 || !seen[0] {
				t.Fatalf("worker 0's pause, stopped in /proc at its end: %v", seen)
			}
			if !node.Running() || node.Paused() || isStopped(t, node.Pid()) {
				t.Fatalf("node left down or stopped: running %v paused %v", node.Running(), node.Paused())
			}
			if code, err := getStatus(node.URL()+"/readyz", 5*time.Second); err != nil || code != 200 {
				t.Fatalf("readyz through the proxy: %d %v", code, err)
			}
			if nem.Crashes() != 0 {
				t.Fatalf("crashes %v", nem.CrashNotes())
			}
		})
	}
}

// A restart that fails is not a crash: the node is marked down and retried
// every 5s with its base args; one that comes back is forgotten, one that
// never does is Run's error and in Unrecovered.
func TestNemesisRestartFails(t *testing.T) {
	t.Run("back", func(t *testing.T) {
		node := startTestNode(t, NodeConfig{})
		var log testutil.Buffer
		nem := &Nemesis{Cluster: &Cluster{Nodes: []*Node{node}}, Log: &log}
		sched := []Fault{{At: 0, For: 100 * time.Millisecond, Kind: FaultServerKill, RestartArgs: []string{"--no-such-flag"}}}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		wait := runNemesisAsync(ctx, nem, sched)
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "is back") && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		counts, err := wait()
		t.Logf("nemesis log:\n%s", log.String())
		if err != nil || counts[FaultServerKill] != 1 || nem.Crashes() != 0 || len(nem.Unrecovered()) != 0 {
			t.Fatalf("Run: %v, counts %v, crashes %v, unrecovered %v", err, counts, nem.CrashNotes(), nem.Unrecovered())
		}
		if !strings.Contains(log.String(), "FAILED") || !strings.Contains(log.String(), "is back after 1 failed restarts") {
			t.Fatal("the log does not show the failed restart and the recovery")
		}
		if !node.Ready(context.Background()) {
			t.Fatal("node not ready")
		}
	})
	t.Run("never", func(t *testing.T) {
		node := startTestNode(t, NodeConfig{})
		dir := node.Config().DataDir
		var log testutil.Buffer
		nem := &Nemesis{Cluster: &Cluster{Nodes: []*Node{node}}, Log: &log}
		sched := []Fault{{At: 0, For: time.Hour, Kind: FaultServerKill}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wait := runNemesisAsync(ctx, nem, sched)
		// While the node is down (the kill logged; the fault holds it until
		// the cancel), its data dir becomes a file: no restart works. (It
		// was a 250ms sleep in a 500ms fault: a slow test renamed the dir
		// after the restart.)
		waitLog(t, &log, "fault #0 ", "SIGKILL pid")
		if err := os.Rename(dir, dir+".away"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cancel()
		_, err := wait()
		t.Logf("nemesis log:\n%s", log.String())
		if err == nil || !strings.Contains(err.Error(), "could not be restarted") || len(nem.Unrecovered()) != 1 || nem.Crashes() != 0 {
			t.Fatalf("Run: %v; unrecovered %q; crashes %d", err, nem.Unrecovered(), nem.Crashes())
		}
	})
}

// A kind the nemesis does not know is injected by Nemesis.Custom; without
// one it is skipped.
func TestNemesisCustomFault(t *testing.T) {
	node := startTestNode(t, NodeConfig{})
	var log testutil.Buffer
	var held time.Duration
	nem := &Nemesis{Cluster: &Cluster{Nodes: []*Node{node}}, Log: &log,
		Custom: map[FaultKind]FaultFunc{"partition": func(ctx context.Context, f Fault, hold func()) (string, bool, error) {
			if err := node.Proxy().Blackhole(Both); err != nil {
				return err.Error(), false, nil
			}
			t0 := time.Now()
			hold()
			held = time.Since(t0)
			return "healed", true, node.Proxy().Heal()
		}}}
	sched := []Fault{
		{At: 0, For: 300 * time.Millisecond, Kind: "partition"},
		{At: 0, For: 300 * time.Millisecond, Kind: "clock-skew"}, // no FaultFunc: skipped
	}
	// Run ends when its context does: cancelled once both faults are done
	// (healed, skipped), not after a fixed 1.5s that a slow start could
	// spend before the partition's hold ended. held is an ordering of clock
	// readings: hold's timer does not fire before For.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := runNemesisAsync(ctx, nem, sched)
	for deadline := time.Now().Add(30 * time.Second); len(nem.Events()) < len(sched); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("faults not done (hang guard):\n%s", log.String())
		}
	}
	cancel()
	counts, err := wait()
	t.Logf("nemesis log:\n%s", log.String())
	if err != nil || counts["partition"] != 1 || counts["clock-skew"] != 0 || held < 300*time.Millisecond {
		t.Fatalf("Run: %v, counts %v, held %v", err, counts, held)
	}
	if !logHasLine(log.String(), "skip", "clock-skew") || len(node.Proxy().Toxics()) != 0 {
		t.Fatalf("clock-skew not skipped, or toxics left %v", node.Proxy().Toxics())
	}
}

// windowSleepers are sleepers of which only worker 0 is ever in its write
// window.
type windowSleepers struct{ *sleeperWorkers }

func (w windowSleepers) InWindow(i int) bool { return i == 0 }

// Two aimed pauses that overlap, with one worker in its window: the second
// must not stop the worker the first holds (its SIGCONT would end the first
// pause early, and a paused worker keeps its window marker); it falls back
// to its own target.
func TestAimedPausesDoNotShareAWorker(t *testing.T) {
	// The first pause holds worker 0 until the test cancels the run; the
	// second starts gap later and looks for a window for 300ms. Should the
	// second be applied first (a machine slower than gap), the round says
	// nothing and is repeated with twice the gap (to 12.8s, a hang guard):
	// the check is made at any speed. (It was one round in a fixed 3s.)
	for gap := 200 * time.Millisecond; ; gap *= 2 {
		if gap > 13*time.Second {
			t.Fatal("the first pause was never applied before the second (hang guard)")
		}
		workers := windowSleepers{startSleeperWorkers(t, 2)}
		var log testutil.Buffer
		nem := &Nemesis{Cluster: &Cluster{}, Workers: workers, Log: &log}
		sched := []Fault{
			{At: 0, For: time.Hour, Kind: FaultWorkerPause, Target: 0, Aimed: true},
			{At: gap, For: 300 * time.Millisecond, Kind: FaultWorkerPause, Target: 1, Aimed: true},
		}
		ctx, cancel := context.WithCancel(context.Background())
		wait := runNemesisAsync(ctx, nem, sched)
		waitLog(t, &log, "SIGSTOP worker")
		waitLog(t, &log, "fault #1 ", "SIGSTOP worker")
		cancel()
		counts, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		logs := log.String()
		if i0, i1 := strings.Index(logs, "fault #0 "), strings.Index(logs, "fault #1 "); i0 < 0 || i1 < i0 {
			t.Logf("the second pause came first (gap %v); again with twice the gap:\n%s", gap, logs)
			continue
		}
		if counts[FaultWorkerPause] != 2 {
			t.Fatalf("counts %v, want 2 worker pauses; log:\n%s", counts, logs)
		}
		if strings.Count(logs, "SIGSTOP worker 0") != 1 || !strings.Contains(logs, "SIGSTOP worker 1 (aimed, but no worker was in its write window)") {
			t.Fatalf("the second aimed pause did not fall back to worker 1:\n%s", logs)
		}
		return
	}
}
