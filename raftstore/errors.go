package raftstore

import "errors"

// ErrDirLocked: another process holds the data directory (its LOCK file).
var ErrDirLocked = errors.New("raftstore: data dir locked by another process")
