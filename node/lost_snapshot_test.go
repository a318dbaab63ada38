package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// A dir whose log was compacted behind a snapshot and whose snapshots are
// then lost is refused at Open with an error naming the dir and the way
// out, not started (raft panicked: "log not found"; outside attack).
func TestLostSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 8, TrailingLogs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "l", Owner: "o", TTL: time.Minute, RequestID: "r" + string(rune('0'+i%10)) + string(rune('a'+i/10))})
		mustApply(t, n, state.Command{Op: state.OpRelease, Name: "l", Token: n.LastToken()})
	}
	deadline := time.Now().Add(30 * time.Second)
	for first, _ := n.store.Log.FirstIndex(); first <= 1; first, _ = n.store.Log.FirstIndex() {
		if time.Now().After(deadline) {
			t.Fatal("the log was not compacted behind a snapshot within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{DataDir: dir, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "holds no snapshot") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open of a compacted dir without its snapshot: %v, want a refusal naming the lost snapshot", err)
	}
}
