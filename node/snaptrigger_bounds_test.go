package node

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
)

// The snapshot trigger fires exactly at its bounds: SnapshotBytes of
// command data since the last snapshot, SnapshotReplay commands, or
// SnapshotThreshold commands and 1/snapshotLogShare of the last snapshot's
// bytes of command data — and counts from the marks of the last snapshot
// written, not from zero.
func TestSnapTriggerExactBounds(t *testing.T) {
	newTrigger := func(threshold, bytes uint64, replay ...uint64) (*snapTrigger, func(entries, size int)) {
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
		cfg := Config{SnapshotThreshold: threshold, SnapshotBytes: bytes}
		if len(replay) > 0 {
			cfg.SnapshotReplay = replay[0]
		}
		return newSnapTrigger(cfg, log), store
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

	// A large last snapshot: the threshold's commands are not enough
	// until the log since holds a quarter of its bytes.
	tr, store = newTrigger(10, 1<<40)
	tr.done(tr.mark(), 400*snapshotLogShare)
	store(10, 39)
	store(1, 9)
	if tr.due() {
		t.Fatal("due with 399 bytes of log after a snapshot worth 400")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due with 400 bytes of log after a snapshot worth 400")
	}
	// ... and its bytes are not enough without the threshold's commands.
	tr, store = newTrigger(10, 1<<40)
	tr.done(tr.mark(), 10*snapshotLogShare)
	store(1, 1000)
	if tr.due() {
		t.Fatal("due after 1 command of a threshold of 10")
	}

	// By replay length: a last snapshot so large that the share rule
	// waits, yet due at SnapshotReplay commands since it, not one before
	// (a group entry counts its commands, as a restart applies them).
	tr, store = newTrigger(10, 1<<40, 50)
	tr.done(tr.mark(), 1<<30)
	store(49, 1)
	if tr.due() {
		t.Fatal("due after 49 commands of a replay bound of 50")
	}
	store(1, 1)
	if !tr.due() {
		t.Fatal("not due after 50 commands of a replay bound of 50, with a 1 GiB last snapshot")
	}
	tr.done(tr.mark(), 1<<30)
	store(49, 1)
	if tr.due() {
		t.Fatal("due 49 commands after a snapshot, replay bound 50")
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

// raft never snapshots on its own: its timed check counts raft entries
// and rewrote a large state every 30 s whatever the size rule said (an
// outside soak: a 151 MB state every 35-60 s). The node's trigger decides.
func TestRaftTakesNoSnapshotOfItsOwn(t *testing.T) {
	rc := (Config{Logger: quietLogger()}).withDefaults().raftConfig()
	if rc.SnapshotThreshold < 1<<62 {
		t.Fatalf("raft's SnapshotThreshold %d: raft would snapshot every %s after that many entries", rc.SnapshotThreshold, rc.SnapshotInterval)
	}
}
