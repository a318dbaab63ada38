package node

import (
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// Config configures a node. The zero value (with DataDir set) is a single
// voter that bootstraps itself on first start.
type Config struct {
	// DataDir holds the raft log and stable store (wal/), snapshots/, and
	// the LOCK file a running node holds.
	DataDir string
	// LogStore is LogStoreWAL or empty (the same); any other is refused.
	LogStore string
	// NodeID is the raft server ID, default "fence-1".
	NodeID string
	// Rules are the operator's desired state rules (flags): MaxTTL, id
	// memory, caps. The zero value means state.DefaultConfig; otherwise a
	// zero MaxTTL, MaxOps, MaxRequests or IDRetention takes DefaultConfig's
	// value and the other fields mean what they mean in state.Config (0: no
	// cap). They are
	// not handed to the machine: the machine's rules are in its log (it
	// starts from state.DefaultConfig, a constant of the log format). Once
	// in office, a node whose recorded rules (Node.Rules) differ proposes
	// an OpConfig with these, which applies only to later commands. So a
	// restart with different flags keeps every acknowledged lease and
	// token. Open refuses rules that fail state.Config.Validate.
	Rules state.Config
	// MaxTTL, if set and Rules is zero, means state.DefaultConfig with this
	// MaxTTL (for older callers).
	MaxTTL time.Duration
	// Logger receives node and raft logs; default slog.Default().
	Logger *slog.Logger
	// Transport carries raft RPCs. Nil means Mux's transport in cluster
	// mode, else an in-memory one, which is enough for a single voter.
	Transport raft.Transport

	// Mux, when set, makes this node a cluster member: raft runs over TCP
	// on the mux's port (raftstore.Listen), and Open returns once raft
	// runs instead of waiting to lead (a joining node must listen before
	// it is added). The node does not close the mux: its caller does,
	// after Node.Close. Nil: a single node, as before.
	Mux *raftstore.Mux
	// Bootstrap (cluster mode, first start only) bootstraps a one-voter
	// cluster of this node; others join it (AddVoter through the leader).
	Bootstrap bool
	// Peers (cluster mode, first start only) bootstraps this full set of
	// voters, which must include NodeID (with the mux's address). Every
	// node of a static cluster is given the same Peers: raft accepts
	// identical bootstraps. With neither Bootstrap nor Peers a new node
	// starts empty and waits to be added (join mode). A data dir with raft
	// state ignores both: the node rejoins with its log.
	Peers []Peer
	// AdmitOnAdd (cluster mode): a node that starts without raft state and
	// without Bootstrap or Peers (it waits to be added) answers every raft
	// RPC with ErrNotAdmitted until Admit is called — when a leader says it
	// is adding this node (package cluster: NodeStatus with adding, which
	// the leader asks before AddVoter). A leader that lists this node's id
	// already (a member whose data dir was lost, started again empty under
	// its old id) is refused instead of making an empty voter of it.
	AdmitOnAdd bool

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and
	// CommitTimeout are raft's timeouts (raft.Config). Zero takes the
	// defaults: for a cluster LAN values (500ms, 1s, 500ms, 10ms), for a
	// single node 100ms, 100ms, 100ms and 5ms (it elects only itself).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// Clock is where the node reads time; nil is SystemClock. Only a test
	// harness sets another (daemon.Hooks: a wall clock an hour off, a
	// stopwatch 0.5% fast).
	Clock Clock
	// LockTimeout bounds the wait for the data directory's file lock: a
	// second process on the same DataDir fails after it. Default 1s.
	LockTimeout time.Duration
	// ReadyTimeout bounds how long Open waits for the single voter to elect
	// itself and take office. Default 10s.
	ReadyTimeout time.Duration
	// SnapshotThreshold is the least number of commands written to the
	// log (a group entry counts its commands: a restart replays each)
	// after which the node takes a snapshot (and raft compacts the log),
	// once the log since the last one also holds a quarter of that
	// snapshot's bytes (snapshots.go). Default 8192.
	SnapshotThreshold uint64
	// SnapshotBytes is the size of command data appended to the log after
	// which the node takes a snapshot, whatever the entry count, so a
	// restart replays a bounded log. Default 64 MiB.
	SnapshotBytes uint64
	// SnapshotReplay is the most commands the log may hold after the last
	// snapshot: at it the node takes a snapshot whatever the size share
	// says, so a restart replays at most about this many commands however
	// large the state (the share rule alone lets the log grow with it: a
	// quarter of a 400 MB state is a million commands to replay). It costs
	// snapshot writes only for a state large enough that the share rule
	// waits longer: a snapshot of S bytes every SnapshotReplay commands
	// (docs/operations.md). Default 262,144 (DefaultSnapshotReplay).
	SnapshotReplay uint64
	// WALSegmentSize is the size of raft-wal's segment files (each is
	// preallocated). Default 64 MiB (raft-wal's default).
	WALSegmentSize int
	// OnFatal is called once, with the error, when a write to the raft log,
	// stable store or snapshot store fails: the node cannot know what is
	// durable and stops acknowledging (fail-stop). Default: log the error
	// and os.Exit(70). A restart recovers every acknowledged entry. An
	// OnFatal that returns leaves the node stopped (a cluster leader steps
	// down); it is called on one of raft's goroutines, and raft panics if
	// a failed write of a new term returns to it.
	OnFatal func(error)
	// RequireSignedWrites refuses a write of the built-in store (Write,
	// Add, Delete) that carries a bare token, once the state has a
	// signing key: only a lease's holder (or an admin) is handed its proof,
	// so a principal with write permission can no longer write with
	// another's token (FORGED_TOKEN, "no proof"). Checked before a write is
	// proposed, by the node that serves it (a follower forwards writes:
	// the leader's setting decides; set it on every node).
	RequireSignedWrites bool

	// WaiterGrace is how long a node that took office waits for clients to
	// re-attach to acquires that were queued when it took office (a retry
	// with the same request_id) before it withdraws the others: a waiter
	// nobody waits for holds a lock at most this long (it may be granted
	// during the grace; its cancel then releases the lease). Default 5s.
	WaiterGrace time.Duration
	// WaitMargin bounds a blocking acquire at its Wait plus this margin
	// even when the caller's context has no deadline. Default 2s.
	WaitMargin time.Duration
	// TrailingLogs is how many entries raft keeps in the log behind a
	// snapshot (for a follower catching up; a single node needs none).
	// Default 64 (DefaultTrailingLogs): entries may be 1 MiB writes, so
	// raft's 10240 could keep 10 GiB on disk and 1024 kept 1 GiB. The
	// WAL frees whole segments only (see the package doc, Snapshots).
	TrailingLogs uint64
	// WatchHistory is how many recent changes of locks the node keeps for
	// watches to resume from (Node.Watch); a watch that falls further
	// behind is cut. Default DefaultWatchHistory.
	WatchHistory int

	// wrapLog, for tests, wraps the log store under the node's fail-stop
	// guard (to inject slow or failing writes).
	wrapLog func(raft.LogStore) raft.LogStore
	// graceEnd, for tests, ends the WaiterGrace when it is closed instead
	// of after WaiterGrace (a test orders its steps before and after the
	// grace by events, not by how fast the machine runs them).
	graceEnd <-chan struct{}
	// wrapStable and wrapSnapshots, for tests, wrap raft's stable store
	// and snapshot store under the fail-stop guards (a failing term or
	// vote write, or snapshot install, on one node of a cluster).
	wrapStable    func(raft.StableStore) raft.StableStore
	wrapSnapshots func(raft.SnapshotStore) raft.SnapshotStore
	// start: when Open began and what its first parts took (set by
	// Open; logged with the log replay, Node.logReplay)
	start startTimes
	// officeHook, for tests, runs at the start of every attempt to take
	// office; an error fails the attempt.
	officeHook func() error
	// groupsInFlight, for benchmarks, overrides how many command groups
	// may be in flight (0: groupsInFlight).
	groupsInFlight int
}

// raftSnapshotOff is raft's SnapshotThreshold: more raft entries than any
// log holds, so raft never snapshots on its own (snapshots.go decides).
const raftSnapshotOff = 1 << 62

// DefaultTrailingLogs is Config.TrailingLogs when unset.
const DefaultTrailingLogs = 64

func (c Config) withDefaults() Config {
	if c.NodeID == "" {
		c.NodeID = "fence-1"
	}
	if c.Rules == (state.Config{}) && c.MaxTTL != 0 {
		c.Rules = state.DefaultConfig()
		c.Rules.MaxTTL = c.MaxTTL
	}
	c.Rules = withDefaultRules(c.Rules)
	c.MaxTTL = c.Rules.MaxTTL
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = time.Second
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotReplay == 0 {
		c.SnapshotReplay = DefaultSnapshotReplay
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 64 << 20
	}
	if c.WaiterGrace == 0 {
		c.WaiterGrace = 5 * time.Second
	}
	if c.WaitMargin == 0 {
		c.WaitMargin = 2 * time.Second
	}
	if c.OnFatal == nil {
		c.OnFatal = defaultOnFatal(c)
	}
	c = c.withDefaultTimeouts()
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	return c
}

// withDefaultTimeouts fills in raft's timeouts: LAN values for a cluster
// (a heartbeat lost now and then must not start an election), quick ones
// for a single node (it elects only itself).
func (c Config) withDefaultTimeouts() Config {
	hb, el, lease, commit := 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 5*time.Millisecond
	if c.cluster() {
		hb, el, lease, commit = 500*time.Millisecond, time.Second, 500*time.Millisecond, 10*time.Millisecond
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = hb
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = el
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = lease
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = commit
	}
	return c
}

// cluster reports cluster mode: raft over the mux's TCP port.
func (c Config) cluster() bool { return c.Mux != nil }

// raftLogger is raft's logger (raftstore.NewHCLogger): a cluster node's
// shares the mux's peer log, so a peer logged unreachable is logged back
// when the transport hears from it; a single node's first election on every
// start is expected (INFO, not WARN).
func (c Config) raftLogger() hclog.Logger {
	if c.cluster() {
		return c.Mux.RaftLogger(c.Logger)
	}
	if c.Transport == nil {
		return raftstore.NewHCLogger(c.Logger, raftstore.SingleVoter())
	}
	return raftstore.NewHCLogger(c.Logger)
}

// withDefaultRules completes the desired rules: the zero Rules are
// state.DefaultConfig; otherwise the fields that cannot be zero (MaxTTL,
// MaxOps, MaxRequests, IDRetention) take DefaultConfig's values when zero,
// and the others keep state.Config's meaning of zero (no cap; ids may be
// forgotten by count at any age).
func withDefaultRules(r state.Config) state.Config {
	if r == (state.Config{}) {
		return state.DefaultConfig()
	}
	return r.WithRequiredFrom(state.DefaultConfig())
}

// raftConfig tunes raft: the timeouts of Config (quick for a single voter,
// LAN values for a cluster), and concurrent Apply calls are group-committed (up to MaxAppendEntries per
// StoreLogs, one fsync) and applied by the BatchingFSM under one lock.
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	// A removed node stays up as a follower that is in no configuration
	// (it never stands for election, so it can grant nothing) instead of
	// shutting raft down under the node: its callers get ErrNotLeader,
	// not an unknown outcome, and it can be added back.
	rc.ShutdownOnRemove = false
	// 128 entries per StoreLogs is more than the proposals that queue
	// during one fsync at 64 concurrent clients (10-20), and raft allocates
	// a MaxAppendEntries-long slice for every committed batch: 1024 cost 8%
	// more bytes allocated per acquire+release through the API, for
	// nothing (docs/benchmarks.md).
	rc.MaxAppendEntries = 128
	rc.BatchApplyCh = true
	// The node's snapshot trigger (snapshots.go) decides, after every
	// write: raft's own check (every SnapshotInterval, a fixed count of
	// raft entries) is off. As a backstop it rewrote a 151 MB state every
	// 30 s (an outside soak: ~3 MB/s of snapshot writes a node), ignoring
	// the size rule.
	rc.SnapshotThreshold = raftSnapshotOff
	rc.SnapshotInterval = 30 * time.Second
	rc.TrailingLogs = DefaultTrailingLogs
	if c.TrailingLogs > 0 {
		rc.TrailingLogs = c.TrailingLogs
	}
	rc.Logger = c.raftLogger()
	return rc
}
