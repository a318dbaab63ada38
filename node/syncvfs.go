package node

import (
	"sync/atomic"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// countingVFS is raft-wal's file system with every successful fsync of a
// segment file counted: a test (and Status.LogSyncs) can see that each
// acknowledged command was synced before its reply (G6).
type countingVFS struct {
	*walfs.FS
	syncs *atomic.Uint64
}

func (v countingVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return countingFile{f, v.syncs}, nil
}

func (v countingVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, v.syncs}, nil
}

type countingFile struct {
	types.WritableFile
	syncs *atomic.Uint64
}

func (f countingFile) Sync() error {
	if err := f.WritableFile.Sync(); err != nil {
		return err
	}
	f.syncs.Add(1)
	return nil
}
