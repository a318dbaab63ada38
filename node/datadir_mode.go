package node

import (
	"fmt"
	"log/slog"
	"os"
)

// DataDirMode is the mode a node creates its data dir with: the WAL,
// snapshots and metadata in it hold the cluster's signing key seeds (a
// holder of one can mint tokens every guard accepts) and its auth state,
// so only the node's own user may read or even list it. Files in it are
// created 0600 (and `fence serve` runs with umask 077, for the files
// libraries create).
const DataDirMode os.FileMode = 0o700

// DataFileMode is the mode of the files a node writes in its data dir.
const DataFileMode os.FileMode = 0o600

// makeDataDir creates dir (and its missing parents) with DataDirMode; an
// existing dir's mode is left as it is, but one that its group or others
// may read, write or enter is named in a warning saying what to chmod.
// It does not refuse to start: a dir shared on purpose (a backup agent in
// the group) is the operator's call, told once at start.
func makeDataDir(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, DataDirMode); err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	warnDataDirMode(dir, logger)
	return nil
}

// warnDataDirMode logs a warning when dir's group or others have any
// access to it.
func warnDataDirMode(dir string, logger *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || logger == nil {
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		logger.Warn(fmt.Sprintf("data dir is accessible to its group or others (mode %#o): it holds the cluster's signing key seeds and auth state; run: chmod 700 %s", perm, dir),
			"data_dir", dir, "mode", fmt.Sprintf("%#o", perm))
	}
}
