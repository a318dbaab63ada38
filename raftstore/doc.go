// Package raftstore is the raft plumbing under a Fence node, apart from the
// node's lifecycle: the data dir's lock, the choice and opening of raft's
// log and stable store, the fail-stop wrappers around every durable raft
// write, the WAL's file system (fsync counting, undoing a failed segment
// write, repairing a tail a partial seal left), the hclog bridge, and the
// TCP transport with the raft port's connection mux (mux.go, transport.go),
// mutual TLS between peers when given certificates (peertls.go: a
// connection is the node its certificate's fence-node://ID URI SAN names).
// Package node builds on it; nothing here knows about state or leases (the
// mux reads only the header byte of the API's connections).
//
// # Data dir and log store
//
// Open takes an exclusive flock on Dir/LOCK (the kernel drops it when the
// process dies, so kill -9 leaves no stale lock; a second process fails
// after Config.LockTimeout with ErrDirLocked), then opens the log store. A
// new dir gets hashicorp/raft-wal (Dir/wal): each batch of entries is
// appended to a segment file with one fsync, and raft's stable store
// (term, vote) is the WAL's bolt meta file, also fsync'd. raft-wal is the
// only log store; a dir holding a raft-boltdb log (Dir/raft.db) is refused
// (logs are not migrated). Store.Close closes the stores, then
// drops the lock. Store.Syncs counts WAL segment fsyncs, so a test can see
// that every acknowledged batch was synced (G6).
//
// # The WAL's file system
//
// raft-wal (v0.4.1) writes a segment with one WriteAt a batch and seals a
// segment by putting its index frame in the batch that crosses the
// preallocated size; on a full disk that write is partial, and raft-wal
// would take the partial index frame for a seal at every restart and
// refuse every append. The VFS's files zero what a failed write left
// (countingFile.WriteAt), and Open repairs a tail left that way by an
// older binary or a crash between the two writes (repairWALTail). Only
// bytes after the last commit frame, never acknowledged, are touched.
// raft-wal records a seal and the next segment in its meta data only after
// the sealing batch returned (an asynchronous rotation); a process stopped
// in between left a tail raft-wal took for sealed yet wrote to, refusing
// every append at every start. Open records that rotation first
// (completeRotation; no segment byte changes).
//
// # Fail-stop
//
// GuardedLog, GuardedStable and GuardedSnapshots wrap raft's log store,
// stable store and snapshot store (every write path: StoreLogs,
// DeleteRange, Set, SetUint64, snapshot Create, Write, Close) and report
// the first write error to one FailStop: it records the error, closes
// Down and calls its onFatal, once. After that GuardedLog refuses every
// append and deletion, and GuardedSnapshots every new snapshot (the node's
// own, or one a leader sends), without touching the store: a log that
// failed an append may hold part of a batch, and raft-wal refuses every
// later append after one, so the only honest move is to stop. The stable
// store refuses a vote (Set: a stopped node votes for nobody, itself
// included) but still saves terms (hashicorp/raft panics when it cannot). The wrappers sit under raft whatever
// the node's role: a follower's appends (AppendEntries), its term and vote,
// and a snapshot installed from the leader go through them just as the
// leader's own writes do. What the node does on a fatal error (stop
// acknowledging, never take office again, Config.OnFatal: by default log
// and exit 70) is package node's. GuardedLog also counts bytes and commands
// stored, for the node's snapshot trigger.
package raftstore
