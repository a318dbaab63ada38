//go:build !unix

package raftstore

import "time"

// dirLock is a no-op where flock does not exist: a second process on a
// wal dir waits on the WAL's meta file instead of failing after
// LockTimeout. Fence is built for unix.
type dirLock struct{}

func lockDir(dir string, timeout time.Duration) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) unlock() error { return nil }
