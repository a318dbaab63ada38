package raftstore

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// A read-ahead window answers as the file does: reads inside it, reads
// across its end and past the file's end, and reads after a write into
// the range it holds (it takes the written bytes); with read-ahead off,
// reads go to the file and the window is freed.
func TestReadAheadWindowAnswersAsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	data := make([]byte, 3*readAheadSize+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	on := new(atomic.Bool)
	on.Store(true)
	w := &readAheadWriter{WritableFile: f, w: window{f: f, on: on}}

	check := func(off int64, n int) {
		t.Helper()
		got := make([]byte, n)
		k, err := w.ReadAt(got, off)
		wantN := max(0, min(int64(n), int64(len(data))-off))
		if int64(k) != wantN || !bytes.Equal(got[:k], data[off:off+wantN]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, err %v; want %d bytes of the file", n, off, k, err, wantN)
		}
		if (wantN < int64(n)) != (err == io.EOF) || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d): err %v with %d of %d bytes", n, off, err, k, n)
		}
	}
	check(32, 8)                  // fills a window at 32
	check(40, 64<<10)             // inside it
	check(readAheadSize, 64<<10)  // across its end: a new window
	check(int64(len(data))-10, 8) // near the file's end
	check(int64(len(data))-4, 8)  // across the file's end: io.EOF
	check(readAheadSize+100, 8)   // the window read at the end (short)

	// A write inside the window: later reads see it.
	check(1000, 8)
	patch := []byte("written after the window was filled")
	if _, err := w.WriteAt(patch, 1010); err != nil {
		t.Fatal(err)
	}
	copy(data[1010:], patch)
	check(1000, 64)
	check(1010, len(patch))

	on.Store(false)
	check(2000, 16)
	if w.w.held.Load() || w.w.buf != nil {
		t.Fatal("the window is held after read-ahead ended")
	}
}
