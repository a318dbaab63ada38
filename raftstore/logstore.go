package raftstore

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"

	"github.com/fenceworks/fence"
)

// LogStoreWAL names the one log store (Config.Kind): hashicorp/raft-wal in
// Dir/wal, segment files appended with one fsync per batch of entries, and
// a small bolt file for its metadata and raft's stable store (term, vote).
const LogStoreWAL = "wal"

const (
	// boltFileName is a raft-boltdb log, which Open refuses rather than
	// start a second, empty log beside it.
	boltFileName = "raft.db"
	walDirName   = "wal"
)

// Config says which data dir to open and how.
type Config struct {
	// Dir is the data dir; it must exist. The store lives in Dir/wal or
	// Dir/raft.db, the lock in Dir/LOCK.
	Dir string
	// Kind is LogStoreWAL or empty (the same); any other is refused.
	Kind string
	// LockTimeout bounds the wait for Dir's lock.
	LockTimeout time.Duration
	// WALSegmentSize is the size of raft-wal's segment files; 0 means
	// raft-wal's default (64 MiB).
	WALSegmentSize int
	// Logger receives the WAL's warnings and the tail repair's lines.
	Logger *slog.Logger
}

// Store is a data dir opened for raft: its lock held, its log and stable
// store open. Close releases both.
type Store struct {
	// Kind is the log store in use: LogStoreWAL.
	Kind string
	// Log and Stable are raft's log and stable store (not fail-stop: wrap
	// them with GuardedLog and GuardedStable).
	Log    raft.LogStore
	Stable raft.StableStore

	closer io.Closer

	readAhead atomic.Bool // segment reads from a read-ahead window (readahead.go)
	lock      *dirLock
	// syncs counts the fsyncs of WAL segment files.
	syncs atomic.Uint64
	// onSync is called with each WAL segment fsync's duration (OnSync).
	onSync atomic.Pointer[func(time.Duration)]

	closeOnce sync.Once
	closeErr  error
}

// Open takes c.Dir's lock (a second process on the same dir fails after
// c.LockTimeout with an error wrapping ErrDirLocked), chooses the log
// store kind and opens it, repairing a WAL tail a partial seal left
// refusing appends (see countingFile.WriteAt).
func Open(c Config) (*Store, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	lock, err := lockDir(c.Dir, c.LockTimeout)
	if err != nil {
		return nil, err
	}
	kind, err := chooseLogStore(c.Dir, c.Kind)
	if err != nil {
		lock.unlock()
		return nil, err
	}
	s, err := openLogStore(c, kind)
	if err != nil {
		lock.unlock()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// Syncs is the number of WAL segment fsyncs so far: each
// acknowledged batch adds at least one (G6).
func (s *Store) Syncs() uint64 { return s.syncs.Load() }

// Close closes the log and stable store, then releases the dir's lock,
// once; later calls return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.closer.Close()
		if s.lock != nil {
			if lerr := s.lock.unlock(); s.closeErr == nil {
				s.closeErr = lerr
			}
		}
	})
	return s.closeErr
}

// chooseLogStore checks the kind asked for and that dir holds no log of
// another store: nothing migrates a log, and a second log beside the first
// would fork the history.
func chooseLogStore(dir, want string) (string, error) {
	if want != "" && want != LogStoreWAL {
		return "", fence.Invalid("log_store", `"wal"`, want)
	}
	if exists(filepath.Join(dir, boltFileName)) {
		return "", fmt.Errorf("raftstore: data dir %s holds a raft-boltdb log (%s), which this version does not read; start from an empty dir (logs are not migrated; fence restore makes one from a backup)", dir, boltFileName)
	}
	return LogStoreWAL, nil
}

// openLogStore opens the WAL in cfg.Dir. The caller holds the data dir's
// lock.
func openLogStore(cfg Config, kind string) (*Store, error) {
	dir := filepath.Join(cfg.Dir, walDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil { // it holds the signing key seeds (node.DataDirMode)
		return nil, fmt.Errorf("raftstore: wal dir: %w", err)
	}
	if err := checkWALMeta(dir); err != nil {
		return nil, err
	}
	// A tail segment a partial seal left refusing appends is repaired
	// first (see countingFile.WriteAt).
	if err := repairWALTail(dir, cfg.Logger); err != nil {
		return nil, err
	}
	// raft-wal fsyncs every StoreLogs before it returns (G6) and keeps
	// term and vote in its bolt meta file, also fsync'd. The meta store
	// is ours to close (closing it again after WAL.Close is a no-op); a
	// failed wal.Open still needs it closed.
	meta := &metadb.BoltMetaDB{}
	st := &Store{Kind: kind}
	// The read-ahead window (readahead.go) is off: it made a restart over a
	// log of small entries faster (~4,500 entries: 1.1-1.7 s -> 0.7 s) but
	// one over 256 KiB entries slower (~610 entries after a disk filled:
	// 7.1 s -> 10.7 s, raft's start 1.9 -> 4.3 s, in one same-load pair),
	// past the default --ready-timeout of 10 s (system_test TestNodeDiskFull
	// failed so in a clean-clone run). Kept for a rework that reads ahead
	// only where entries are small; ReadAhead(true) turns it on.
	st.readAhead.Store(readAheadAtStart)
	size := cfg.WALSegmentSize
	if size == 0 {
		size = wal.DefaultSegmentSize
	}
	w, err := wal.Open(dir,
		wal.WithMetaStore(meta),
		wal.WithSegmentSize(size),
		wal.WithSegmentFiler(segment.NewFiler(dir, readAheadVFS{timedVFS{countingVFS{walfs.New(), &st.syncs}, &st.onSync}, &st.readAhead})),
		wal.WithLogger(NewHCLogger(cfg.Logger).Named("wal")))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("raftstore: open wal %s: %w", dir, err)
	}
	st.Log, st.Stable, st.closer = w, w, walCloser{w, meta}
	return st, nil
}

// ReadAhead turns the read-ahead of WAL segment reads on or off
// (readahead.go). It is on from Open: a restart reads the log after the
// last snapshot in order, once; the node turns it off once that log is
// applied, and the windows are freed at their files' next read.
func (s *Store) ReadAhead(on bool) { s.readAhead.Store(on) }

// readAheadAtStart: whether a store opens with its read-ahead on (see Open).
const readAheadAtStart = false

// walCloser closes the WAL, then its meta store.
type walCloser struct {
	w    *wal.WAL
	meta *metadb.BoltMetaDB
}

func (c walCloser) Close() error {
	err := c.w.Close()
	if merr := c.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// checkWALMeta refuses a wal dir that holds segment files but no meta
// file (LostWALMetaError).
func checkWALMeta(dir string) error {
	if exists(filepath.Join(dir, metadb.FileName)) {
		return nil
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return fmt.Errorf("raftstore: wal dir: %w", err)
	}
	if len(segs) > 0 {
		return &LostWALMetaError{Dir: dir, Segments: len(segs)}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
