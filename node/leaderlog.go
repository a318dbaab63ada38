package node

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// leaderChange is one change of the leader this node knows, with the term
// raft was in when it made the change.
type leaderChange struct {
	id, addr string // empty: no leader known (an election is under way)
	term     uint64
}

// leaderChanges bounds the changes waiting to be logged; more are counted
// as dropped (raft's goroutine never waits on the log).
const leaderChanges = 256

// logLeaders logs one line per change of the leader this node knows:
// "leader changed" with the node's id, the term, the new leader's id and
// address and this node's role; "no leader" when the known leader is lost
// (an election may be under way, or a follower is running a pre-vote). The term is read in raft's own goroutine as
// it reports the change (the observer's filter runs there, before raft
// goes on), so it is the term of the change, not of a later one. A leader
// this node already knew when the observer was registered is logged too
// (as a change from none), so a single node's first election is not
// missed. The same leader in the same term is never logged as a change
// twice: back after a "no leader", it is "leader heard from again".
func (n *Node) logLeaders() {
	defer n.wg.Done()
	ch := make(chan leaderChange, leaderChanges)
	var dropped atomic.Uint64
	obs := raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok {
			c := leaderChange{id: string(lo.LeaderID), addr: string(lo.LeaderAddr), term: n.raft.CurrentTerm()}
			select {
			case ch <- c:
			default:
				dropped.Add(1)
			}
		}
		return false // nothing goes to the observer's own channel
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	if n.cfg.Mux != nil {
		// raftstore's peer log names a peer by id and address even when
		// raft's message names only the address.
		if f := n.raft.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				n.cfg.Mux.PeerID(string(s.Address), string(s.ID))
			}
		}
	}
	var seen leaderSeen
	addr, id := n.raft.LeaderWithID()
	n.logLeader(&seen, leaderChange{id: string(id), addr: string(addr), term: n.raft.CurrentTerm()})
	for {
		select {
		case <-n.closing:
			return
		case c := <-ch:
			if d := dropped.Swap(0); d > 0 {
				n.cfg.Logger.Warn("leader changes not logged (too many at once)", "node_id", n.cfg.NodeID, "dropped", d)
			}
			n.logLeader(&seen, c)
		}
	}
}

// leaderSeen is what logLeader has logged: the last leader known (none:
// id "") and the last leader there was, with its term.
type leaderSeen struct {
	now  leaderChange // what this node knows now
	last leaderChange // the last leader it knew (id never ""), zero before the first
}

// logLeader logs c if it changes what the node knows. A leader that comes
// back in the same term after a "no leader" (a follower's pre-vote found
// the leader alive, or a pause) is not a leadership change: it is logged
// as "leader heard from again", not as "leader changed".
func (n *Node) logLeader(seen *leaderSeen, c leaderChange) {
	if c.id == seen.now.id && c.addr == seen.now.addr && (c.id == "" || c.term == seen.now.term) {
		return
	}
	prev := seen.last
	seen.now = c
	if c.id == "" {
		if prev.id != "" {
			n.cfg.Logger.Info("no leader", "node_id", n.cfg.NodeID, "term", c.term, "previous_leader", prev.id)
		}
		return
	}
	seen.last = c
	if n.cfg.Mux != nil {
		// A leader is heard from: a peer logged unreachable is back
		// (raftstore's peer log), even if this node never dials it.
		n.cfg.Mux.PeerID(c.addr, c.id)
		n.cfg.Mux.PeerHeard(c.addr)
	}
	role := "follower"
	if c.id == n.cfg.NodeID {
		role = "leader"
	}
	if c.id == prev.id && c.term == prev.term {
		n.cfg.Logger.Info("leader heard from again", "node_id", n.cfg.NodeID, "term", c.term, "leader_id", c.id, "role", role)
		return
	}
	args := []any{"node_id", n.cfg.NodeID, "term", c.term, "leader_id", c.id}
	if n.cfg.cluster() || n.cfg.Transport != nil {
		// A single node's raft knows itself by its in-memory transport's
		// address, which no one can reach: NodeStatus reports none, and
		// neither does the log.
		args = append(args, "leader_addr", c.addr)
	}
	n.cfg.Logger.Info("leader changed", append(args, "role", role, "previous_leader", prev.id)...)
}
