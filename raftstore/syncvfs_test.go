package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/testutil"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// fullDiskVFS is a full disk under raft-wal: segment files are
// preallocated to their size, and a write past it needs space the disk
// does not have, so the bytes inside the file land and the rest fails
// with ENOSPC (a short write, like pwrite(2) on a full disk). With zero
// its files are countingFiles over that (Fence's VFS); without, raw (the
// behaviour before the fix, or a crash before the zeroing).
type fullDiskVFS struct {
	*walfs.FS
	limit int64
	zero  bool
	syncs *atomic.Uint64
}

func (v fullDiskVFS) wrap(f types.WritableFile, err error) (types.WritableFile, error) {
	if err != nil {
		return nil, err
	}
	var w types.WritableFile = fullDiskFile{f, v.limit}
	if v.zero {
		w = countingFile{w, v.syncs}
	}
	return w, nil
}

func (v fullDiskVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	return v.wrap(v.FS.Create(dir, name, size))
}

func (v fullDiskVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	return v.wrap(v.FS.OpenWriter(dir, name))
}

type fullDiskFile struct {
	types.WritableFile
	limit int64
}

func (f fullDiskFile) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= f.limit {
		return f.WritableFile.WriteAt(p, off)
	}
	n := 0
	if off < f.limit {
		n, _ = f.WritableFile.WriteAt(p[:f.limit-off], off)
	}
	return n, syscall.ENOSPC
}

const testSegment = 64 << 10

func openTestWAL(t *testing.T, dir string, vfs types.VFS) (*wal.WAL, func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta), wal.WithSegmentSize(testSegment),
		wal.WithSegmentFiler(segment.NewFiler(dir, vfs)))
	if err != nil {
		meta.Close()
		t.Fatal(err)
	}
	return w, func() { w.Close(); meta.Close() }
}

// fillUntilFull appends entries of the given size until the disk is full
// (ENOSPC), closes the WAL and returns the last index acknowledged.
func fillUntilFull(t *testing.T, dir string, zero bool, entry int) uint64 {
	t.Helper()
	w, closeWAL := openTestWAL(t, dir, fullDiskVFS{walfs.New(), testSegment, zero, new(atomic.Uint64)})
	defer closeWAL()
	for idx := uint64(1); idx < 1e6; idx++ {
		err := w.StoreLog(&raft.Log{Index: idx, Term: 1, Data: bytes.Repeat([]byte{'v'}, entry)})
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append %d: %v, want ENOSPC", idx, err)
		}
		return idx - 1
	}
	t.Fatal("the disk never filled")
	return 0
}

// checkReopen reopens dir with Fence's VFS and checks that it holds
// exactly the entries 1..last, takes 1000 more (on into new segments) and
// reads them all back.
func checkReopen(t *testing.T, dir string, last uint64) {
	t.Helper()
	w, closeWAL := openTestWAL(t, dir, countingVFS{walfs.New(), new(atomic.Uint64)})
	defer closeWAL()
	if got, _ := w.LastIndex(); got != last {
		t.Fatalf("after reopen: last index %d, want %d (every acknowledged entry, nothing more)", got, last)
	}
	for i := last + 1; i <= last+1000; i++ {
		if err := w.StoreLog(&raft.Log{Index: i, Term: 2, Data: []byte("after")}); err != nil {
			t.Fatalf("append %d after reopen: %v", i, err)
		}
	}
	for i := uint64(1); i <= last+1000; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		want := uint64(1)
		if i > last {
			want = 2
		}
		if l.Index != i || l.Term != want {
			t.Fatalf("read %d: got index %d term %d, want term %d", i, l.Index, l.Term, want)
		}
	}
}

