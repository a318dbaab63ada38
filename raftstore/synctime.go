package raftstore

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft-wal/types"
)

// timedVFS times every fsync of a WAL segment file its files make
// (through the countingVFS it wraps) and hands the duration to the hook
// set with Store.OnSync, if any.
type timedVFS struct {
	countingVFS
	hook *atomic.Pointer[func(time.Duration)]
}

func (v timedVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.countingVFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return timedFile{f, v.hook}, nil
}

func (v timedVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.countingVFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return timedFile{f, v.hook}, nil
}

type timedFile struct {
	types.WritableFile
	hook *atomic.Pointer[func(time.Duration)]
}

// Sync times the fsync; a failed one is not reported (the node
// fail-stops).
func (f timedFile) Sync() error {
	start := time.Now()
	if err := f.WritableFile.Sync(); err != nil {
		return err
	}
	if fn := f.hook.Load(); fn != nil {
		(*fn)(time.Since(start))
	}
	return nil
}

// OnSync registers fn to be called after each successful fsync of a WAL
// segment file with how long it took (for metrics), replacing any earlier
// fn (nil removes it). fn runs on the goroutine that appends to the
// log and must not block.
func (s *Store) OnSync(fn func(time.Duration)) {
	if fn == nil {
		s.onSync.Store(nil)
		return
	}
	s.onSync.Store(&fn)
}
