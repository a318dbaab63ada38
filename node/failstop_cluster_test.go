package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/testutil"
)

// Fail-stop in a cluster. A follower's durable writes are not the node's
// own proposals: raft makes them for the leader's AppendEntries (log
// appends), for a new term or a vote (stable store), and for a snapshot
// the leader sends (InstallSnapshot). They go through the same raftstore
// guards as a single node's writes, so they are fatal too. Each test fails
// one follower's store, checks that the follower stops (OnFatal once, not
// Ready, no durable write after the fatal one) while the other two keep
// committing, and that a restart on the same data dir with a healthy
// store catches up with everything acknowledged.

// fatalRecorder is a test OnFatal: it records the first error and counts
// calls. With exit, it then ends the calling goroutine (runtime.Goexit), as
// the default OnFatal's os.Exit(70) ends the process: hashicorp/raft
// panics when it cannot save a new term, so an OnFatal that returns there
// would crash the test binary.
type fatalRecorder struct {
	calls atomic.Int32
	first chan error
	exit  bool
}

func newFatalRecorder(exit bool) *fatalRecorder {
	return &fatalRecorder{first: make(chan error, 1), exit: exit}
}

func (r *fatalRecorder) onFatal(err error) {
	if r.calls.Add(1) == 1 {
		r.first <- err
	}
	if r.exit {
		runtime.Goexit()
	}
}

// wait returns the first fatal error (hang guard: clusterWait).
func (r *fatalRecorder) wait(t *testing.T, id string) error {
	t.Helper()
	select {
	case err := <-r.first:
		return err
	case <-time.After(clusterWait):
		t.Fatalf("%s: no fatal error within %s", id, clusterWait)
		return nil
	}
}

// fsHooks are one member's injected faults and what it logged.
type fsHooks struct {
	log    *failingLog
	stable *failingStable
	snaps  *failingSnapshots
	fatal  *fatalRecorder
	logs   *testutil.Buffer
}

// startFaultyCluster starts n nodes (and joiners empty ones) whose log,
// stable and snapshot stores can each be made to fail, recording fatal
// errors and logs per node id. tweak (may be nil) adjusts every node's
// config further.
func startFaultyCluster(t *testing.T, n, joiners int, exitOnFatal bool, tweak func(*Config)) (*testCluster, map[string]*fsHooks) {
	t.Helper()
	hooks := map[string]*fsHooks{} // filled before any node runs, read only after
	tc := startCluster(t, clusterOpts{n: n, joiners: joiners, tweak: func(c *Config) {
		h := &fsHooks{log: &failingLog{}, stable: &failingStable{exit: exitOnFatal}, snaps: &failingSnapshots{},
			fatal: newFatalRecorder(exitOnFatal), logs: &testutil.Buffer{}}
		hooks[c.NodeID] = h
		c.wrapLog = func(s raft.LogStore) raft.LogStore { h.log.LogStore = s; return h.log }
		c.wrapStable = func(s raft.StableStore) raft.StableStore { h.stable.StableStore = s; return h.stable }
		c.wrapSnapshots = func(s raft.SnapshotStore) raft.SnapshotStore { h.snaps.SnapshotStore = s; return h.snaps }
		c.OnFatal = h.fatal.onFatal
		c.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
		if tweak != nil {
			tweak(c)
		}
	}})
	return tc, hooks
}

// restartHealthy restarts mb on its data dir with healthy stores.
func restartHealthy(tc *testCluster, mb *member) {
	tc.t.Helper()
	tc.kill(mb)
	mb.cfg.wrapLog, mb.cfg.wrapStable, mb.cfg.wrapSnapshots = nil, nil, nil
	t := tc.t
	mb.cfg.OnFatal = func(err error) { t.Errorf("%s: fatal after the restart with healthy stores: %v", mb.id, err) }
	tc.open(mb)
}

// stopped checks what a node that failed must show: not Ready, the fatal
// error in its Status, and an error for a proposal.
func stopped(t *testing.T, mb *member, want error) {
	t.Helper()
	if mb.node.Ready() {
		t.Errorf("%s: Ready after a fatal storage error", mb.id)
	}
	if err := mb.node.Status().Fatal; !errors.Is(err, want) {
		t.Errorf("%s: Status().Fatal = %v, want the store's error", mb.id, err)
	}
	if _, err := mb.node.Apply(context.Background(), acquire("after-fatal", time.Hour)); err == nil {
		t.Errorf("%s: a proposal after the fatal error was acknowledged", mb.id)
	}
}

