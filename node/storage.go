package node

import (
	"os"

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
