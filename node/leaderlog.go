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
// (an election is under way). The term is read in raft's own goroutine as
// it reports the change (the observer's filter runs there, before raft
// goes on), so it is the term of the change, not of a later one. A leader
// this node already knew when the observer was registered is logged too
// (as a change from none), so a single node's first election is not
// missed; the same leader in the same term is never logged twice.
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
	var last leaderChange
	addr, id := n.raft.LeaderWithID()
	n.logLeader(&last, leaderChange{id: string(id), addr: string(addr), term: n.raft.CurrentTerm()})
	for {
		select {
		case <-n.closing:
			return
		case c := <-ch:
			if d := dropped.Swap(0); d > 0 {
				n.cfg.Logger.Warn("leader changes not logged (too many at once)", "node_id", n.cfg.NodeID, "dropped", d)
			}
			n.logLeader(&last, c)
		}
	}
}

// logLeader logs c unless it is what was logged last (*last), and records it.
func (n *Node) logLeader(last *leaderChange, c leaderChange) {
	if c.id == last.id && c.addr == last.addr && (c.id == "" || c.term == last.term) {
		return
	}
	prev := last.id
	*last = c
	if c.id == "" {
		if prev == "" {
			return // nothing was known: there is no loss to report
		}
		n.cfg.Logger.Info("no leader", "node_id", n.cfg.NodeID, "term", c.term, "previous_leader", prev)
		return
	}
	role := "follower"
	if c.id == n.cfg.NodeID {
		role = "leader"
	}
	n.cfg.Logger.Info("leader changed", "node_id", n.cfg.NodeID, "term", c.term, "leader_id", c.id, "leader_addr", c.addr,
		"role", role, "previous_leader", prev)
}
