//go:build !unix

package node

import "io/fs"

// allocated is fi's size (the space allocated is not known here).
func allocated(fi fs.FileInfo) uint64 { return uint64(max(fi.Size(), 0)) }
