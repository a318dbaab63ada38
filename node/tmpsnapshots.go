package node

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// removeTmpSnapshots removes every "*.tmp" entry in the data dir's
// snapshots/ directory. raft's file snapshot store writes a snapshot into
// NAME.tmp and renames it to NAME once it is whole, so a .tmp entry is a
// snapshot a killed process did not finish; raft only warns about it and
// keeps it, so repeated crashes during snapshots grew the disk without
// bound (outside attack). Open calls it once, holding the data dir's lock
// and before the snapshot store is made: no snapshot of this process (nor
// of another, the lock) can be in progress then.
func removeTmpSnapshots(dataDir string, logger *slog.Logger) error {
	dir := filepath.Join(dataDir, "snapshots")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("node: read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		size := treeSize(path)
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("node: remove the unfinished snapshot %s: %w", path, err)
		}
		logger.Info("removed an unfinished snapshot (a process stopped while writing it)", "name", e.Name(), "bytes", size)
	}
	return nil
}

// treeSize is the bytes of the regular files under path (best effort: what
// it cannot read it leaves out; it is only logged).
func treeSize(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