// steppedDown waits until mb's raft no longer leads (hang guard:
// clusterWait): a node that failed must let the others elect.
func steppedDown(t *testing.T, mb *member) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for mb.node.raft.State() == raft.Leader {
		if time.Now().After(deadline) {
			t.Fatalf("%s: raft still leads %s after the fatal error", mb.id, clusterWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// refusedAfter writes through lead until mb's log (from mark on) shows a
// refusal with want in it, and fails if changed reports a durable change
// on mb first (hang guard: clusterWait). The leader's retries reach mb;
// the guard must turn them away before the store.
func refusedAfter(t *testing.T, lead, mb *member, logs *testutil.Buffer, mark int, tok fence.Token, want string, changed func() string) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for i := 0; !strings.Contains(logs.String()[mark:], want); i++ {
		if what := changed(); what != "" {
			t.Fatalf("%s: %s after the fatal error", mb.id, what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: nothing refused after the fatal error within %s; log since:\n%s", mb.id, clusterWait, logs.String()[mark:])
		}
		write(t, lead.node, "r", tok, fmt.Sprint("after-", i), fmt.Sprint("after-", i))
		time.Sleep(10 * time.Millisecond)
	}
	if what := changed(); what != "" {
		t.Fatalf("%s: %s after the fatal error", mb.id, what)
	}
}

// agree waits until mb's applied state holds the leader's last token and
// resource r as the leader has it (hang guard: clusterWait).
func agree(t *testing.T, tc *testCluster, lead, mb *member) {
	t.Helper()
	tc.caughtUp([]*member{mb}, lead)
	deadline := time.Now().Add(clusterWait)
	for {
		got, want := resourceOn(mb, "r"), resourceOn(lead, "r")
		if string(got.Value) == string(want.Value) && got.LastToken == want.LastToken && mb.node.LastToken() == lead.node.LastToken() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: resource r = %q (token %d), last token %d; the leader's %q (token %d), %d", mb.id,
				got.Value, got.LastToken, mb.node.LastToken(), want.Value, want.LastToken, lead.node.LastToken())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A follower whose log append fails (the leader's AppendEntries, a disk
// full mid-batch) stops: OnFatal once with the store's error, not Ready,
// and no entry stored after it even once the disk has room again (a log
// that failed an append may hold part of a batch). The leader and the
// other follower keep committing; a restart with a healthy store catches
// up with every acknowledged write.
func TestClusterFollowerLogWriteErrorIsFatal(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 3, 0, false, nil)
	lead := tc.leader()
	f := tc.others(lead)[0]
	tok := grant(t, lead.node, "l")
	for i := range 20 {
		write(t, lead.node, "r", tok, fmt.Sprint(i), fmt.Sprint("a", i))
	}
	tc.caughtUp(tc.live(), lead)

	h := hooks[f.id]
	h.log.on.Store(true)
	for i := range 30 { // a quorum without f: every write is acknowledged
		write(t, lead.node, "r", tok, fmt.Sprint("b", i), fmt.Sprint("b", i))
	}
	if err := h.fatal.wait(t, f.id); !errors.Is(err, errDiskFull) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", f.id, err)
	}
	stopped(t, f, errDiskFull)

	// The disk has room again; the guard must still refuse: the leader's
	// next appends reach f and are turned away before the store (raft-wal
	// would refuse too, after the partial batch, with its own error).
	last, err := f.node.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	h.log.on.Store(false)
	mark := len(h.logs.String())
	refusedAfter(t, lead, f, h.logs, mark, tok, "log store stopped after a fatal error", func() string {
		if now, _ := f.node.log.LastIndex(); now != last {
			return fmt.Sprintf("log grew from %d to %d", last, now)
		}
		for _, line := range strings.Split(h.logs.String()[mark:], "\n") {
			if strings.Contains(line, "failed to append to logs") && !strings.Contains(line, "log store stopped after a fatal error") {
				return "an append reached the store: " + line
			}
		}
		return ""
	})
	if n := h.fatal.calls.Load(); n != 1 {
		t.Errorf("%s: OnFatal called %d times, want once", f.id, n)
	}

	restartHealthy(tc, f)
	write(t, lead.node, "r", tok, "final", "final")
	agree(t, tc, lead, f)
}

// A follower that cannot save a new term (its stable store fails when
// leadership moves to the other follower) stops: OnFatal once with the
// store's error, before raft could go on with an unsaved term. The new
// leader serves with the remaining quorum, and a restart with a healthy
// store rejoins and catches up.
func TestClusterFollowerTermWriteErrorIsFatal(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 3, 0, true, nil)
	lead := tc.leader()
	others := tc.others(lead)
	f, g := others[0], others[1]
	tok := grant(t, lead.node, "l")
	write(t, lead.node, "r", tok, "before", "before")
	tc.caughtUp(tc.live(), lead)

	h := hooks[f.id]
	h.stable.on.Store(true)
	if err := lead.node.TransferLeadership(context.Background(), g.id); err != nil {
		t.Fatalf("transfer to %s: %v", g.id, err)
	}
	if err := h.fatal.wait(t, f.id); !errors.Is(err, errIOStable) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", f.id, err)
	}
	stopped(t, f, errIOStable)
	if n := h.fatal.calls.Load(); n != 1 {
		t.Errorf("%s: OnFatal called %d times, want once", f.id, n)
	}

	newLead := tc.leaderAmong([]*member{lead, g})
	if newLead != g {
		t.Logf("leadership went to %s, not %s", newLead.id, g.id)
	}
	tok2 := grant(t, newLead.node, "l2")
	if tok2 <= tok {
		t.Fatalf("token %d after the term change, not above %d", tok2, tok)
	}
	write(t, newLead.node, "r", tok2, "after", "after")

	restartHealthy(tc, f)
	agree(t, tc, newLead, f)
}

// A node whose disk fills while it installs the snapshot the leader sends
// (a node added after the leader compacted its log; a node far behind is
// the same) stops: OnFatal once with the store's error. A second install,
// once the disk has room again, is refused before the store: the stopped
// node installs and acknowledges nothing. A restart with a healthy store
// installs the snapshot and catches up.
func TestClusterFollowerSnapshotInstallErrorIsFatal(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 2, 1, false, func(c *Config) {
		// Small segments: raft-wal still returns entries compacted away
		// while they are in its tail segment, and the leader would send
		// those instead of a snapshot.
		c.SnapshotThreshold, c.TrailingLogs, c.WALSegmentSize = 16, 4, 4<<10
	})
	lead := tc.leaderAmong(tc.members[:2])
	f := tc.members[2]
	tok := grant(t, lead.node, "l")
	deadline := time.Now().Add(clusterWait)
	for i := 0; ; i++ {
		write(t, lead.node, "r", tok, fmt.Sprint(i), fmt.Sprint("w", i))
		// Compacted, and entry 1's segment deleted (raft-wal serves an
		// entry below the first index while its segment exists): f
		// cannot be sent the log from the start.
		if first, _ := lead.node.log.FirstIndex(); first > 2 && lead.node.log.GetLog(1, new(raft.Log)) != nil {
			break
		}
		if time.Now().After(deadline) {
			first, _ := lead.node.log.FirstIndex()
			last, _ := lead.node.log.LastIndex()
			t.Fatalf("the leader's log was not compacted within %s (first %d, last %d, %d snapshots, kind %s); logs:\n%s", clusterWait, first, last, lead.node.snap.taken.Load(), lead.node.store.Kind, hooks[lead.id].logs.String())
		}
	}

	h := hooks[f.id]
	h.snaps.on.Store(true)
	ctx := context.Background()
	if err := lead.node.AddVoter(ctx, f.id, f.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := h.fatal.wait(t, f.id); !errors.Is(err, errDiskFull) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", f.id, err)
	}
	if h.snaps.failed.Load() == 0 {
		t.Fatalf("%s: the fatal error did not come from a snapshot write", f.id)
	}
	stopped(t, f, errDiskFull)

	// The disk has room again: the leader's next install must be refused
	// before the store, and f must not take the leader's state.
	creates := h.snaps.creates.Load()
	h.snaps.on.Store(false)
	refusedAfter(t, lead, f, h.logs, 0, tok, "snapshot store stopped after a fatal error", func() string {
		if n := f.node.fsm.restores.Load(); n != 0 {
			return fmt.Sprintf("restored %d snapshots", n)
		}
		return ""
	})
	if got := h.snaps.creates.Load(); got != creates {
		t.Errorf("%s: %d snapshots created in the store after the fatal error", f.id, got-creates)
	}
	if n := f.node.fsm.restores.Load(); n != 0 {
		t.Fatalf("%s: restored %d snapshots after the fatal error", f.id, n)
	}
	if rs := resourceOn(f, "r"); rs.LastToken != 0 {
		t.Fatalf("%s: holds resource r (%q) after the fatal error", f.id, rs.Value)
	}
	if n := h.fatal.calls.Load(); n != 1 {
		t.Errorf("%s: OnFatal called %d times, want once", f.id, n)
	}

	restartHealthy(tc, f)
	// The leader's replication to f has backed off after the refused
	// installs (raft waits up to ~10 s between failed attempts); a new
	// leader starts replicating afresh. Catch-up latency is not what this
	// test is about.
	g := tc.others(f)[0]
	if g == lead {
		g = tc.others(f)[1]
	}
	if err := lead.node.TransferLeadership(ctx, g.id); err != nil {
		t.Fatalf("transfer to %s: %v", g.id, err)
	}
	newLead := tc.leader()
	write(t, newLead.node, "r", tok, "final", "final")
	agree(t, tc, newLead, f)
	if f.node.fsm.restores.Load() == 0 {
		t.Errorf("%s: caught up without installing a snapshot", f.id)
	}
}

