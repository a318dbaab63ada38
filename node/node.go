package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// Node is one Fence node. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	raft  *raft.Raft
	trans raft.Transport   // raft's transport: closed as soon as raft is told to shut down
	store *raftstore.Store // the data dir's lock, log and stable store
	fsm   *fsm
	wait  *waiters
	fail  *raftstore.FailStop
	log   *raftstore.GuardedLog
	snap  *snapTrigger
	props *proposer

	clock atomic.Pointer[leaderClock] // nil: not leader, or not in office yet
	// lastStart: this process's start, in parts, once the log it held is
	// applied (logReplay; nil before)
	lastStart atomic.Pointer[StartTimes]
	addr      string        // this node's raft address (its transport's)
	officeC   chan struct{} // cap 1: wakes the ticker on leadership change
	ticks     atomic.Uint64
	reaped    atomic.Uint64 // orphan reaps completed
	// startedEmpty: Open found no raft state in the data dir and wrote no
	// bootstrap configuration (a node waiting to be added). Fixed at Open:
	// what a leader replicates to it later does not change it.
	startedEmpty bool
	// startedBefore: the data dir recorded a node id when Open began (it
	// has been started before): it must not be bootstrapped again.
	startedBefore bool
	// admission gates the raft RPCs of a node that started empty with
	// Config.AdmitOnAdd until Admit (nil: none).
	admission *admissionTransport
	// persistedID is the cluster id last recorded in ClusterIDFile ("":
	// none), known at start before anything is applied.
	persistedID atomic.Pointer[string]
	closing     chan struct{}
	closeOnce   sync.Once
	closeErr    error
	wg          sync.WaitGroup
}

