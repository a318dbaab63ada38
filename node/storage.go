package node

import (
	"os"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
)

// The raft plumbing (data-dir lock, log store choice, fail-stop wrappers)
// is package raftstore; what stays here is the node's side of it: which
// log store Config.LogStore names, and what the node does when a durable write
// fails (the FailStop's onFatal in open: clear the clock so nothing more
// is acknowledged or read, wake the office watcher, call Config.OnFatal).

// LogStoreWAL names the one log store (Config.LogStore; empty is the
// same), as raftstore names it.
const LogStoreWAL = raftstore.LogStoreWAL

// defaultOnFatal logs err and exits the process with status 70
// (EX_SOFTWARE): a restart recovers from the log, which holds every
// acknowledged entry.
func defaultOnFatal(cfg Config) func(error) {
	return func(err error) {
		cfg.Logger.Error("fatal storage error: stopping (fail-stop); restart to recover from the log", "err", err)
		os.Exit(70)
	}
}

// watchFatal (cluster mode) makes a leader that hit a fatal storage error
// step down. raft steps down by itself when its own append fails, but not
// when the failure was elsewhere (a snapshot write, a compaction): it would
// go on heartbeating, so the followers would never elect anyone while it
// serves nothing. A barrier is an append, which the guard now refuses: raft
// steps down at once and answers every future it holds (ErrLeadershipLost:
// an unknown outcome for a proposal in flight). Shutting raft down instead
// would leave a proposal still queued in raft unanswered, and its caller
// waiting forever. If the node wins an election later, raft's first append
// of the term fails the same way and it steps down again. With the default
// OnFatal the process exits anyway; this matters for an OnFatal that
// returns.
func (n *Node) watchFatal() {
	defer n.wg.Done()
	select {
	case <-n.fail.Down():
	case <-n.closing:
		return
	}
	n.cfg.Logger.Error("fatal storage error: this node stops leading and stores nothing more until it is restarted",
		"node_id", n.cfg.NodeID, "err", n.fail.Err())
	if n.raft.State() == raft.Leader {
		n.raft.Barrier(0) // answered with the guard's refusal; nobody waits on it
	}
}
