package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
)

// Member is one server of the raft configuration.
type Member struct {
	ID    string
	Addr  string // raft address
	Voter bool   // false: a non-voter (raft's staging or nonvoter suffrage)
}

// membershipTimeout bounds a membership change's wait when ctx has no
// deadline. A change waits for its configuration entry to commit, which
// an added node that cannot be reached holds up (a voter that is down
// still counts toward the quorum the change needs).
const membershipTimeout = 30 * time.Second

// StartedEmpty reports whether Open found no raft state in the data dir
// and wrote no bootstrap configuration: a node waiting to be added, which
// knows no log and no votes of its own. It is fixed when the node opens; a
// configuration a leader replicates to it afterwards does not change it,
// so a voter whose data dir was lost is still told apart from a member
// restarting with its data after the leader has reached it.
func (n *Node) StartedEmpty() bool { return n.startedEmpty }

// Members is the latest raft configuration this node knows (leader or
// not; on a follower it may lag the leader's).
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err, ok := n.await(ctx, f); !ok || err != nil {
		if err == nil {
			err = ErrClosed
		}
		return nil, fmt.Errorf("node: members: %w", err)
	}
	servers := f.Configuration().Servers
	out := make([]Member, 0, len(servers))
	for _, s := range servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds server id at raft address raftAddr as a voter (raft's own
// configuration change; adding a member that is already a voter at that
// address changes nothing). It returns once the change is committed. Only
// the leader in office changes membership: elsewhere ErrNotLeader (nothing
// done). An error wrapping ErrUnknownOutcome means the change may or may
// not be made (leadership lost, ctx ended): look at Members, or retry
// (the change is idempotent).
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	if id == "" {
		return fence.Invalid("id", "not empty", "")
	}
	if raftAddr == "" {
		return fence.Invalid("raft_addr", "not empty", "")
	}
	if n.office() == nil {
		return ErrNotLeader
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, enqueueTimeout(ctx))
	return n.membershipResult(ctx, f, "add "+id)
}

// RemoveServer removes server id from the configuration (it may be this
// node: the leader then steps down once the change commits, and stays a
// member of no configuration). Errors as AddVoter's; removing an id that
// is not a member changes nothing.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fence.Invalid("id", "not empty", "")
	}
	if n.office() == nil {
		return ErrNotLeader
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, enqueueTimeout(ctx))
	return n.membershipResult(ctx, f, "remove "+id)
}

// TransferLeadership hands leadership to voter id ("" = whichever voter
// raft picks: the most up to date) and returns once the target has taken
// it (or raft gave up, after an election timeout: an error). Only the
// leader transfers: elsewhere ErrNotLeader. Naming this node, the leader,
// changes nothing.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		if id == n.cfg.NodeID {
			return nil
		}
		members, err := n.Members(ctx)
		if err != nil {
			return err
		}
		var addr string
		for _, m := range members {
			if m.ID == id && m.Voter {
				addr = m.Addr
			}
		}
		if addr == "" {
			return fence.Invalid("id", "a voter of the cluster", id)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	err, ok := n.await(ctx, f)
	switch {
	case !ok:
		return fmt.Errorf("node: leadership transfer: gave up waiting (it may still happen): %w", err)
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case err != nil:
		return fmt.Errorf("node: leadership transfer: %w", err)
	}
	return nil
}

// membershipResult waits for a configuration change and says what became
// of it.
func (n *Node) membershipResult(ctx context.Context, f raft.Future, what string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, membershipTimeout)
		defer cancel()
	}
	err, ok := n.await(ctx, f)
	switch {
	case !ok:
		return fmt.Errorf("%w: membership change %q: gave up waiting: %v", ErrUnknownOutcome, what, err)
	case err == nil:
		n.cfg.Logger.Info("membership changed", "change", what)
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err) // refused before it was appended
	}
	// Leadership lost with the entry appended, an enqueue that timed out
	// in raft's queue, raft shut down: the change may yet be made.
	return n.unknown(fmt.Errorf("membership change %q: %w", what, err))
}

// enqueueTimeout is raft's bound on handing a change to its leader loop:
// ctx's time left, or membershipTimeout.
func enqueueTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return membershipTimeout
}
