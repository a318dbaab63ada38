//go:build unix

package node

import (
	"io/fs"
	"syscall"
)

// allocated is the space the file system allocated to fi (st_blocks × 512),
// or its size if the file system does not say.
func allocated(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Blocks) * 512
	}
	return uint64(max(fi.Size(), 0))
}
