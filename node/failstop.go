package node

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// failStop makes every durable write error fatal (docs/guarantees.md, G6):
// a log, stable-store or snapshot write that fails may have left a partial
// entry behind, and raft-wal refuses every later append after one, so the
// node stops instead of serving on. The first error calls Config.OnFatal
// (by default: log it and exit with status 70); from then on the node
// acknowledges nothing (propose answers ErrUnknownOutcome or ErrClosed) and
// does not take office again.
type failStop struct {
	once    sync.Once
	err     atomic.Pointer[error]
	onFatal func(error)
	down    chan struct{} // closed on the first fatal error
}

func newFailStop(onFatal func(error)) *failStop {
	return &failStop{onFatal: onFatal, down: make(chan struct{})}
}

// fatal records err (the first one wins) and calls OnFatal once.
func (f *failStop) fatal(err error) {
	f.once.Do(func() {
		f.err.Store(&err)
		close(f.down)
		f.onFatal(err)
	})
}

// failed returns the fatal error, or nil.
func (f *failStop) failed() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// defaultOnFatal logs err and exits the process with status 70
// (EX_SOFTWARE): a restart recovers from the log, which holds every
// acknowledged entry.
func defaultOnFatal(cfg Config) func(error) {
	return func(err error) {
		cfg.Logger.Error("fatal storage error: stopping (fail-stop); restart to recover from the log", "err", err)
		os.Exit(70)
	}
}

// guardedLog is raft's LogStore with fail-stop on write errors. It also
// counts what it stored (bytes, and commands: what a restart replays), for
// the snapshot trigger.
type guardedLog struct {
	raft.LogStore
	fs      *failStop
	stored  atomic.Uint64 // bytes of entry data stored, ever (this process)
	entries atomic.Uint64 // commands stored, ever (this process; a group entry counts its commands)
	batches atomic.Uint64 // successful StoreLogs calls
	wrote   func()        // called after each successful StoreLogs (may be nil)
}

func (g *guardedLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func (g *guardedLog) StoreLogs(logs []*raft.Log) error {
	if err := g.fs.failed(); err != nil {
		return fmt.Errorf("node: log store stopped after a fatal error: %w", err)
	}
	if err := g.LogStore.StoreLogs(logs); err != nil {
		err = fmt.Errorf("node: log append failed: %w", err)
		g.fs.fatal(err)
		return err
	}
	var n, cmds uint64
	for _, l := range logs {
		n += uint64(len(l.Data))
		cmds += entryCommandCount(l)
	}
	g.stored.Add(n)
	g.entries.Add(cmds)
	g.batches.Add(1)
	if g.wrote != nil {
		g.wrote()
	}
	return nil
}

func (g *guardedLog) DeleteRange(min, max uint64) error {
	if err := g.LogStore.DeleteRange(min, max); err != nil {
		err = fmt.Errorf("node: log compaction failed: %w", err)
		g.fs.fatal(err)
		return err
	}
	return nil
}

// IsMonotonic passes on raft.MonotonicLogStore (raft-wal is one: after a
// snapshot install raft must reset the log rather than leave a gap).
func (g *guardedLog) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// guardedStable is raft's StableStore (term, vote) with fail-stop on write
// errors.
type guardedStable struct {
	raft.StableStore
	fs *failStop
}

func (g *guardedStable) Set(k, v []byte) error {
	if err := g.StableStore.Set(k, v); err != nil {
		err = fmt.Errorf("node: stable store write failed: %w", err)
		g.fs.fatal(err)
		return err
	}
	return nil
}

func (g *guardedStable) SetUint64(k []byte, v uint64) error {
	if err := g.StableStore.SetUint64(k, v); err != nil {
		err = fmt.Errorf("node: stable store write failed: %w", err)
		g.fs.fatal(err)
		return err
	}
	return nil
}

// guardedSnapshots is raft's SnapshotStore with fail-stop on write errors.
// mark is called when a snapshot is created and done with its result once
// the snapshot is written (both may be nil): the snapshot trigger counts
// the log written since.
type guardedSnapshots struct {
	raft.SnapshotStore
	fs   *failStop
	mark func() any
	done func(mark any, size uint64)
}

func (g *guardedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := g.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		err = fmt.Errorf("node: snapshot create failed: %w", err)
		g.fs.fatal(err)
		return nil, err
	}
	var mark any
	if g.mark != nil {
		mark = g.mark()
	}
	return &guardedSink{SnapshotSink: sink, g: g, mark: mark}, nil
}

type guardedSink struct {
	raft.SnapshotSink
	g    *guardedSnapshots
	mark any
	size uint64
}

func (s *guardedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	s.size += uint64(n)
	if err != nil {
		err = fmt.Errorf("node: snapshot write failed: %w", err)
		s.g.fs.fatal(err)
	}
	return n, err
}

func (s *guardedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		err = fmt.Errorf("node: snapshot close failed: %w", err)
		s.g.fs.fatal(err)
		return err
	}
	if s.g.done != nil {
		s.g.done(s.mark, s.size)
	}
	return nil
}
