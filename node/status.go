package node

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// Status is a snapshot of the node for health checks and metrics.
type Status struct {
	Leader       bool        // raft says this node leads
	InOffice     bool        // the leader clock runs (barrier done)
	CommitIndex  uint64      // raft's commit index
	AppliedIndex uint64      // the FSM's applied index
	LastToken    fence.Token // last token issued
	ServerTime   int64       // leader clock (0 when not in office)
	Waiters      int         // blocking acquires waiting on this node
	Ticks        uint64      // OpTicks proposed by this node's ticker
	// Slack is what a command stamped now would carry: how far expiry
	// decisions lag the leader clock to cover commit latency (G3). Leases
	// last this much longer than their TTL; 0 when not in office.
	Slack time.Duration
	// Fatal is the storage error that stopped the node (fail-stop, see
	// Config.OnFatal), or nil.
	Fatal error
	// LogSyncs counts the fsyncs of the WAL's segment files (0 with the
	// bolt log store).
	LogSyncs uint64
	// Snapshots counts the snapshots this process has written.
	Snapshots uint64
	// OldestIDAge is the age, in server time, of the oldest remembered
	// op_id or request_id (state.Machine.OldestIDAge), 0 if none.
	OldestIDAge time.Duration
	// IDMemory is what the id memories hold (counts, caps, bytes), and
	// IDMemoryNearCap whether one is at least 90% of its cap (the node
	// logged it: new ids are about to be refused).
	IDMemory        state.IDMemory
	IDMemoryNearCap bool
	// SnapshotBytes is the size of the last snapshot this process wrote
	// (0 before its first).
	SnapshotBytes uint64
	// LastStart is how this process's start went, in parts, once the log
	// it held at start is applied (nil before; Node.logReplay logs it).
	LastStart *StartTimes
	// Queued is the number of acquires queued in the machine (on all
	// locks, whoever waits for them); Waiters counts those waiting here.
	Queued int
	// Rules are the rules recorded in the log and in force.
	Rules state.Config
	// Sessions is the number of sessions the machine holds
	// (state.Machine.Sessions).
	Sessions int
	// Resources and ResourceBytes are the fenced resources the machine
	// holds (tombstones included) and the bytes of their values.
	Resources     int
	ResourceBytes int64
	// StateTime is the machine's server time: the latest stamp of the
	// commands it applied (on a leader in office ServerTime, the running
	// leader clock, is ahead of it).
	StateTime int64
	// ClusterID is the cluster's id recorded in the state
	// (state.Machine.ClusterID; "" before the first leader took office).
	ClusterID string
	// SigningKey: the state holds a signing key (node/signing.go); a node
	// is not ready without one (its grants would carry no proof).
	SigningKey bool
	// Proposals counts the commands this process proposed, Groups the log
	// entries they were grouped into (group commit): Proposals/Groups is
	// the mean group size.
	Proposals, Groups uint64

	// ID and RaftAddr are this node's; Role is raft's state ("Leader",
	// "Follower", "Candidate", "Shutdown"); LeaderID and LeaderAddr the
	// leader it knows ("" if none); Term raft's current term; LastContact
	// the last time a follower heard from its leader (zero on a leader, and
	// before any contact).
	ID, RaftAddr         string
	Role                 string
	LeaderID, LeaderAddr string
	Term                 uint64
	LastContact          time.Time
}

// StartTimes is a node's start, in parts (the "log replayed" log line).
type StartTimes struct {
	// Entries: log entries after the restored snapshot that were applied
	// (raft's own included).
	Entries uint64
	// Storage: opening the WAL (its recovery reads the tail segment).
	// RaftStart: raft's start (NewRaft), with the snapshot restore.
	// Wait: from then to the first entry applied (an election, or hearing
	// the leader's commit index: raft applies nothing before). Apply: the
	// first entry applied to the last. Total: from Open's call to the last
	// entry applied.
	Storage, RaftStart, Wait, Apply, Total time.Duration
}

// Ready reports whether the node can serve (Node.Ready): no fatal error,
// a signing key in the state, and either it leads, its clock runs and its FSM has applied everything
// committed, or it follows a known leader and has applied everything it
// knows to be committed.
func (s Status) Ready() bool {
	switch {
	case s.Fatal != nil, !s.SigningKey:
		return false
	case s.Leader:
		return s.InOffice && s.AppliedIndex >= s.CommitIndex
	}
	return s.Role == raft.Follower.String() && s.LeaderID != "" && s.AppliedIndex >= s.CommitIndex
}