// A leader whose snapshot write fails (its own snapshot: not an append,
// so raft itself would not step down) stops, and stops leading: the other
// two elect a leader that serves, with tokens above every token given
// before. A restart with a healthy store catches up. (With a Config.OnFatal
// that returns, a stopped leader that kept raft running would go on
// heartbeating, and the others would never elect.)
func TestClusterLeaderSnapshotWriteErrorIsFatal(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 3, 0, false, func(c *Config) {
		c.SnapshotThreshold, c.TrailingLogs = 16, 4
	})
	lead := tc.leader()
	tok := grant(t, lead.node, "l")
	h := hooks[lead.id]
	h.snaps.on.Store(true)
	for i := 0; h.fatal.calls.Load() == 0 && i < 10000; i++ {
		if _, err := lead.node.Apply(context.Background(), state.Command{Op: state.OpWrite, Name: "r", Token: tok,
			Value: []byte(fmt.Sprint(i)), OpID: fmt.Sprint("w", i)}); err != nil {
			break // the fatal error came while this write was in flight
		}
	}
	if err := h.fatal.wait(t, lead.id); !errors.Is(err, errDiskFull) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", lead.id, err)
	}
	stopped(t, lead, errDiskFull)
	steppedDown(t, lead)

	others := tc.others(lead)
	newLead := tc.leaderAmong(others)
	tok2 := grant(t, newLead.node, "l2")
	if tok2 <= tok {
		t.Fatalf("token %d from the new leader, not above %d", tok2, tok)
	}
	write(t, newLead.node, "r", tok2, "after", "after")
	if n := h.fatal.calls.Load(); n != 1 {
		t.Errorf("%s: OnFatal called %d times, want once", lead.id, n)
	}

	restartHealthy(tc, lead)
	agree(t, tc, newLead, lead)
}

