package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// BackupPoint is a copy of the node's state as of one applied index, and
// what a backup header records about it.
type BackupPoint struct {
	// View is the state: write it (View.WriteTo, backup.Write) without any
	// lock, while the node goes on applying.
	View *state.SnapshotView
	// Applied is the raft index of the state (every entry up to it is in
	// it, none after); Term is the term of that entry (raft's current term
	// when it is not known: after a snapshot was restored and nothing
	// applied since).
	Applied, Term uint64
	// LastToken is the state's counter. ServerTime (ns) is, on a leader,
	// the leader clock when the backup was asked for (readIndex's; at least
	// the state's server time): a restore resumes the clock there, so a
	// lease gets back none of the time the store was idle before the
	// backup. On a follower, which has no leader clock, it is the state's
	// server time (the last applied command's): restored leases may then
	// get back that idle time (up to the longest TTL), never lose time.
	LastToken  fence.Token
	ServerTime int64
	// WallUnixMS is this node's wall clock when the state was copied.
	WallUnixMS int64
	// ClusterID is the state's cluster id ("" before one was recorded),
	// NodeID this node's id, Role its raft role when the state was copied
	// (lowercase: "leader", "follower").
	ClusterID, NodeID, Role string
}

// BackupView copies the state for a backup, consistently: a leader first
// confirms it leads and waits until it has applied everything committed
// before the call (readIndex, as a linearizable read); a follower waits
// until it has applied everything it knows to be committed. The copy is
// taken under the FSM's read lock: applies wait for the copy (O(state), no
// encoding), not for the backup to be written. It fails with ErrNotLeader
// when a leader's term of office ended or a non-leader knows no leader,
// ctx.Err() or ErrClosed.
func (n *Node) BackupView(ctx context.Context) (BackupPoint, error) {
	select {
	case <-n.closing:
		return BackupPoint{}, ErrClosed
	default:
	}
	var leaderNow int64
	if n.raft.State() == raft.Leader {
		now, err := n.readIndex(ctx)
		if err != nil {
			return BackupPoint{}, err
		}
		leaderNow = now
	} else {
		// A node that knows no leader (a candidate, or cut off) may be
		// behind what the cluster committed without knowing it.
		if id, _ := n.Leader(); id == "" {
			return BackupPoint{}, fmt.Errorf("%w: node %s knows no leader: its state may be behind what the cluster committed", ErrNotLeader, n.cfg.NodeID)
		}
		if err := n.catchUp(ctx); err != nil {
			return BackupPoint{}, err
		}
	}
	p := BackupPoint{NodeID: n.cfg.NodeID}
	n.fsm.mu.RLock()
	p.View = n.fsm.m.SnapshotView()
	p.LastToken, p.ServerTime, p.ClusterID = n.fsm.m.LastToken(), max(n.fsm.m.Now(), leaderNow), n.fsm.m.ClusterID()
	// The state's index: the last entry applied to it, or a later index
	// of an entry that changes nothing (raft's noop and barrier entries,
	// which the FSM is not handed). raft publishes its applied index after
	// ApplyBatch returns, so under the lock it is never past the state.
	p.Applied, p.Term = n.fsm.at.index, n.fsm.at.term
	if ri := max(n.raft.AppliedIndex(), n.fsm.applied.Load()); ri > p.Applied {
		p.Applied, p.Term = ri, n.raft.CurrentTerm()
	}
	p.Role = strings.ToLower(n.raft.State().String()) // "leader", "follower": as NodeStatus, fence status and fence_raft_state say it
	p.WallUnixMS = wallNow(n.cfg.Clock).UnixMilli()
	n.fsm.mu.RUnlock()
	return p, nil
}

// catchUp (a follower) waits until this node has applied everything it
// knows to be committed.
func (n *Node) catchUp(ctx context.Context) error {
	ci := n.raft.CommitIndex()
	poll := time.NewTicker(5 * time.Millisecond) // raft's applied index moves without the FSM (noop, barrier)
	defer poll.Stop()
	for {
		applied, next := n.fsm.appliedWait()
		if max(applied, n.raft.AppliedIndex()) >= ci {
			return nil
		}
		select {
		case <-next:
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return ErrClosed
		}
	}
}
