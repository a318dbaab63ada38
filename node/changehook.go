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
func (n *Node) OnChanges(fn func(index uint64, cs []state.Change)) {
	if fn == nil {
		n.fsm.onChanges.Store(nil)
		return
	}
	n.fsm.onChanges.Store(&fn)
}
