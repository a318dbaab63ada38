package raftstore

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// segmentFiles lists the segment files of the WAL in dir, in order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// A process stopped (kill -9, power) after the batch that seals a segment
// was fsync'd, and so acknowledged, but before raft-wal's rotation (which
// runs after StoreLogs returns) recorded the seal and the next segment in
// its meta data: raft-wal then refuses every append at every start
// ("segment is sealed") and the node fail-stops forever. Open completes
// the rotation in the meta data: every entry stays, appends work, across
// reopens.
func TestWALSealWithoutRotationRepaired(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, walDirName)
	var logs bytes.Buffer
	cfg := Config{Dir: dir, Kind: LogStoreWAL, LockTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), WALSegmentSize: 4096}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "%0200d", i)}
	}
	// Append until a batch seals the first segment, and wait for the
	// rotation to create the second (its file is made after the meta data
	// recorded it).
	var last uint64
	for sealed := false; !sealed; {
		batch := []*raft.Log{entry(last + 1), entry(last + 2), entry(last + 3)}
		if err := st.Log.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
		last += 3
		f, err := os.Open(segmentFiles(t, walDir)[0])
		if err != nil {
			t.Fatal(err)
		}
		s, err := scanWALTail(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sealed = len(s.indexes) > 0
		if last > 1000 {
			t.Fatal("the first segment never sealed")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(segmentFiles(t, walDir)) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("raft-wal did not rotate after the seal")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Put the meta data back as it was before the rotation committed: the
	// first segment the unsealed tail, the second not recorded (nor its
	// file, made after).
	meta := &metadb.BoltMetaDB{}
	ps, err := meta.Load(walDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Segments) != 2 {
		t.Fatalf("%d segments in the meta data, want 2", len(ps.Segments))
	}
	first, second := ps.Segments[0], ps.Segments[1]
	first.SealTime, first.IndexStart, first.MaxIndex = time.Time{}, 0, 0
	if err := meta.CommitState(types.PersistentState{NextSegmentID: second.ID, Segments: []types.SegmentInfo{first}}); err != nil {
		t.Fatal(err)
	}
	meta.Close()
	if err := os.Remove(segmentFiles(t, walDir)[1]); err != nil {
		t.Fatal(err)
	}
	appendFails(t, walDir) // raft-wal alone: "segment is sealed"

	st, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, want uint64) {
		t.Helper()
		if got, err := st.Log.LastIndex(); err != nil || got != want {
			t.Fatalf("%s: last index %d (%v), want %d", when, got, err, want)
		}
		for i := uint64(1); i <= want; i++ {
			var l raft.Log
			if err := st.Log.GetLog(i, &l); err != nil || l.Index != i || string(l.Data) != string(entry(i).Data) {
				t.Fatalf("%s: read %d: %+v, %v", when, i, l, err)
			}
		}
	}
	check("after the repair", last)
	for i := last + 1; i <= last+60; i += 3 {
		if err := st.Log.StoreLogs([]*raft.Log{entry(i), entry(i + 1), entry(i + 2)}); err != nil {
			t.Fatalf("append %d after the repair: %v", i, err)
		}
	}
	if !strings.Contains(logs.String(), "its seal had committed but the rotation after it had not been recorded") {
		t.Fatalf("no repair logged: %s", logs.String())
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if st, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check("after a second reopen", last+60)
	if strings.Contains(logs.String(), "repaired") {
		t.Fatalf("a second repair: %s", logs.String())
	}
}

// The same state, made by raft-wal itself: a Close right after the batch
// that seals a segment wins the race with the rotation, which then gives up
// ("we have to handle that case during recovery anyway", runRotate) and
// raft-wal v0.4.1's open refuses every append. Open, append one batch,
// close, again: every round must take its batch and keep every entry. (On
// this machine raft-wal alone wedged 20 trials in 20; here most trials
// repair at least once. The race is not forced: if it never happened the
// test says so.)
func TestWALCloseRacingRotationRepaired(t *testing.T) {
	repairs := 0
	for trial := range 10 {
		dir := t.TempDir()
		var logs bytes.Buffer
		cfg := Config{Dir: dir, Kind: LogStoreWAL, LockTimeout: time.Second,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), WALSegmentSize: 4096}
		data := func(i uint64) []byte { return fmt.Appendf(nil, "%0200d", i) }
		var last uint64
		for round := range 40 {
			st, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			batch := []*raft.Log{}
			for i := last + 1; i <= last+3; i++ {
				batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data(i)})
			}
			if err := st.Log.StoreLogs(batch); err != nil {
				st.Close()
				t.Fatalf("trial %d round %d: append: %v", trial, round, err)
			}
			last += 3
			for i := uint64(1); i <= last; i++ {
				var l raft.Log
				if err := st.Log.GetLog(i, &l); err != nil || string(l.Data) != string(data(i)) {
					st.Close()
					t.Fatalf("trial %d round %d: read %d: %v", trial, round, i, err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
		repairs += strings.Count(logs.String(), "the rotation after it had not been recorded")
	}
	t.Logf("%d rotations completed at open over 10 trials", repairs)
}
