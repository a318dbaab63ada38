package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A follower whose log conflicts with a new leader's (entries of an old
// term it never committed) has raft delete that suffix and store the
// leader's entries in its place. raft-wal v0.4.0 marked the tail segment
// sealed without writing its index block when the suffix ended in it, and
// every later open then failed ("sealed segment has no index block": the
// node panicked at each start; hashicorp/raft-wal#31, fixed in v0.4.1 by
// #33; found by the 3-node chaos run). Through Open, as the node uses the
// store: the log holds exactly what raft kept and stored after, across
// reopens, and takes appends.
func TestWALSuffixTruncationSurvivesReopen(t *testing.T) {
	for _, tc := range []struct {
		name string
		from uint64 // first index deleted (to the end: 44)
	}{
		{"in the tail segment", 42},
		{"across segments", 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, Kind: LogStoreWAL, LockTimeout: time.Second, Logger: quietLogger(),
				WALSegmentSize: 4096} // a few batches a segment
			st, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := map[uint64]uint64{} // index -> term
			store := func(first, n, term uint64) {
				t.Helper()
				for idx := first; idx < first+n; idx += 4 {
					var batch []*raft.Log
					for i := idx; i < min(idx+4, first+n); i++ {
						batch = append(batch, &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
							Data: fmt.Appendf(nil, "%0256d", i*10+term)})
						want[i] = term
					}
					if err := st.Log.StoreLogs(batch); err != nil {
						t.Fatalf("store %d..: %v", idx, err)
					}
				}
			}
			check := func(when string, last uint64) {
				t.Helper()
				if got, err := st.Log.LastIndex(); err != nil || got != last {
					t.Fatalf("%s: last index %d (%v), want %d", when, got, err, last)
				}
				for i := uint64(1); i <= last; i++ {
					var l raft.Log
					if err := st.Log.GetLog(i, &l); err != nil {
						t.Fatalf("%s: read %d: %v", when, i, err)
					}
					if l.Index != i || l.Term != want[i] || string(l.Data) != fmt.Sprintf("%0256d", i*10+want[i]) {
						t.Fatalf("%s: read %d: index %d term %d (want term %d)", when, i, l.Index, l.Term, want[i])
					}
				}
			}
			reopen := func() {
				t.Helper()
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				if st, err = Open(cfg); err != nil {
					t.Fatalf("reopen: %v", err)
				}
			}

			store(1, 44, 1) // 11 batches: several segments
			// A new leader of term 2 disagrees from tc.from on: raft deletes
			// the suffix, then stores the leader's entries.
			if err := st.Log.DeleteRange(tc.from, 44); err != nil {
				t.Fatal(err)
			}
			for i := tc.from; i <= 44; i++ {
				delete(want, i)
			}
			store(tc.from, 8, 2)
			last := tc.from + 7
			check("after the truncation", last)
			reopen()
			check("after a reopen", last)
			store(last+1, 8, 2)
			reopen()
			check("after appends and a second reopen", last+8)
			st.Close()
		})
	}
}