// Open opens (or creates) the node in cfg.DataDir. On first start a single
// node bootstraps a one-voter cluster, a cluster member what Config.Bootstrap
// or Config.Peers say (or nothing: it waits to be added); on restart it
// recovers from its log and snapshots and does not bootstrap again. A
// single node's Open returns once it leads and its leader clock runs (or
// fails after cfg.ReadyTimeout); a cluster member's once raft runs (Ready
// says when it can serve). A second process on the same DataDir fails
// after cfg.LockTimeout.
func Open(cfg Config) (*Node, error) {
	began := time.Now()
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, fence.Invalid("data_dir", "not empty", "")
	}
	if err := cfg.Rules.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateCluster(); err != nil {
		return nil, err
	}
	// A restore that did not finish left its staging directory: starting
	// here would make a fresh store (token 0) below the backup's tokens.
	if err := CheckRestoreLeftover(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := makeDataDir(cfg.DataDir, cfg.Logger); err != nil {
		return nil, err
	}
	store, err := raftstore.Open(raftstore.Config{Dir: cfg.DataDir, Kind: cfg.LogStore,
		LockTimeout: cfg.LockTimeout, WALSegmentSize: cfg.WALSegmentSize, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	cfg.start = startTimes{began: began, storage: time.Since(began)}
	started, err := checkNodeID(cfg.DataDir, cfg.NodeID)
	if err != nil {
		store.Close()
		return nil, err
	}
	persisted, err := readClusterIDFile(cfg.DataDir)
	if err != nil {
		store.Close()
		return nil, err
	}
	if persisted == "" && cfg.cluster() {
		if persisted = scanLogClusterID(store.Log); persisted != "" {
			if err := writeFileSync(cfg.DataDir, ClusterIDFile, persisted+"\n"); err != nil {
				cfg.Logger.Warn("recording the cluster id read from the log failed", "err", err)
			}
		}
	}
	n, err := open(cfg, store, started, persisted)
	if err != nil {
		store.Close()
		return nil, err
	}
	n.logRestored()
	return n, nil
}

func open(cfg Config, store *raftstore.Store, started bool, persistedClusterID string) (*Node, error) {
	// Before the snapshot store exists, holding the dir's lock (store).
	if err := removeTmpSnapshots(cfg.DataDir, cfg.Logger); err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, raftstore.NewHCLogger(cfg.Logger))
	if err != nil {
		return nil, fmt.Errorf("node: snapshot store: %w", err)
	}
	existing, err := raft.HasExistingState(store.Log, store.Stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("node: inspect state: %w", err)
	}
	// A member's dir that lost its wal/ is refused before the lost-log
	// checks below, in every start mode (member.go).
	member := false
	if cfg.cluster() {
		if member, err = checkMember(cfg, store.Stable); err != nil {
			return nil, err
		}
	}
	if err := checkLogReachable(cfg, store.Log, store.Stable, snaps); err != nil {
		return nil, err
	}
	if err := checkNewestSnapshot(cfg.DataDir, snaps); err != nil {
		return nil, err
	}
	if cfg.cluster() && !member && existing {
		// Raft state without the file: a dir from before it, or the file
		// lost. It has been a member all the same.
		if err := writeMemberFile(cfg.DataDir, cfg.NodeID); err != nil {
			return nil, err
		}
		member = true
	}
	if cfg.Mux != nil && cfg.cluster() && cfg.Bootstrap && !existing && !started && persistedClusterID == "" {
		// A --bootstrap node chooses its new cluster's id before its
		// transport exists: the transport accepts raft connections from
		// the moment it is made, and the raft port checks a dialer's
		// cluster id only when the connection arrives. Chosen later (in
		// bootstrap, as before), a wiped member restarted with
		// --bootstrap while its old peers ran took their leader's
		// connection in that moment and became an empty voter of the old
		// cluster (TestClusterWipedMemberRebootstrappedWhilePeersRunIsRefused,
		// one run in three).
		id, err := newClusterID()
		if err != nil {
			return nil, err
		}
		if err := writeFileSync(cfg.DataDir, ClusterIDFile, id+"\n"); err != nil {
			return nil, fmt.Errorf("node: record the new cluster's id in %s: %w", filepath.Join(cfg.DataDir, ClusterIDFile), err)
		}
		cfg.Logger.Info("chose the new cluster's id", "cluster_id", id)
		persistedClusterID = id
	}
	if cfg.Mux != nil && persistedClusterID != "" {
		// The raft port checks a dialer's cluster id from the transport's
		// first connection on (replaced by the state's below): in the
		// moment between the two, a re-bootstrapped node's port took the
		// old cluster's leader in (TestClusterWipedMemberRebootstrappedWhilePeersRunIsRefused,
		// once in a run).
		cfg.Mux.SetClusterID(func() string { return persistedClusterID })
	}
	trans := cfg.transport() // after every early return: a mux's transport holds its raft side
	var admission *admissionTransport
	if cfg.AdmitOnAdd && cfg.cluster() && !existing && !cfg.Bootstrap && len(cfg.Peers) == 0 {
		// A node waiting to be added answers no raft RPC until a leader
		// says it adds it (admission.go).
		if admission, err = newAdmissionTransport(trans, cfg.Logger); err != nil {
			if c, ok := trans.(raft.WithClose); ok {
				c.Close()
			}
			return nil, err
		}
		trans = admission
	}
	w := newWaiters()
	n := &Node{
		cfg:     cfg,
		store:   store,
		wait:    w,
		fsm:     newFSM(state.New(), w, cfg.WatchHistory), // rules come from the log (Config.Rules)
		props:   newProposer(cfg.groupsInFlight),
		officeC: make(chan struct{}, 1),
		closing: make(chan struct{}),
		addr:    string(trans.LocalAddr()),

		startedBefore: started,
		admission:     admission,
	}
	n.fsm.logger = cfg.Logger
	n.persistedID.Store(&persistedClusterID)
	if cfg.Mux != nil {
		cfg.Mux.SetClusterID(n.muxClusterID())
	}
	n.fail = raftstore.NewFailStop(func(err error) {
		n.leaveOffice() // acknowledge nothing more, serve no reads
		n.signalOffice()
		cfg.OnFatal(err)
	})
	var logs raft.LogStore = store.Log
	if cfg.wrapLog != nil {
		logs = cfg.wrapLog(logs)
	}
	n.log = &raftstore.GuardedLog{LogStore: logs, Fail: n.fail, Commands: entryCommandCount}
	n.snap = newSnapTrigger(cfg, n.log)
	n.log.Wrote = n.snap.check
	var snapStore raft.SnapshotStore = snaps
	if cfg.wrapSnapshots != nil {
		snapStore = cfg.wrapSnapshots(snapStore)
	}
	var stable raft.StableStore = store.Stable
	if cfg.wrapStable != nil {
		stable = cfg.wrapStable(stable)
	}
	if cfg.cluster() && !member {
		// A new dir: MemberFile before its first term (a bootstrap's, or
		// a leader's or candidate's), before it answers anyone.
		stable = &memberMarkingStable{StableStore: stable, dir: cfg.DataDir, id: cfg.NodeID}
	}
	gsnaps := &raftstore.GuardedSnapshots{SnapshotStore: snapStore, Fail: n.fail, Mark: n.snap.mark, Done: n.snap.done}
	gstable := &raftstore.GuardedStable{StableStore: stable, Fail: n.fail}
	if !existing {
		// The first configuration is written before raft starts (as
		// hashicorp/raft's own BootstrapCluster function does): once
		// NewRaft runs, the transport takes RPCs, and a peer elected a
		// moment earlier may append to this log first, after which a
		// bootstrap is refused ("bootstrap only works on new clusters")
		// and a --peers node that started a second late exited.
		if err := n.bootstrap(trans, gstable, gsnaps, store.Kind); err != nil {
			if c, ok := trans.(raft.WithClose); ok {
				c.Close()
			}
			return nil, err
		}
		// A node that bootstrapped has a configuration of its own; one
		// that did not (it waits to be added) started without any.
		bootstrapped, err := raft.HasExistingState(store.Log, store.Stable, snaps)
		if err != nil {
			if c, ok := trans.(raft.WithClose); ok {
				c.Close()
			}
			return nil, fmt.Errorf("node: inspect state: %w", err)
		}
		n.startedEmpty = !bootstrapped
	}
	opened := time.Now()
	// What the log holds now is replayed once raft knows it committed:
	// not handed to OnChanges (the operator view would stamp it with the
	// replay's time, changehook.go).
	if last, err := n.log.LastIndex(); err == nil {
		n.fsm.replayTo.Store(last)
	}
	r, err := raft.NewRaft(cfg.raftConfig(), n.fsm, n.log, gstable, gsnaps, trans)
	n.cfg.start.raft = time.Since(opened)
	if err != nil {
		if c, ok := trans.(raft.WithClose); ok {
			c.Close() // a mux's raft side is refused again
		}
		return nil, fmt.Errorf("node: start raft: %w", err)
	}
	n.raft, n.trans = r, trans
	if existing && cfg.cluster() {
		if err := n.checkAddress(trans.LocalAddr()); err != nil {
			r.Shutdown().Error()
			return nil, err
		}
	}
	// The commit loops (group.go) are not in wg: one may wait on a future
	// raft never answers after Shutdown (one still queued then), and Close
	// does not wait for it; it holds nothing.
	for range n.props.limit {
		go n.commitLoop()
	}
	n.wg.Add(5)
	go n.logReplay(opened, r.AppliedIndex())
	go n.logLeaders()
	go n.watchLeadership()
	go n.runTicker()
	go n.runSnapshots()
	if cfg.cluster() {
		// A cluster member does not wait to lead: it may be a follower,
		// or wait to be added (join). Ready says when it can serve.
		n.wg.Add(2)
		go n.watchRules()
		go n.watchFatal()
		lid, laddr := n.Leader()
		cfg.Logger.Info("node running (cluster mode)", "node_id", cfg.NodeID, "raft_addr", cfg.Mux.Addr(), "existing_state", existing,
			"leader_id", lid, "leader_addr", laddr, "last_token", n.LastToken())
		return n, nil
	}
	if err := n.awaitOffice(cfg.ReadyTimeout); err != nil {
		n.Close()
		return nil, err
	}
	var base int64
	if c := n.clock.Load(); c != nil { // nil only if a fatal error came since
		base = c.base
	}
	cfg.Logger.Info("node ready", "node_id", cfg.NodeID, "server_time", time.Duration(base), "last_token", n.LastToken())
	return n, nil
}

// startTimes: when Open began, and how long opening the storage (the
// WAL's recovery of its tail segment) and raft's start (NewRaft: the
// snapshot restore, logged on its own by the fsm) took.
type startTimes struct {
	began         time.Time
	storage, raft time.Duration
}

// logReplay logs, once the entries the log held at start are applied,
// how many there were past the restored snapshot (from: its index, raft's
// applied index when NewRaft returns) and how long the start took, in
// parts: took (from raft's start to the last entry applied, as before),
// storage (opening the WAL), raft_start (NewRaft, with the snapshot
// restore), wait (from then to the first entry applied: a single node's
// election, or a follower's wait to hear the leader's commit index —
// raft applies nothing of its log before), apply (the first entry applied
// to the last) and since_open (the whole of Open's time to here). A slow
// restart is seen, and where its time went; Status has the same parts
// (LastStart). It then ends the WAL's read-ahead (raftstore.Store.ReadAhead:
// a restart reads the log tail once, in order). It gives up silently when
// the node closes first.
func (n *Node) logReplay(opened time.Time, from uint64) {
	defer n.wg.Done()
	defer n.store.ReadAhead(false)
	last, err := n.log.LastIndex()
	if err != nil {
		return
	}
	for {
		applied, next := n.fsm.appliedWait()
		if applied >= last || last <= from {
			done := time.Now()
			st := StartTimes{Entries: last - min(from, last), Storage: n.cfg.start.storage, RaftStart: n.cfg.start.raft, Total: done.Sub(n.cfg.start.began)}
			if first := n.fsm.firstBatch.Load(); first != 0 && st.Entries > 0 {
				at := time.Unix(0, first)
				st.Wait = max(0, at.Sub(opened)-st.RaftStart)
				st.Apply = done.Sub(at)
			} else {
				st.Wait = max(0, done.Sub(opened)-st.RaftStart)
			}
			n.lastStart.Store(&st)
			n.cfg.Logger.Info("log replayed", "entries", st.Entries, "to_index", last, "took", done.Sub(opened),
				"storage", st.Storage, "raft_start", st.RaftStart, "wait", st.Wait, "apply", st.Apply, "since_open", st.Total)
			return
		}
		select {
		case <-n.closing:
			return
		case <-next:
		}
	}
}

// awaitOffice waits until the leader clock runs. Giving up leaves nothing
// waiting: the caller closes the node, and takeOffice's wait for its
// barrier ends with it.
func (n *Node) awaitOffice(timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for n.clock.Load() == nil {
		select {
		case <-deadline.C:
			return fmt.Errorf("node: not ready within the ready timeout (%s): still replaying the log or electing itself: %w", timeout, ErrNotLeader)
		case <-n.fail.Down():
			return fmt.Errorf("node: fatal storage error while starting: %w", n.fail.Err())
		case <-poll.C:
		}
	}
	return nil
}

// await waits for raft future f, or until ctx ends or the node closes or
// fails. raft never answers a future still queued when it shuts down, so
// waiting on f.Error() alone could hang Close forever (the helper
// goroutine of such a future stays blocked; it holds nothing). ok is false
// when the wait was given up: f's outcome is unknown, and err is ctx.Err()
// or ErrClosed.
func (n *Node) await(ctx context.Context, f raft.Future) (err error, ok bool) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err, true
	case <-ctx.Done():
		return ctx.Err(), false
	case <-n.closing:
	case <-n.fail.Down():
	}
	select {
	case err := <-done:
		return err, true
	default:
		return ErrClosed, false
	}
}