// tailScan scans the tail segment of the WAL in dir.
func tailScan(t *testing.T, dir string) walTailScan {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, tailSegmentName(t, dir)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := scanWALTail(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tailSegmentName(t *testing.T, dir string) string {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	meta.Close()
	if err != nil {
		t.Fatal(err)
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		t.Fatalf("tail segment %d is sealed in the meta data", tail.ID)
	}
	return segment.FileName(tail)
}

// appendFails checks (on a copy of dir) that raft-wal itself refuses
// appends to dir: "segment is sealed".
func appendFails(t *testing.T, dir string) {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(cp, "LOCK"))
	w, closeWAL := openTestWAL(t, cp, walfs.New())
	defer closeWAL()
	last, _ := w.LastIndex()
	err := w.StoreLog(&raft.Log{Index: last + 1, Term: 9, Data: []byte("x")})
	if !errors.Is(err, types.ErrSealed) {
		t.Fatalf("raft-wal append to the partially sealed tail: %v, want %v (the scenario is not reproduced)", err, types.ErrSealed)
	}
}

// A disk-full during the write that seals a segment (its index frame goes
// past the preallocated size) must not wedge the WAL: with countingFile
// zeroing what a failed write left, a reopen keeps every acknowledged
// entry and takes appends. Without it raft-wal takes the partial index
// frame for a seal and refuses every append ("segment is sealed") forever.
// Several entry sizes, so the cut falls at several places in the index
// frame (TestWALTailRepair checks, with the same sizes, that without the
// zeroing it does fall in the index frame).
func TestWALDiskFullDuringSealRecovers(t *testing.T) {
	for _, entry := range []int{8, 37, 100, 500} {
		dir := t.TempDir()
		last := fillUntilFull(t, dir, true, entry)
		s := tailScan(t, dir)
		checkReopen(t, dir, last)
		if len(s.indexes) != 0 {
			t.Fatalf("entry %d: index frames at %v in the tail after the failed seal (committed end %d); want none", entry, s.indexes, s.keep)
		}
	}
}

// An old data dir whose tail a partial seal left refusing appends (written
// before the fix, or a crash between the failed write and its zeroing) is
// repaired at open: the same entries are kept, and appends work.
func TestWALTailRepair(t *testing.T) {
	// Each entry size fills a disk of its own: they run side by side.
	for _, entry := range []int{8, 37, 100, 500} {
		t.Run(fmt.Sprintf("entry%d", entry), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			last := fillUntilFull(t, dir, false, entry)
			before := tailScan(t, dir)
			if len(before.indexes) == 0 || before.indexes[0] < before.keep {
				t.Fatalf("entry %d: want a partial index frame after the last commit (ending %d), got index frames at %v", entry, before.keep, before.indexes)
			}
			appendFails(t, dir)

			var logs bytes.Buffer
			if err := repairWALTail(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "repaired the tail segment") || !strings.Contains(logs.String(), tailSegmentName(t, dir)) {
				t.Fatalf("repair logged %q", logs.String())
			}
			after := tailScan(t, dir)
			if after.keep != before.keep || len(after.indexes) != 0 {
				t.Fatalf("after repair: committed end %d (was %d), index frames %v", after.keep, before.keep, after.indexes)
			}
			// A second open finds nothing to repair.
			logs.Reset()
			if err := repairWALTail(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil || logs.Len() != 0 {
				t.Fatalf("second repair: %v, logged %q", err, logs.String())
			}
			checkReopen(t, dir, last)
		})
	}
}

// The repair leaves a healthy WAL alone, byte for byte: a tail with
// uncommitted entries after its last commit but no index frame (a crash
// mid-batch, which raft-wal recovers from by itself), and a new WAL.
func TestWALTailRepairLeavesHealthyTail(t *testing.T) {
	dir := t.TempDir()
	w, closeWAL := openTestWAL(t, dir, walfs.New())
	for i := uint64(1); i <= 100; i++ {
		if err := w.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte("entry")}); err != nil {
			t.Fatal(err)
		}
	}
	closeWAL()
	path := filepath.Join(dir, tailSegmentName(t, dir))
	s := tailScan(t, dir)
	// A torn batch after the last commit: one entry frame, no commit.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 16)
	frame[0] = walFrameEntry
	binary.LittleEndian.PutUint32(frame[4:], 5)
	copy(frame[8:], "torn!")
	if _, err := f.WriteAt(frame, s.keep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := repairWALTail(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) || logs.Len() != 0 {
		t.Fatalf("repair changed a healthy tail (logged %q)", logs.String())
	}
	checkReopen(t, dir, 100)
	if err := repairWALTail(t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil))); err != nil || logs.Len() != 0 {
		t.Fatalf("repair of an empty dir: %v, logged %q", err, logs.String())
	}
}

// Open on a data dir whose WAL tail a partial seal left refusing appends
// (as an older binary left it after a disk-full) repairs it: every
// committed entry is kept, the next append works, and the repair is
// logged. (Before the move to raftstore this was checked through a node:
// TestNodeOpensPartiallySealedWAL; node.Open opens its store with Open.)
func TestOpenRepairsPartiallySealedWAL(t *testing.T) {
	dir := t.TempDir()
	var logs testutil.Buffer
	cfg := Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil)), WALSegmentSize: testSegment,
		LockTimeout: time.Second}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const entries = 20
	for i := uint64(1); i <= entries; i++ {
		if err := st.Log.StoreLog(&raft.Log{Index: i, Term: 1, Data: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// What a disk-full during a seal leaves after the last commit: an
	// entry frame and the start of the index frame, no commit.
	walDir := filepath.Join(dir, walDirName)
	s := tailScan(t, walDir)
	var batch []byte
	batch = append(batch, walFrameEntry, 0, 0, 0, 40, 0, 0, 0)
	batch = append(batch, bytes.Repeat([]byte{'e'}, 40)...)
	batch = append(batch, walFrameIndex, 0, 0, 0, 0xa0, 0x0f, 0, 0) // 4000 bytes of offsets...
	batch = append(batch, 0x20, 0, 0, 0, 0x40, 0, 0, 0)             // ...of which 8 landed
	f, err := os.OpenFile(filepath.Join(walDir, tailSegmentName(t, walDir)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(batch, s.keep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendFails(t, walDir)

	st, err = Open(cfg)
	if err != nil {
		t.Fatalf("open the partially sealed dir: %v", err)
	}
	defer st.Close()
	if last, err := st.Log.LastIndex(); err != nil || last != entries {
		t.Fatalf("last index after repair = %d (%v), want %d", last, err, entries)
	}
	if err := st.Log.StoreLog(&raft.Log{Index: entries + 1, Term: 2, Data: []byte("next")}); err != nil {
		t.Fatalf("append after repair: %v", err)
	}
	for i := uint64(1); i <= entries+1; i++ {
		var l raft.Log
		if err := st.Log.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("read %d after repair: %+v, %v", i, l, err)
		}
	}
	if !strings.Contains(logs.String(), "repaired the tail segment") {
		t.Fatalf("no repair logged; logs:\n%s", logs.String())
	}
}