// Status reports the node's state. It is cheap (no raft round trip).
func (n *Node) Status() Status {
	s := Status{
		Leader:          n.raft.State() == raft.Leader,
		CommitIndex:     n.raft.CommitIndex(),
		AppliedIndex:    n.fsm.applied.Load(),
		Waiters:         n.wait.count(),
		Ticks:           n.ticks.Load(),
		Fatal:           n.fail.Err(),
		LogSyncs:        n.store.Syncs(),
		Snapshots:       n.snap.taken.Load(),
		SnapshotBytes:   n.snap.lastSize.Load(),
		IDMemoryNearCap: n.fsm.nearCap.Load(),
		Proposals:       n.props.commands.Load(),
		Groups:          n.props.groups.Load(),
		LastStart:       n.lastStart.Load(),
	}
	s.ID, s.RaftAddr, s.Role, s.Term = n.cfg.NodeID, n.addr, n.raft.State().String(), n.raft.CurrentTerm()
	s.LeaderID, s.LeaderAddr = n.Leader()
	if !s.Leader {
		s.LastContact = n.raft.LastContact()
		// A follower's FSM is not handed the leaders' noop and barrier
		// entries: raft's applied index counts them.
		s.AppliedIndex = max(s.AppliedIndex, n.raft.AppliedIndex())
	}
	if c := n.office(); c != nil {
		s.InOffice = true
		s.ServerTime, s.Slack, _ = c.lag.peek(c)
	}
	n.fsm.read(func(m *state.Machine) {
		s.LastToken = m.LastToken()
		now := s.ServerTime
		if now == 0 {
			now = m.Now()
		}
		s.OldestIDAge = m.OldestIDAge(now)
		s.IDMemory = m.IDMemory()
		s.Queued = m.Waiting() // a counter: Status is polled by health checks
		s.Rules = m.Config()
		s.Sessions = m.Sessions()
		s.Resources, s.ResourceBytes = m.Resources(), m.ResourceBytes()
		s.StateTime = m.Now()
		s.ClusterID = m.ClusterID()
		s.SigningKey = m.HasSigningKey()
	})
	return s
}

// Rules returns the rules recorded in the log and in force: what the
// server must validate requests against (never its own flags, which apply
// only once the node has proposed them; see Config.Rules).
func (n *Node) Rules() state.Config {
	var c state.Config
	n.fsm.read(func(m *state.Machine) { c = m.Config() })
	return c
}

// MaxTTL is the largest lease TTL the rules recorded in the log allow (the
// rules applied so far on this node; on a follower, the leader's). It takes
// no lock: the server checks every request's ttl against it. A node's own
// flags (Config.Rules) only propose rules; this is what decides.
func (n *Node) MaxTTL() time.Duration { return n.Limits().MaxTTL }

// Limits are the request bounds of the rules recorded in the log (the
// largest TTL and lock-delay; state.Config.Limits), read without a lock:
// the server and the node judge every request by them.
func (n *Node) Limits() fence.Limits { return *n.fsm.limits.Load() }

// HeldLeases counts the locks held as of the last command applied
// (state.Machine.Holders: O(1), no scan; a lease past its end counts until
// the tick the ticker proposes for it is applied).
func (n *Node) HeldLeases() int {
	held := 0
	n.fsm.read(func(m *state.Machine) { held = m.Holders() })
	return held
}

// OnSync registers fn to be called with the duration of each fsync of the
// raft log's WAL segment files (raftstore.Store.OnSync; never with the bolt
// log store), replacing any earlier fn (nil removes it). fn must not block.
func (n *Node) OnSync(fn func(time.Duration)) { n.store.OnSync(fn) }

// OnBatch registers fn to be called after each applied batch with its size
// (for metrics), replacing any earlier fn (nil removes it). It may be called
// at any time, also while batches are applied; fn runs on raft's FSM
// goroutine and must not block.
func (n *Node) OnBatch(fn func(entries int)) {
	if fn == nil {
		n.fsm.onBatch.Store(nil)
		return
	}
	n.fsm.onBatch.Store(&fn)
}
