package node

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
)

// The snapshot trigger fires exactly at its bounds: SnapshotBytes of
// command data since the last snapshot, or SnapshotThreshold commands —
// raised to one per snapshotBytesPerEntry bytes of the last snapshot — and
// counts from the marks of the last snapshot written, not from zero.
func TestSnapTriggerExactBounds(t *testing.T) {
	newTrigger := func(threshold, bytes uint64) (*snapTrigger, func(entries, size int)) {
		log := &raftstore.GuardedLog{LogStore: raft.NewInmemStore(), Fail: raftstore.NewFailStop(func(error) {})}
		next := uint64(1)
		store := func(entries, size int) {
			for range entries {
				if err := log.StoreLogs([]*raft.Log{{Index: next, Data: make([]byte, size)}}); err != nil {
					t.Fatal(err)
				}
				next++
			}
		}
		return newSnapTrigger(Config{SnapshotThreshold: threshold, SnapshotBytes: bytes}, log), store
	}

	// By commands: due at the threshold, not one before.
	tr, store := newTrigger(10, 1<<40)
	store(9, 1)
	if tr.due() {
		t.Fatal("due after 9 commands of a threshold of 10")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due after 10 commands of a threshold of 10")
	}
	// A snapshot written: counting starts again from its mark.
	tr.done(tr.mark(), 0)
	store(9, 1)
	if tr.due() {
		t.Fatal("due 9 commands after a snapshot")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due 10 commands after a snapshot")
	}

	// A large last snapshot raises the threshold to one command per
	// snapshotBytesPerEntry bytes of it.
	tr, store = newTrigger(10, 1<<40)
	tr.done(tr.mark(), 20*snapshotBytesPerEntry)
	store(19, 1)
	if tr.due() {
		t.Fatal("due after 19 commands with a snapshot worth 20")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due after 20 commands with a snapshot worth 20")
	}

	// By bytes: due at SnapshotBytes of data, not one byte before.
	tr, store = newTrigger(1<<40, 100)
	store(1, 99)
	if tr.due() {
		t.Fatal("due after 99 bytes of a 100-byte bound")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due after 100 bytes of a 100-byte bound")
	}
	tr.done(tr.mark(), 0)
	store(1, 99)
	if tr.due() {
		t.Fatal("due 99 bytes after a snapshot")
	}

	// Snapshots finishing out of order: an older one's marks do not move
	// the count back.
	tr, store = newTrigger(10, 1<<40)
	older := tr.mark()
	store(10, 1)
	tr.done(tr.mark(), 0)
	tr.done(older, 0)
	store(9, 1)
	if tr.due() {
		t.Fatal("due 9 commands after the newer snapshot: the older one's marks moved the count back")
	}
}
