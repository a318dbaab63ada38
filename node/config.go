package node

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
)

// Config configures a node. The zero value (with DataDir set) is a single
// voter that bootstraps itself on first start.
type Config struct {
	// DataDir holds the raft log and stable store (wal/ or raft.db, see
	// LogStore), snapshots/, and the LOCK file a running node holds.
	DataDir string
	// LogStore is LogStoreWAL or LogStoreBolt. Empty means: the kind the
	// data dir already holds, and LogStoreWAL for a new dir. A dir holding
	// the other kind is refused (logs are not migrated).
	LogStore string
	// NodeID is the raft server ID, default "fence-1".
	NodeID string
	// MaxTTL is the largest lease TTL the machine accepts, default
	// fence.DefaultMaxTTL. Every replica must use the same value.
	MaxTTL time.Duration
	// Logger receives node and raft logs; default slog.Default().
	Logger *slog.Logger
	// Transport carries raft RPCs. Nil means an in-memory transport, which
	// is enough for a single voter. (Clusters will pass a TCP transport.)
	Transport raft.Transport
	// LockTimeout bounds the wait for the data directory's file lock: a
	// second process on the same DataDir fails after it. Default 1s.
	LockTimeout time.Duration
	// ReadyTimeout bounds how long Open waits for the single voter to elect
	// itself and take office. Default 10s.
	ReadyTimeout time.Duration
	// SnapshotThreshold is the number of log entries after which raft takes
	// a snapshot. Default 8192.
	SnapshotThreshold uint64
}

func (c Config) withDefaults() Config {
	if c.NodeID == "" {
		c.NodeID = "fence-1"
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = fence.DefaultMaxTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = time.Second
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	return c
}

// raftConfig tunes raft for a single voter: it elects itself quickly, and
// concurrent Apply calls are group-committed (up to MaxAppendEntries per
// StoreLogs, one fsync) and applied by the BatchingFSM under one lock.
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 100 * time.Millisecond
	rc.CommitTimeout = 5 * time.Millisecond
	// 128 entries per StoreLogs is more than the proposals that queue
	// during one fsync at 64 concurrent clients (10-20), and raft allocates
	// a MaxAppendEntries-long slice for every committed batch: 1024 cost 8%
	// more bytes allocated per acquire+release through the API, for
	// nothing (docs/benchmarks.md).
	rc.MaxAppendEntries = 128
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.Logger = newHCLogger(c.Logger)
	return rc
}
