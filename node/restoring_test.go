package node

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data dir beside which (DIR.restoring) or in which (DIR/.restoring) a
// restore's staging directory is was left by a restore that did not finish:
// Open refuses it (ErrRestoreIncomplete, naming the staging directory) and
// creates nothing — not a fresh store at token 0. Planted: Open without
// CheckRestoreLeftover (it bootstrapped a new store in both cases): red.
func TestOpenRefusesAnUnfinishedRestore(t *testing.T) {
	for _, c := range []struct {
		name    string
		staging func(dir string) string
	}{
		{"sibling", func(dir string) string { return dir + RestoringSuffix }},
		{"inside", func(dir string) string { return filepath.Join(dir, RestoringSubdir) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			staging := c.staging(dir)
			if err := os.MkdirAll(filepath.Join(staging, "wal"), 0o755); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadDir(dir)
			n, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil {
				n.Close()
				t.Fatalf("Open started a store beside an unfinished restore's %s", staging)
			}
			var ri *RestoreIncompleteError
			if !errors.Is(err, ErrRestoreIncomplete) || !errors.As(err, &ri) || ri.Staging != staging || ri.DataDir != dir {
				t.Fatalf("Open: %v (%#v); want a *RestoreIncompleteError naming %s", err, ri, staging)
			}
			after, _ := os.ReadDir(dir)
			if len(after) != len(before) {
				t.Fatalf("Open wrote into the data dir: %v, before %v", after, before)
			}
		})
	}
}

// A data dir that holds the RESTORED marker (a restore's, not started yet)
// but no complete raft snapshot is not one a restore finished: every
// restore writes the snapshot before the marker. Open refuses it (what a
// restore into an existing dir, killed while moving its entries, leaves
// once someone removed its staging directory by hand) — with no snapshot,
// and with only raft's unfinished snapshot (".tmp") — instead of starting a
// fresh store at token 0. With the snapshot it starts from it. Planted:
// CheckRestoreLeftover without the snapshot check — Open waited out its
// ready timeout ("still replaying the log or electing itself", as the
// tester's fence serve did on a dir with only snapshots/*.tmp): red.
func TestOpenRefusesARestoredDirWithoutSnapshot(t *testing.T) {
	for _, c := range []string{"none", "tmp", "whole"} {
		t.Run(c, func(t *testing.T) {
			m, _, _ := restoredMachine(t)
			dir := filepath.Join(t.TempDir(), "data")
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			if err := InitDataDir(Config{DataDir: dir, Logger: logger}, m, 57, 4); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, RestoredFile), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
			if err != nil || len(snaps) != 1 {
				t.Fatalf("snapshots: %v %v", snaps, err)
			}
			snap := filepath.Join(dir, "snapshots", snaps[0].Name())
			switch c {
			case "none":
				err = os.RemoveAll(snap)
			case "tmp":
				err = os.Rename(snap, snap+".tmp")
			}
			if err != nil {
				t.Fatal(err)
			}
			n, err := Open(Config{DataDir: dir, Logger: logger})
			if c == "whole" {
				if err != nil {
					t.Fatalf("Open of a whole restored dir: %v", err)
				}
				defer n.Close()
				if got := n.LastToken(); got != 999 { // OpBumpToken 1000: the next grant is 1000
					t.Fatalf("last token %d, want the restored 999", got)
				}
				return
			}
			if err == nil {
				defer n.Close()
				t.Fatalf("Open started a restored dir without its snapshot (last token %d)", n.LastToken())
			}
			var ri *RestoreIncompleteError
			if !errors.As(err, &ri) || ri.Missing == "" || !strings.Contains(err.Error(), "no complete raft snapshot") {
				t.Fatalf("Open: %v; want a *RestoreIncompleteError saying the snapshot is missing", err)
			}
		})
	}
}
