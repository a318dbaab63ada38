//go:build unix

package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// lockFileName is the file in the data directory a running node holds an
// exclusive flock on, so a second process on the same directory fails
// instead of writing the same log (raft-wal does not lock its directory).
const lockFileName = "LOCK"

// dirLock is a held flock on DataDir/LOCK; the kernel drops it when the
// process dies, so a kill -9 leaves no stale lock behind.
type dirLock struct {
	f    *os.File
	once sync.Once
	err  error
}

// lockDir takes the data directory's lock, retrying until timeout.
func lockDir(dir string, timeout time.Duration) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &dirLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("raftstore: lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("raftstore: %s is locked by another process (is another fence server using data dir %s?): %w", path, dir, ErrDirLocked)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// unlock releases the lock (closing the file drops the flock); later calls
// return the first result.
func (l *dirLock) unlock() error {
	l.once.Do(func() { l.err = l.f.Close() })
	return l.err
}
