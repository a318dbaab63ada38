package node

import (
	"os"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
)

// The raft plumbing (data-dir lock, log store choice, fail-stop wrappers)
// is package raftstore; what stays here is the node's side of it: which
// kinds Config.LogStore names, and what the node does when a durable write
// fails (the FailStop's onFatal in open: clear the clock so nothing more
// is acknowledged or read, wake the office watcher, call Config.OnFatal).

// Log store kinds (Config.LogStore), as raftstore names them.
const (
	LogStoreWAL  = raftstore.LogStoreWAL
	LogStoreBolt = raftstore.LogStoreBolt
)

// defaultOnFatal logs err and exits the process with status 70
// (EX_SOFTWARE): a restart recovers from the log, which holds every
// acknowledged entry.
func defaultOnFatal(cfg Config) func(error) {
	return func(err error) {
		cfg.Logger.Error("fatal storage error: stopping (fail-stop); restart to recover from the log", "err", err)
		os.Exit(70)
	}
}

// watchFatal (cluster mode) shuts raft down on a fatal storage error. The
// guards already refuse appends and snapshots, but raft would go on
// heartbeating, voting and answering: a leader whose snapshot write failed
// (not an append, so raft does not step down by itself) would keep its
// followers from electing anyone while it serves nothing. Stopped, it
// takes no further part and the others elect. With the default OnFatal
// the process exits anyway; this matters for an OnFatal that returns.
func (n *Node) watchFatal() {
	defer n.wg.Done()
	select {
	case <-n.fail.Down():
		n.cfg.Logger.Error("fatal storage error: raft stopped; this node takes no further part in the cluster until it is restarted",
			"node_id", n.cfg.NodeID, "err", n.fail.Err())
		n.shutdownRaft()
	case <-n.closing:
	}
}

// shutdownRaft shuts raft down once and returns that shutdown's future. A
// second raft.Shutdown returns at once without waiting for raft's
// goroutines, so whoever closes the stores waits on this one.
func (n *Node) shutdownRaft() raft.Future {
	n.raftDownOnce.Do(func() { n.raftDown = n.raft.Shutdown() })
	return n.raftDown
}
