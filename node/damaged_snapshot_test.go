package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A node whose newest snapshot's state.bin was cut short (a disk that lost
// the end of the file) is refused at Open with a *DamagedSnapshotError
// naming the file: raft would fall back to the older snapshot, whose
// entries after it the log no longer holds (compacted), and panic "log not
// found" (the third outside attack) — or, with a log that did hold them,
// start below what the newest snapshot held.
func TestTruncatedNewestSnapshotRefused(t *testing.T) {
	dir, _ := servedWithSnapshots(t)
	newest := filepath.Join(dir, "snapshots", newestSnapshotID(t, dir), "state.bin")
	fi, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newest, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
		if err == nil {
			n.Close()
			t.Fatal("Open with a truncated newest snapshot succeeded")
		}
		var dmg *DamagedSnapshotError
		if !errors.As(err, &dmg) || dmg.Path != newest || !strings.Contains(err.Error(), newest) {
			t.Fatalf("Open with a truncated newest snapshot: %v, want a *DamagedSnapshotError naming %s", err, newest)
		}
	}
}
