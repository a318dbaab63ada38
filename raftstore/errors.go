package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft-wal/metadb"
)

// ErrDirLocked: another process holds the data directory (its LOCK file).
var ErrDirLocked = errors.New("raftstore: data dir locked by another process")

// LostWALMetaError: the data dir's wal/ holds raft-wal segment files but
// not wal-meta.db, raft-wal's index of them, which also holds raft's
// stable store (the current term and the vote cast in it). raft-wal would
// start a new index and fail creating its first segment over the old one
// ("file exists"); the log cannot be read without the index, and the
// node's term and votes are gone with it. Open refuses it with this error.
type LostWALMetaError struct {
	Dir      string // the wal/ directory
	Segments int    // segment files found
}

func (e *LostWALMetaError) Error() string {
	return fmt.Sprintf("raftstore: %s holds %d raft-wal segment file(s) but not %s, raft-wal's index of them, which also holds raft's term and votes: "+
		"the log cannot be opened, and the votes this node cast are lost. Restore the data dir from a backup (fence restore), "+
		"or, in a cluster, remove this member (fence members remove ID) and add it again with an empty data dir",
		e.Dir, e.Segments, filepath.Join(e.Dir, metadb.FileName))
}
