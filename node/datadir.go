package node

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// DataDirBytes is what the data dir takes on disk (raft log, stable store,
// snapshots, NODE_ID): the sum over its files of the space the file system
// allocated to them (a preallocated WAL segment counts whole), or of their
// sizes where the file system does not say. Files that vanish during the
// walk (a snapshot being replaced) are skipped. It reads the directory:
// meant for status and metrics scrapes.
func (n *Node) DataDirBytes() (uint64, error) {
	return diskUsage(n.cfg.DataDir)
}

func diskUsage(dir string) (uint64, error) {
	var total uint64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		total += allocated(fi)
		return nil
	})
	return total, err
}
