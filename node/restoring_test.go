package node

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
