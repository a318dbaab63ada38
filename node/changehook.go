package node

import "github.com/fenceworks/fence/state"

// OnChanges registers fn to be called after each applied batch with the
// changes of each command that made some (state.Result.Changes), in log
// order, with the index of the entry that carried the command, replacing
// any earlier fn (nil removes it). It may be called at any time, also
// while batches are applied. fn runs on raft's FSM goroutine, after the
// state's lock is released, and must not block or keep cs: it is what the
// server's operator view (a lock's story, the activity ring) is fed from,
// node-local memory outside the replicated state.
//
// The changes of entries the node's log already held when it opened are
// not handed: raft applies them again after a restart (a follower once
// its leader tells it they are committed), and they happened before,
// at times the node does not know (a command carries server time, not
// wall time, design.md §2). The operator view starts at the node's start.
// (An uncommitted tail of that log, replaced by a new leader's entries at
// the same indexes, is skipped too: at most what was in flight at the
// restart.)
func (n *Node) OnChanges(fn func(index uint64, cs []state.Change)) {
	if fn == nil {
		n.fsm.onChanges.Store(nil)
		return
	}
	n.fsm.onChanges.Store(&fn)
}
