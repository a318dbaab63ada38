package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// A data dir whose wal/ lost wal-meta.db (raft-wal's index of its segment
// files, and raft's term and votes) while its segments remain is refused
// at Open with a *raftstore.LostWALMetaError naming the file and what to
// do, not raft-wal's raw "file exists" (the third outside attack).
func TestLostWALMetaRefused(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "l", Owner: "o", TTL: time.Minute})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(dir, "wal", "wal-meta.db")
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err = Open(Config{DataDir: dir, Logger: quietLogger()})
		var lost *raftstore.LostWALMetaError
		if !errors.As(err, &lost) || !strings.Contains(err.Error(), meta) || !strings.Contains(err.Error(), "fence restore") {
			t.Fatalf("Open of a dir that lost %s: %v, want a *raftstore.LostWALMetaError naming it and fence restore", meta, err)
		}
	}
}
