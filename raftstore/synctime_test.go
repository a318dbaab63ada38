package raftstore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Every counted WAL fsync is also timed: the OnSync hook sees as many
// durations as Syncs counts (the metrics' fsync histogram and the sync
// counter agree), none after the hook is removed.
func TestStoreOnSyncTimesEveryFsync(t *testing.T) {
	s, err := openKind(t.TempDir(), LogStoreWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var seen atomic.Uint64
	s.OnSync(func(d time.Duration) {
		if d < 0 {
			t.Errorf("negative fsync duration %v", d)
		}
		seen.Add(1)
	})
	before := s.Syncs()
	for i := uint64(1); i <= 5; i++ {
		if err := s.Log.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	synced := s.Syncs() - before
	if synced < 5 {
		t.Fatalf("5 appends counted %d fsyncs; want at least 5", synced)
	}
	if got := seen.Load(); got != synced {
		t.Fatalf("OnSync saw %d fsyncs, Syncs counted %d", got, synced)
	}
	s.OnSync(nil)
	if err := s.Log.StoreLog(&raft.Log{Index: 6, Term: 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got := seen.Load(); got != synced {
		t.Fatalf("OnSync(nil) left the hook in place: %d calls, want %d", got, synced)
	}
}
