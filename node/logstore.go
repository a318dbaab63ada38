package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"

	"github.com/fenceworks/fence"
)

// Log store kinds (Config.LogStore).
const (
	// LogStoreWAL is hashicorp/raft-wal in DataDir/wal: segment files
	// appended with one fsync per batch of entries, and a small bolt file
	// for its metadata and raft's stable store (term, vote).
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb in DataDir/raft.db: every batch is one
	// bbolt transaction (two fsyncs).
	LogStoreBolt = "bolt"
)

const (
	boltFileName = "raft.db"
	walDirName   = "wal"
)

// logStore is raft's log and stable store with what closes it.
type logStore struct {
	kind   string
	log    raft.LogStore
	stable raft.StableStore
	closer io.Closer
	// syncs counts the fsyncs of WAL segment files (0 for bolt, whose
	// fsyncs are not observable: boltOptions keeps them on).
	syncs atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// close closes the store once; later calls return the first result.
func (s *logStore) close() error {
	s.closeOnce.Do(func() { s.closeErr = s.closer.Close() })
	return s.closeErr
}

// chooseLogStore picks the store for dir: the configured kind, or, when
// none is configured, the kind dir already holds (a new dir gets the WAL).
// It refuses a dir holding the other kind: nothing migrates a log.
func chooseLogStore(dir, want string) (string, error) {
	hasBolt := exists(filepath.Join(dir, boltFileName))
	hasWAL := exists(filepath.Join(dir, walDirName))
	switch want {
	case "":
		switch {
		case hasBolt && hasWAL:
			return "", fmt.Errorf("node: data dir %s holds both %s and %s/; remove the one not in use", dir, boltFileName, walDirName)
		case hasBolt:
			return LogStoreBolt, nil
		default:
			return LogStoreWAL, nil
		}
	case LogStoreWAL:
		if hasBolt {
			return "", fmt.Errorf("node: data dir %s holds a bolt log (%s); open it with log store %q, or start from an empty dir (logs are not migrated)", dir, boltFileName, LogStoreBolt)
		}
		return LogStoreWAL, nil
	case LogStoreBolt:
		if hasWAL {
			return "", fmt.Errorf("node: data dir %s holds a wal log (%s/); open it with log store %q, or start from an empty dir (logs are not migrated)", dir, walDirName, LogStoreWAL)
		}
		return LogStoreBolt, nil
	default:
		return "", fence.Invalid("log_store", `"wal" or "bolt"`, want)
	}
}

// openLogStore opens the store of the given kind in cfg.DataDir. The
// caller holds the data dir's lock.
func openLogStore(cfg Config, kind string) (*logStore, error) {
	switch kind {
	case LogStoreBolt:
		path := filepath.Join(cfg.DataDir, boltFileName)
		s, err := raftboltdb.New(boltOptions(path, cfg.LockTimeout))
		if err != nil {
			if errors.Is(err, bbolt.ErrTimeout) {
				return nil, fmt.Errorf("node: %s is locked by another process (is another fence server using data dir %s?): %w", path, cfg.DataDir, ErrDirLocked)
			}
			return nil, fmt.Errorf("node: open %s: %w", path, err)
		}
		return &logStore{kind: kind, log: s, stable: s, closer: s}, nil
	default:
		dir := filepath.Join(cfg.DataDir, walDirName)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("node: wal dir: %w", err)
		}
		// A tail segment a partial seal left refusing appends is repaired
		// first (see countingFile.WriteAt).
		if err := repairWALTail(dir, cfg.Logger); err != nil {
			return nil, err
		}
		// raft-wal fsyncs every StoreLogs before it returns (G6) and keeps
		// term and vote in its bolt meta file, also fsync'd.
		// The meta store is ours to close: WAL.Close leaves it open (and
		// its bolt flock held) in raft-wal v0.4.0.
		meta := &metadb.BoltMetaDB{}
		st := &logStore{kind: kind}
		size := cfg.WALSegmentSize
		if size == 0 {
			size = wal.DefaultSegmentSize
		}
		w, err := wal.Open(dir,
			wal.WithMetaStore(meta),
			wal.WithSegmentSize(size),
			wal.WithSegmentFiler(segment.NewFiler(dir, countingVFS{walfs.New(), &st.syncs})),
			wal.WithLogger(newHCLogger(cfg.Logger).Named("wal")))
		if err != nil {
			meta.Close()
			return nil, fmt.Errorf("node: open wal %s: %w", dir, err)
		}
		st.log, st.stable, st.closer = w, w, walCloser{w, meta}
		return st, nil
	}
}

// boltOptions opens raft-boltdb with fsync on: every StoreLogs is
// durable before raft acknowledges it (G6).
func boltOptions(path string, lockTimeout time.Duration) raftboltdb.Options {
	return raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: lockTimeout},
		NoSync:      false, // fsync before reply (G6)
	}
}

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

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
