package raftstore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// FailStop makes every durable write error fatal (docs/guarantees.md, G6):
// a log, stable-store or snapshot write that fails may have left a partial
// entry behind, and raft-wal refuses every later append after one, so the
// node stops instead of serving on. The first error is recorded, Down is
// closed and onFatal is called, once; what the node does then (stop
// acknowledging, never take office again, Config.OnFatal) is the node's.
// The wrappers below (GuardedLog, GuardedStable, GuardedSnapshots) report
// to one FailStop.
type FailStop struct {
	once    sync.Once
	err     atomic.Pointer[error]
	onFatal func(error)
	down    chan struct{} // closed on the first fatal error
}

// NewFailStop returns a FailStop that calls onFatal with the first fatal
// error.
func NewFailStop(onFatal func(error)) *FailStop {
	return &FailStop{onFatal: onFatal, down: make(chan struct{})}
}

// Fatal records err (the first one wins), closes Down and calls onFatal,
// once.
func (f *FailStop) Fatal(err error) {
	f.once.Do(func() {
		f.err.Store(&err)
		close(f.down)
		f.onFatal(err)
	})
}

// Err returns the fatal error, or nil.
func (f *FailStop) Err() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Down is closed on the first fatal error (before onFatal runs).
func (f *FailStop) Down() <-chan struct{} { return f.down }

// GuardedLog is raft's LogStore with fail-stop on write errors: after a
// fatal error it refuses every append and deletion without touching the
// store. It also
// counts what it stored (bytes, and commands: what a restart replays), for
// the node's snapshot trigger. Set its fields before raft uses it.
type GuardedLog struct {
	raft.LogStore
	Fail *FailStop
	// Commands is the number of commands entry l holds (a group entry
	// holds several); nil counts 1 an entry.
	Commands func(l *raft.Log) uint64
	// Wrote is called after each successful StoreLogs (may be nil).
	Wrote func()

	stored  atomic.Uint64 // bytes of entry data stored, ever (this process)
	entries atomic.Uint64 // commands stored, ever (this process)
}

// Stored is the bytes of entry data stored by this process.
func (g *GuardedLog) Stored() uint64 { return g.stored.Load() }

// Entries is the commands stored by this process (Commands of each entry).
func (g *GuardedLog) Entries() uint64 { return g.entries.Load() }

func (g *GuardedLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func (g *GuardedLog) StoreLogs(logs []*raft.Log) error {
	if err := g.Fail.Err(); err != nil {
		return fmt.Errorf("raftstore: log store stopped after a fatal error: %w", err)
	}
	if err := g.LogStore.StoreLogs(logs); err != nil {
		err = fmt.Errorf("raftstore: log append failed: %w", err)
		g.Fail.Fatal(err)
		return err
	}
	var n, cmds uint64
	for _, l := range logs {
		n += uint64(len(l.Data))
		if g.Commands != nil {
			cmds += g.Commands(l)
		} else {
			cmds++
		}
	}
	g.stored.Add(n)
	g.entries.Add(cmds)
	if g.Wrote != nil {
		g.Wrote()
	}
	return nil
}

func (g *GuardedLog) DeleteRange(min, max uint64) error {
	if err := g.Fail.Err(); err != nil {
		return fmt.Errorf("raftstore: log store stopped after a fatal error: %w", err)
	}
	if err := g.LogStore.DeleteRange(min, max); err != nil {
		err = fmt.Errorf("raftstore: log compaction failed: %w", err)
		g.Fail.Fatal(err)
		return err
	}
	return nil
}

// IsMonotonic passes on raft.MonotonicLogStore (raft-wal is one: after a
// snapshot install raft must reset the log rather than leave a gap).
func (g *GuardedLog) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GuardedStable is raft's StableStore (term, vote) with fail-stop on write
// errors. After a fatal error it refuses Set — raft's only use of it is the
// candidate of a vote, so a stopped node grants no vote, not even to
// itself, and can neither win an election nor help elect — but not
// SetUint64: hashicorp/raft panics when it cannot save a new term. (A vote
// refused after its term was saved leaves that term recorded with an older
// candidate: the node granted nobody in the term, so a later grant to that
// candidate is its first.)
type GuardedStable struct {
	raft.StableStore
	Fail *FailStop
}

func (g *GuardedStable) Set(k, v []byte) error {
	if err := g.Fail.Err(); err != nil {
		return fmt.Errorf("raftstore: stable store stopped after a fatal error (no vote): %w", err)
	}
	if err := g.StableStore.Set(k, v); err != nil {
		err = fmt.Errorf("raftstore: stable store write failed: %w", err)
		g.Fail.Fatal(err)
		return err
	}
	return nil
}

func (g *GuardedStable) SetUint64(k []byte, v uint64) error {
	if err := g.StableStore.SetUint64(k, v); err != nil {
		err = fmt.Errorf("raftstore: stable store write failed: %w", err)
		g.Fail.Fatal(err)
		return err
	}
	return nil
}

// GuardedSnapshots is raft's SnapshotStore with fail-stop on write errors.
// After a fatal error it creates no snapshot: neither the node's own nor
// one a leader sends (InstallSnapshot), which would otherwise be
// acknowledged by a node that stopped. Mark is called when a snapshot is created and Done with its result once
// the snapshot is written (both may be nil): the node's snapshot trigger
// counts the log written since.
type GuardedSnapshots struct {
	raft.SnapshotStore
	Fail *FailStop
	Mark func() any
	Done func(mark any, size uint64)
}

func (g *GuardedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if err := g.Fail.Err(); err != nil {
		return nil, fmt.Errorf("raftstore: snapshot store stopped after a fatal error: %w", err)
	}
	sink, err := g.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		err = fmt.Errorf("raftstore: snapshot create failed: %w", err)
		g.Fail.Fatal(err)
		return nil, err
	}
	var mark any
	if g.Mark != nil {
		mark = g.Mark()
	}
	return &guardedSink{SnapshotSink: sink, g: g, mark: mark}, nil
}

type guardedSink struct {
	raft.SnapshotSink
	g    *GuardedSnapshots
	mark any
	size uint64
	done bool // Done was called: raft closes a sink twice (the node's Persist, then raft)
}

func (s *guardedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.size += uint64(n)
	if err != nil {
		err = fmt.Errorf("raftstore: snapshot write failed: %w", err)
		s.g.Fail.Fatal(err)
	}
	return n, err
}

func (s *guardedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		err = fmt.Errorf("raftstore: snapshot close failed: %w", err)
		s.g.Fail.Fatal(err)
		return err
	}
	if s.g.Done != nil && !s.done {
		s.done = true
		s.g.Done(s.mark, s.size)
	}
	return nil
}