// watchLeadership opens a term of office (barrier, then base = Now()) when
// raft makes this node leader, and closes it when leadership is lost.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	for {
		select {
		case <-n.closing:
			return
		case leader := <-n.raft.LeaderCh():
			n.leaveOffice()
			if leader && n.fail.Err() == nil {
				n.holdOffice()
			}
			n.signalOffice()
		}
	}
}

// holdOffice takes office, and tries again while this node still leads in
// the same term: a leader that could not take office (its barrier or its
// rules proposal failed) would otherwise lead without serving, and its
// followers, hearing from it, would never elect another. A cluster leader
// that still has not taken office after twice the election timeout hands
// leadership to another voter.
func (n *Node) holdOffice() {
	term := n.raft.CurrentTerm()
	start, wait, handed := time.Now(), 50*time.Millisecond, false
	for !n.takeOffice() {
		if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term || n.fail.Err() != nil {
			return
		}
		if n.cfg.cluster() && !handed && time.Since(start) >= 2*n.cfg.ElectionTimeout {
			n.cfg.Logger.Warn("could not take office; handing leadership to another voter", "term", term, "tried_for", time.Since(start))
			n.raft.LeadershipTransfer() // answered when done; the loop sees the step-down
			handed = true
		}
		select {
		case <-n.closing:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// takeOffice opens a term of office (barrier, clock, rules) and reports
// whether it did.
func (n *Node) takeOffice() bool {
	if n.cfg.officeHook != nil {
		if err := n.cfg.officeHook(); err != nil {
			n.cfg.Logger.Warn("taking office failed", "err", err)
			return false
		}
	}
	// The term is read before the barrier and must be the same after it:
	// terms only grow, so the barrier was then committed by this node as
	// leader of that term, and it still leads in it (raft never makes a
	// node leader twice in one term). A clock tagged with the term serves
	// only while the term lasts (leaderClock, office).
	term := n.raft.CurrentTerm()
	// The barrier returns once everything committed before it is applied.
	err, ok := n.await(context.Background(), n.raft.Barrier(0))
	if !ok {
		return false // closing, or failed
	}
	if err != nil {
		n.cfg.Logger.Warn("leader barrier failed", "err", err)
		return false
	}
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return false
	}
	// Entries up to the barrier are applied, including ones raft does not
	// hand to the FSM (noop, barrier): reads may count on it. The barrier's
	// index is the last index: nothing is proposed while the clock is nil.
	// (raft.AppliedIndex may still lag here: raft sets it after handing the
	// batch to the FSM goroutine, which can answer the barrier first.)
	n.fsm.advance(n.raft.LastIndex())
	var base, latest int64
	var held bool
	var maxSlack time.Duration
	var recorded state.Config
	var configured bool
	var queued []state.QueuedRequest
	var clusterID string
	var keyed bool
	n.fsm.read(func(m *state.Machine) {
		base, maxSlack = m.Now(), m.MaxSlack()
		latest, held = m.LatestExpiry()
		recorded, configured, queued = m.Config(), m.Configured(), m.Queued()
		clusterID = m.ClusterID()
		keyed = m.HasSigningKey()
	})
	c := newLeaderClock(base, maxSlack, latest, held)
	c.clock, c.start, c.term = n.cfg.Clock, n.cfg.Clock.Now(), term // c.start: read for its monotonic part, never the wall clock
	// The rules in force are the log's. If the operator asks for others,
	// propose them before serving: they apply to later commands only. A log
	// that never recorded rules gets them even when they equal the
	// machine's initial ones (state.DefaultConfig), so the log holds them.
	// The first leader of a log without a cluster id chooses one and
	// carries it in this OpConfig (state/clusterid.go: the machine never
	// makes one; a later one never changes it).
	if recorded != n.cfg.Rules || !configured || clusterID == "" {
		cmd := &state.Command{Op: state.OpConfig, Config: n.cfg.Rules}
		switch {
		case !configured: // a fresh log: there are no recorded rules to differ from
			n.cfg.Logger.Info("recording the configured rules", "configured", fmt.Sprintf("%+v", n.cfg.Rules))
		case recorded != n.cfg.Rules:
			n.cfg.Logger.Info("proposing the configured rules: the recorded ones differ (they apply to later commands only)",
				"recorded", fmt.Sprintf("%+v", recorded), "configured", fmt.Sprintf("%+v", n.cfg.Rules))
		}
		if clusterID == "" {
			// A --bootstrap node chose its id before raft started
			// (chooseClusterID); its raft port already carries it.
			id := *n.persistedID.Load()
			if id == "" {
				var err error
				if id, err = newClusterID(); err != nil {
					n.cfg.Logger.Error("choosing a cluster id failed; not taking office", "err", err)
					return false
				}
			}
			cmd.ClusterID = id
			n.cfg.Logger.Info("proposing a cluster id: the log records none", "cluster_id", id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cancelWaitTimeout)
		res, err := n.proposeUnlessClosed(ctx, c, cmd)
		cancel()
		if err == nil {
			err = res.Err
		}
		if err != nil {
			n.cfg.Logger.Error("proposing the configured rules failed; not taking office", "err", err)
			return false
		}
	}
	// A log without a signing key (a new cluster, or one upgraded from
	// before keys) gets one before this leader serves: grants are signed
	// from the first one (node/signing.go).
	if !keyed {
		ctx, cancel := context.WithTimeout(context.Background(), cancelWaitTimeout)
		err := n.proposeFirstKey(ctx, c)
		cancel()
		if err != nil {
			n.cfg.Logger.Error("proposing the first signing key failed; not taking office", "err", err)
			return false
		}
	}
	n.clock.Store(c)
	if n.fail.Err() != nil {
		n.leaveOffice() // a fatal error raced the takeoffice
		return false
	}
	n.cfg.Logger.Info("took office", "server_time", time.Duration(base), "term", term, "wall", wallNow(n.cfg.Clock), "max_slack", maxSlack, "queued_waiters", len(queued))
	if len(queued) > 0 {
		n.wg.Add(1)
		go n.reapOrphans(c, queued)
	}
	return true
}

// proposeUnlessClosed is proposeWith for the leadership watcher, which
// Close waits for: it gives up (ErrClosed) when the node closes. A proposal
// that raft took into its apply queue just as it shut down is never
// answered (raft's Apply may queue one even after Shutdown), and its
// group leader waits on it for good; the watcher must not wait with it.
// That goroutine holds nothing Close needs.
func (n *Node) proposeUnlessClosed(ctx context.Context, c *leaderClock, cmd *state.Command) (state.Result, error) {
	type answer struct {
		res state.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := n.proposeWith(ctx, c, cmd)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-n.closing:
		return state.Result{}, ErrClosed
	}
}

// leaveOffice ends the term of office, if one is open: nothing more is
// stamped or read with its clock, and the acquires waiting here on it are
// told (leaderClock.gone).
func (n *Node) leaveOffice() {
	if c := n.clock.Swap(nil); c != nil {
		close(c.gone)
	}
}

// office is the clock of the term of office this node holds, or nil: none
// open, or raft has moved to another term since it was opened (the
// leadership watcher will close it).
func (n *Node) office() *leaderClock {
	c := n.clock.Load()
	if c == nil || n.raft.CurrentTerm() != c.term {
		return nil
	}
	return c
}

func (n *Node) signalOffice() {
	select {
	case n.officeC <- struct{}{}:
	default:
	}
}

// Now is the leader clock in nanoseconds of server time, or ErrNotLeader.
func (n *Node) Now() (int64, error) {
	c := n.office()
	if c == nil {
		return 0, ErrNotLeader
	}
	return c.now(), nil
}

// LastToken is the last token issued by the applied state (0 if none).
func (n *Node) LastToken() fence.Token {
	var t fence.Token
	n.fsm.read(func(m *state.Machine) { t = m.LastToken() })
	return t
}

// Close stops the ticker, fails waiting acquires with ErrClosed, shuts raft
// down and closes the stores. A cluster leader with other voters first
// hands leadership over (bounded by twice the election timeout), so
// clients see a short hand-over rather than an election timeout. It is
// safe to call more than once. It does not close Config.Mux.
func (n *Node) Close() error { return n.close(true) }

// closeTransport closes raft's transport once raft has been told to shut
// down, before waiting for raft's goroutines. hashicorp/raft's shutdown
// future closes the transport only after every raft goroutine has
// returned: a replication worker blocked on a peer that stopped
// answering, or a follower reading a snapshot from a leader that stalled,
// would hold the close (and the transport, whose connection handlers go on
// taking the peers' RPCs for a raft that no longer reads them) until its
// I/O gives up. Closed here, those calls fail at once, and no RPC arriving
// now waits for a raft that is gone. (raft closes it again later: a
// no-op.)
func (n *Node) closeTransport() {
	if c, ok := n.trans.(raft.WithClose); ok {
		c.Close()
	}
}

// close closes the node; handOver false skips the leadership transfer
// (tests: a leader that dies).
func (n *Node) close(handOver bool) error {
	n.closeOnce.Do(func() {
		if handOver {
			n.handOver()
		}
		close(n.closing)
		// Queued proposals are answered here, not by their waiters
		// selecting on closing (group.go).
		n.props.close(ErrClosed)
		n.leaveOffice()
		f := n.raft.Shutdown()
		n.closeTransport()
		err := f.Error()
		n.wg.Wait()
		if cerr := n.store.Close(); err == nil { // the stores, then the dir lock
			err = cerr
		}
		n.closeErr = err
	})
	return n.closeErr
}
