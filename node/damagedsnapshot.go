package node

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// DamagedSnapshotError: the newest raft snapshot in the data dir cannot be
// read whole (its state.bin cut short, or its checksum differs). raft
// would quietly start from an older snapshot instead: with the entries
// after that one compacted out of the log it panicked ("log not found"),
// and with them it would start below what the newest snapshot held. Open
// refuses it first, naming the file.
type DamagedSnapshotError struct {
	Dir   string
	Path  string // the snapshot's state.bin
	Index uint64 // the last entry the snapshot holds
	Err   error  // why it cannot be read
}

func (e *DamagedSnapshotError) Error() string {
	return fmt.Sprintf("node: data dir %s: its newest snapshot %s (entries up to %d) cannot be read: %v. "+
		"Restore it from a backup (fence restore), or, in a cluster, remove this member and add it again with an empty data dir. "+
		"(Removing the damaged snapshot's directory, %s, lets it start from its older snapshot if its log still holds every entry after that one; Open checks.)",
		e.Dir, e.Path, e.Index, e.Err, filepath.Dir(e.Path))
}

func (e *DamagedSnapshotError) Unwrap() error { return e.Err }

// checkNewestSnapshot opens the newest snapshot, which reads it whole and
// checks its size and checksum against its meta.json (raft's file
// snapshot store), and refuses the dir if that fails. It costs one more
// read of the snapshot at start (raft reads it again to restore it).
func checkNewestSnapshot(dir string, snaps raft.SnapshotStore) error {
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("node: list snapshots: %w", err)
	}
	if len(metas) == 0 {
		return nil
	}
	m := metas[0] // newest first
	_, rc, err := snaps.Open(m.ID)
	if err == nil {
		return rc.Close()
	}
	return &DamagedSnapshotError{Dir: dir, Path: filepath.Join(dir, "snapshots", m.ID, "state.bin"), Index: m.Index, Err: err}
}