// A leader whose log append fails (a disk full mid-batch) stops: OnFatal
// once with the store's error, the write in flight gets an error (its
// outcome unknown, or closed), raft is shut down, and the other two elect
// a leader that has every write acknowledged before and grants above every
// token given. A restart with a healthy store catches up (the part of a
// batch its log kept is overwritten by the new leader's entries).
func TestClusterLeaderLogWriteErrorIsFatal(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 3, 0, false, nil)
	lead := tc.leader()
	tok := grant(t, lead.node, "l")
	h := hooks[lead.id]
	acked := 0
	var lastErr error
	for i := 1; i <= 10000; i++ {
		if i == 21 {
			h.log.on.Store(true)
		}
		_, err := lead.node.Apply(context.Background(), state.Command{Op: state.OpWrite, Name: "r", Token: tok,
			Value: []byte(fmt.Sprint(i)), OpID: fmt.Sprint("w", i)})
		if err != nil {
			lastErr = err
			break
		}
		acked = i
	}
	if acked < 20 {
		t.Fatalf("only %d writes acknowledged before the disk filled (%v)", acked, lastErr)
	}
	if !errors.Is(lastErr, ErrUnknownOutcome) && !errors.Is(lastErr, ErrClosed) {
		t.Errorf("the write in flight when the log failed: %v, want unknown outcome or closed", lastErr)
	}
	if err := h.fatal.wait(t, lead.id); !errors.Is(err, errDiskFull) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", lead.id, err)
	}
	stopped(t, lead, errDiskFull)
	steppedDown(t, lead)

	newLead := tc.leaderAmong(tc.others(lead))
	rs := resourceOn(newLead, "r")
	var got int
	fmt.Sscan(string(rs.Value), &got)
	if got < acked {
		t.Fatalf("%s: resource r = %q after the failover; write %d was acknowledged", newLead.id, rs.Value, acked)
	}
	tok2 := grant(t, newLead.node, "l2")
	if tok2 <= tok {
		t.Fatalf("token %d from the new leader, not above %d", tok2, tok)
	}
	write(t, newLead.node, "r", tok2, "after", "after")
	if n := h.fatal.calls.Load(); n != 1 {
		t.Errorf("%s: OnFatal called %d times, want once", lead.id, n)
	}

	restartHealthy(tc, lead)
	agree(t, tc, newLead, lead)
}

