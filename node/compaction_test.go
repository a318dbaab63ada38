package node

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// dirBytes is the total size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// The log is compacted on disk, not only in raft's index: after many
// 1 MiB writes filling many WAL segments, raft-wal has deleted the old
// segments and the wal dir stays within the documented bound
// (docs/operations.md): SnapshotBytes of log since the last snapshot,
// TrailingLogs entries behind it, and two segments (the head one holding
// entries already compacted, and the preallocated tail).
func TestWALSegmentsDeletedAfterSnapshots(t *testing.T) {
	t.Parallel() // a data dir of its own, mostly writing 40 MiB
	dir := t.TempDir()
	const (
		segment   = 2 << 20
		snapBytes = 4 << 20
		trailing  = 4
		entry     = state.MaxCommandBytes // the largest entry a 1 MiB write can be
		writes    = 40                    // 40 MiB: 20 segments
	)
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 1 << 40, SnapshotBytes: snapBytes,
		TrailingLogs: trailing, WALSegmentSize: segment})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	for i := range writes {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 1<<20)
		mustApply(t, n, state.Command{Op: state.OpWrite, Name: fmt.Sprint("big-", i%2), Token: tok, Value: v})
	}
	walDir := filepath.Join(dir, "wal") // raftstore's WAL dir
	// The meta file is small; one entry more than SnapshotBytes may be
	// written before the trigger sees it.
	bound := int64(snapBytes + entry + trailing*entry + 2*segment + 1<<20)
	deadline := time.Now().Add(30 * time.Second) // hang guard: snapshots and segment deletion are asynchronous
	for {
		size := dirBytes(t, walDir)
		if size <= bound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wal dir holds %d bytes after %d writes of 1 MiB (%d snapshots), want at most %d", size, writes, n.snap.taken.Load(), bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if k := n.snap.taken.Load(); k < writes/5 {
		t.Fatalf("%d snapshots after %d MiB of writes with SnapshotBytes %d", k, writes, snapBytes)
	}
}

// The default keeps few entries behind a snapshot: entries may be 1 MiB.
func TestDefaultTrailingLogs(t *testing.T) {
	if got := (Config{Logger: quietLogger()}).withDefaults().raftConfig().TrailingLogs; got != DefaultTrailingLogs || DefaultTrailingLogs > 64 {
		t.Fatalf("TrailingLogs %d (default %d), want at most 64", got, DefaultTrailingLogs)
	}
}
