package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A restore (backup.Restore) is all-or-nothing: it builds the data dir in a
// staging directory and makes it the data dir in one step, so that a crash
// part-way leaves no store fence serve would start from.
//
//   - DIR absent: it builds DIR + RestoringSuffix (a sibling, same parent,
//     so the same file system), fsyncs it, renames it to DIR and fsyncs the
//     parent. Before the rename DIR does not exist; after it DIR is whole.
//   - DIR an existing empty directory (a mount point, an ext4 volume's root
//     with its lost+found: it cannot be renamed onto): it builds
//     DIR/RestoringSubdir (inside DIR, the same file system), fsyncs it,
//     moves its entries into DIR, fsyncs DIR, and removes the then empty
//     RestoringSubdir last. Until that removal DIR holds it.
//
// Either staging directory present means a restore into DIR has not
// finished (it was killed, or runs now): CheckRestoreLeftover refuses such
// a DIR (Open, fence serve, fence restore).
const (
	RestoringSuffix = ".restoring"
	RestoringSubdir = ".restoring"
)

// ErrRestoreIncomplete: a restore into the data dir did not finish (or is
// running): its staging directory is there.
var ErrRestoreIncomplete = errors.New("a restore into the data dir did not finish")

// RestoreIncompleteError names the data dir and the staging directory a
// restore left; it wraps ErrRestoreIncomplete.
type RestoreIncompleteError struct {
	DataDir string // the data dir
	Staging string // the staging directory found (DataDir+RestoringSuffix, or DataDir/RestoringSubdir); "" when Missing says what is wrong
	// Missing: the data dir holds the RESTORED marker (a restore's, not
	// started yet) but not what every restore writes before it: a
	// complete raft snapshot.
	Missing string
}

func (e *RestoreIncompleteError) Error() string {
	if e.Staging == "" {
		return fmt.Sprintf("%v: %s holds %s, the marker of a data dir fence restore made, but %s — a restore always writes that first. "+
			"Nothing was started from it. Run fence restore again into a new or emptied data dir", ErrRestoreIncomplete, e.DataDir, RestoredFile, e.Missing)
	}
	return fmt.Sprintf("%v: %s is there — fence restore builds %s in it and had not finished "+
		"(it was killed, or runs now). Nothing was started from it. Once no fence restore runs, "+
		"remove %s (and %s, if it holds anything) and run fence restore again",
		ErrRestoreIncomplete, e.Staging, e.DataDir, e.Staging, e.DataDir)
}

func (e *RestoreIncompleteError) Unwrap() error { return ErrRestoreIncomplete }

// RestoringPath is the sibling staging directory of a restore into dir.
func RestoringPath(dir string) string { return filepath.Clean(dir) + RestoringSuffix }

// CheckRestoreLeftover refuses (*RestoreIncompleteError) a data dir beside
// which, or in which, a restore's staging directory is.
func CheckRestoreLeftover(dir string) error {
	for _, p := range []string{RestoringPath(dir), filepath.Join(dir, RestoringSubdir)} {
		if _, err := os.Lstat(p); err == nil {
			return &RestoreIncompleteError{DataDir: dir, Staging: p}
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("node: data dir: %w", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, RestoredFile)); err != nil {
		return nil // not a restored dir (or one that started: the marker is removed then)
	}
	if !hasSnapshot(filepath.Join(dir, "snapshots")) {
		return &RestoreIncompleteError{DataDir: dir, Missing: "no complete raft snapshot in snapshots/"}
	}
	return nil
}

// hasSnapshot reports whether dir holds a complete raft snapshot: a
// directory, not one raft is still writing (".tmp"), with its meta.json
// and state.bin.
func hasSnapshot(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() || filepath.Ext(e.Name()) == ".tmp" {
			continue
		}
		ok := true
		for _, f := range []string{"meta.json", "state.bin"} {
			if fi, err := os.Stat(filepath.Join(dir, e.Name(), f)); err != nil || !fi.Mode().IsRegular() {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// SyncTree fsyncs every file and directory under dir, dir included.
func SyncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// SyncDir fsyncs a directory (its entries: a rename, a creation).
func SyncDir(dir string) error { return syncDir(dir) }
