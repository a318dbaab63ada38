package raftstore

import (
	"testing"

	"github.com/hashicorp/raft"
)

// A snapshot is counted once though raft closes its sink twice (the node's
// Persist closes it, and raft closes it again after Persist): Done ran
// twice, and the node counted every snapshot, and its bytes, twice.
func TestSnapshotDoneOnceForASinkClosedTwice(t *testing.T) {
	calls := 0
	g := &GuardedSnapshots{SnapshotStore: raft.NewInmemSnapshotStore(), Fail: NewFailStop(func(error) {}),
		Mark: func() any { return nil }, Done: func(any, uint64) { calls++ }}
	sink, err := g.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("Done called %d times for one snapshot, want 1", calls)
	}
}