// A follower that failed grants no vote: with the leader gone, the other
// follower cannot be elected by it (a stopped node must neither win nor
// help elect: it could not store the new leader's entries anyway). It
// refuses the vote before the store, while the term is still saved (raft
// panics otherwise).
func TestClusterFailedFollowerGrantsNoVote(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, hooks := startFaultyCluster(t, 3, 0, false, nil)
	lead := tc.leader()
	others := tc.others(lead)
	f, g := others[0], others[1]
	tok := grant(t, lead.node, "l")
	h := hooks[f.id]
	h.log.on.Store(true)
	for i := 0; h.fatal.calls.Load() == 0 && i < 1000; i++ {
		write(t, lead.node, "r", tok, fmt.Sprint(i), fmt.Sprint("w", i))
	}
	if err := h.fatal.wait(t, f.id); !errors.Is(err, errDiskFull) {
		t.Fatalf("%s: OnFatal(%v), want the store's error", f.id, err)
	}
	mark := len(h.logs.String())
	tc.kill(lead)
	deadline := time.Now().Add(clusterWait)
	for !strings.Contains(h.logs.String()[mark:], "(no vote)") {
		if g.node.raft.State() == raft.Leader {
			t.Fatalf("%s was elected with the vote of %s, which had failed", g.id, f.id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s refused no vote within %s; its log since:\n%s", f.id, clusterWait, h.logs.String()[mark:])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g.node.raft.State() == raft.Leader {
		t.Fatalf("%s was elected with the vote of %s, which had failed", g.id, f.id)
	}
}

// errIOStable is failingStable's error.
var errIOStable = errors.New("injected: stable store: input/output error")

// failingStable is a stable store with a switch: once on, every write
// fails (term and vote). With exit set (a node whose OnFatal stands for
// the process's exit, runtime.Goexit), only the first failing write
// returns: that one reaches OnFatal, and any later write is on a process
// that is gone, so it does not return either. (It returned the error: the
// fail-stop guard calls OnFatal once, so a second term change reaching the
// stopped node — another election, as on a loaded machine — handed raft a
// failed term write, and raft panicked.)
type failingStable struct {
	raft.StableStore
	on     atomic.Bool
	exit   bool
	failed atomic.Int32
}

func (s *failingStable) fail() error {
	if s.failed.Add(1) > 1 && s.exit {
		runtime.Goexit()
	}
	return errIOStable
}

func (s *failingStable) Set(k, v []byte) error {
	if s.on.Load() {
		return s.fail()
	}
	return s.StableStore.Set(k, v)
}

func (s *failingStable) SetUint64(k []byte, v uint64) error {
	if s.on.Load() {
		return s.fail()
	}
	return s.StableStore.SetUint64(k, v)
}

// failingSnapshots is a snapshot store with a switch: once on, a sink's
// Write fails after the first bytes (a disk that fills during the write).
// It counts the snapshots created in it.
type failingSnapshots struct {
	raft.SnapshotStore
	on      atomic.Bool
	creates atomic.Int64
	failed  atomic.Uint64 // index of the last snapshot whose write failed
}

func (s *failingSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	s.creates.Add(1)
	return &failingSnapshotSink{SnapshotSink: sink, s: s, index: index}, nil
}

type failingSnapshotSink struct {
	raft.SnapshotSink
	s     *failingSnapshots
	index uint64
}

func (k *failingSnapshotSink) Write(p []byte) (int, error) {
	if k.s.on.Load() {
		n, _ := k.SnapshotSink.Write(p[:len(p)/2])
		k.s.failed.Store(k.index)
		return n, errDiskFull
	}
	return k.SnapshotSink.Write(p)
}
