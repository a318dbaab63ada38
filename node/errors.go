package node

import "errors"

// ErrNotLeader: this node is not the raft leader (or has not finished taking
// office: its barrier and clock are not ready yet). The caller may retry
// elsewhere or later; nothing was applied.
var ErrNotLeader = errors.New("node: not the leader")

// ErrClosed: the node is shut down.
var ErrClosed = errors.New("node: closed")

// ErrDirLocked: another process holds the data directory (its LOCK file).
var ErrDirLocked = errors.New("node: data dir locked by another process")
