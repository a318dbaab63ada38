// Package pemfile reads certificate, key and CA files with the bounds both
// the server and the CLI apply: a regular file (after symlinks) of at most
// MaxBytes. A FIFO hung every reader that opened it, and a link to
// /dev/zero ran the reader out of memory.
package pemfile

import (
	"fmt"
	"io"
	"os"
)

// MaxBytes bounds a certificate, key or CA file: a chain of certificates
// is kilobytes; a CA bundle the system's is about 200 KB.
const MaxBytes = 4 << 20

// Read reads file, which must be a regular file of at most MaxBytes.
func Read(file string) ([]byte, error) {
	// Stat before Open: opening a FIFO blocks until a writer comes.
	info, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", file, info.Mode().Type())
	}
	if info.Size() > MaxBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", file, info.Size(), MaxBytes)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%s is more than %d bytes", file, MaxBytes)
	}
	return b, nil
}
