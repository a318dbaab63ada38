package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// servedWithSnapshots runs a single node in a new dir until its log is
// compacted behind at least two snapshots, closes it and returns the dir
// and the last token it granted.
func servedWithSnapshots(t *testing.T) (string, uint64) {
	t.Helper()
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 8, TrailingLogs: 2})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "l", Owner: "o", TTL: time.Minute})
		mustApply(t, n, state.Command{Op: state.OpRelease, Name: "l", Token: n.LastToken()})
		snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
		first, _ := n.store.Log.FirstIndex()
		if len(snaps) >= 2 && first > 1 && i >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two snapshots and a compacted log within 30s (%d snapshots, first index %d)", len(snaps), first)
		}
	}
	last := uint64(n.LastToken())
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, last
}

// newestSnapshotID is the id (directory name) of dir's newest snapshot, as
// raft's snapshot store lists them. (The names, term-index-time without
// padding, do not sort by index: "2-105-…" comes before "2-98-…".)
func newestSnapshotID(t *testing.T, dir string) string {
	t.Helper()
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, raftstore.NewHCLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List() // newest first
	if err != nil || len(metas) < 2 {
		t.Fatalf("want two snapshots, have %d (%v)", len(metas), err)
	}
	return metas[0].ID
}

// A single node whose raft log is lost — wal/ whole, or only its segment
// files — while its snapshots remain is refused at Open: started from the
// last snapshot it granted again tokens it had granted after it (second
// outside attack: 1,494 tokens issued twice). So is one that lost only its
// newest snapshot, with its log compacted behind it (raft panicked).
func TestLostWALWithSnapshotsRefused(t *testing.T) {
	for name, lose := range map[string]func(dir string) error{
		"wal/": func(dir string) error { return os.RemoveAll(filepath.Join(dir, "wal")) },
		"the wal segments": func(dir string) error {
			segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
			if err != nil || len(segs) == 0 {
				t.Fatalf("no wal segments (%v)", err)
			}
			for _, s := range segs {
				if err := os.Remove(s); err != nil {
					return err
				}
			}
			return nil
		},
		"the newest snapshot": func(dir string) error {
			return os.RemoveAll(filepath.Join(dir, "snapshots", newestSnapshotID(t, dir)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, last := servedWithSnapshots(t)
			if err := lose(dir); err != nil {
				t.Fatal(err)
			}
			n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
			if err == nil {
				got := n.LastToken()
				n.Close()
				t.Fatalf("Open after losing %s succeeded (last token %d, granted up to %d)", name, got, last)
			}
			if !strings.Contains(err.Error(), "fence restore") {
				t.Fatalf("Open after losing %s: %v, want a refusal saying how to recover", name, err)
			}
		})
	}
}
