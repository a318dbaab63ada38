package node

import (
	"errors"

	"github.com/fenceworks/fence/raftstore"
)

// ErrNotLeader: this node is not the raft leader (or has not finished taking
// office: its barrier and clock are not ready yet). The caller may retry
// elsewhere or later; nothing was applied.
var ErrNotLeader = errors.New("node: not the leader")

// ErrClosed: the node is shut down.
var ErrClosed = errors.New("node: closed")

// ErrDirLocked: another process holds the data directory (its LOCK file).
// It is raftstore.ErrDirLocked, so errors.Is matches either name.
var ErrDirLocked = raftstore.ErrDirLocked

// ErrUnknownOutcome: the command was handed to raft but its fate is not
// known: it may be committed and applied (now, or when the log is replayed
// after a restart) or lost. Returned when leadership is lost after the
// entry was appended, when the node shuts down or fails (a fatal storage
// error, see Config.OnFatal) with the entry in flight. The caller must not
// report a refusal: a client retries with the same op_id or request_id,
// which the machine answers with the first outcome if there was one.
var ErrUnknownOutcome = errors.New("node: outcome unknown (the command may or may not have been applied; retry with the same op_id or request_id)")
