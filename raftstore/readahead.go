package raftstore

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft-wal/types"
)

// readAheadSize is how much a segment file read fills in at a time while
// read-ahead is on (Store.ReadAhead).
const readAheadSize = 1 << 20

// windowBufs holds window buffers (*[]byte of readAheadSize) between
// fills: a restart refills a window for every readAheadSize of a segment.
var windowBufs = sync.Pool{New: func() any { b := make([]byte, readAheadSize); return &b }}

// readAheadVFS serves small reads of WAL segment files from a window read
// ahead, while on is set. raft-wal reads a segment one frame at a time:
// its recovery of the tail segment reads every 8-byte frame header with
// its own pread, and every GetLog reads 64 KiB (its minimum buffer) with
// one pread for one entry of a few hundred bytes. A restart does both for
// every entry after the last snapshot (raft applies the log tail one
// GetLog at a time): issue 24's soak spent 0.1-0.2 ms an entry there.
// With a window, a restart reads each segment in readAheadSize chunks and
// copies from memory. It is on only while the node starts (Store.ReadAhead):
// afterwards reads are of the log's newest entries, just written, where a
// window would be refilled for every read.
type readAheadVFS struct {
	types.VFS
	on *atomic.Bool
}

func (v readAheadVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &readAheadWriter{WritableFile: f, w: window{f: f, on: v.on}}, nil
}

func (v readAheadVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &readAheadWriter{WritableFile: f, w: window{f: f, on: v.on}}, nil
}

func (v readAheadVFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	f, err := v.VFS.OpenReader(dir, name)
	if err != nil {
		return nil, err
	}
	return &readAheadReader{ReadableFile: f, w: window{f: f, on: v.on}}, nil
}

type readAheadReader struct {
	types.ReadableFile
	w window
}

func (r *readAheadReader) ReadAt(p []byte, off int64) (int, error) { return r.w.readAt(p, off) }

type readAheadWriter struct {
	types.WritableFile
	w window
}

func (f *readAheadWriter) ReadAt(p []byte, off int64) (int, error) { return f.w.readAt(p, off) }

// WriteAt writes through, and the window takes the bytes written
// (window.wrote).
func (f *readAheadWriter) WriteAt(p []byte, off int64) (int, error) {
	f.w.begin()
	n, err := f.WritableFile.WriteAt(p, off)
	f.w.wrote(p, off, n, err)
	return n, err
}

// window is one file's read-ahead buffer: buf holds the file's bytes from
// off. A write to the file is copied into it where they overlap (a failed
// one drops it), and a fill that a write overlapped in time is not kept
// (gen): a read never returns bytes older than a write that finished
// before the read began. (A follower catching up after a restart appends
// to the tail segment while raft reads its older entries: the window
// stays.)
type window struct {
	f  io.ReaderAt
	on *atomic.Bool

	mu      sync.Mutex
	held    atomic.Bool // buf is not nil
	off     int64
	buf     []byte  // the bytes read at off: a prefix of *pbuf (a window's buffer is read and changed under mu only)
	pbuf    *[]byte // from windowBufs
	gen     uint64  // counts writes begun and ended
	inWrite int     // writes in progress
}

func (w *window) begin() {
	w.mu.Lock()
	w.inWrite++
	w.gen++
	w.mu.Unlock()
}

// wrote ends a write of p at off that wrote n bytes and returned err.
func (w *window) wrote(p []byte, off int64, n int, err error) {
	w.mu.Lock()
	w.inWrite--
	w.gen++
	switch {
	case len(w.buf) == 0:
	case n != len(p) || (err != nil && err != io.EOF):
		w.drop() // the file's bytes there are not known here
	default:
		// The overlap of [off, off+n) and the window.
		lo, hi := max(off, w.off), min(off+int64(n), w.off+int64(len(w.buf)))
		if lo < hi {
			copy(w.buf[lo-w.off:hi-w.off], p[lo-off:hi-off])
		}
	}
	w.mu.Unlock()
}

// readAt is io.ReaderAt's ReadAt: from the window when it holds all of p,
// else from a new window read at off when read-ahead is on and p is
// smaller than a window, else from the file.
func (w *window) readAt(p []byte, off int64) (int, error) {
	if !w.on.Load() {
		if w.held.Load() {
			w.mu.Lock()
			w.drop() // read-ahead ended: free the window
			w.mu.Unlock()
		}
		return w.f.ReadAt(p, off)
	}
	w.mu.Lock()
	if off >= w.off && off+int64(len(p)) <= w.off+int64(len(w.buf)) {
		n := copy(p, w.buf[off-w.off:])
		w.mu.Unlock()
		return n, nil
	}
	gen, clean := w.gen, w.inWrite == 0
	w.mu.Unlock()
	if len(p) > readAheadSize/2 || !clean {
		return w.f.ReadAt(p, off)
	}
	pbuf := windowBufs.Get().(*[]byte)
	n, err := w.f.ReadAt(*pbuf, off)
	if err != nil && err != io.EOF {
		windowBufs.Put(pbuf)
		return w.f.ReadAt(p, off) // the file's own answer for p
	}
	buf := (*pbuf)[:n]
	w.mu.Lock()
	k := copy(p, buf)
	if w.gen == gen && w.inWrite == 0 {
		w.drop()
		w.off, w.buf, w.pbuf = off, buf, pbuf
		w.held.Store(true)
	} else {
		windowBufs.Put(pbuf)
	}
	w.mu.Unlock()
	if k < len(p) {
		return k, io.EOF // the file ends before p does (n < readAheadSize: the read met its end)
	}
	return k, nil
}

// drop frees the window (under mu).
func (w *window) drop() {
	if w.pbuf != nil {
		windowBufs.Put(w.pbuf)
	}
	w.off, w.buf, w.pbuf = 0, nil, nil
	w.held.Store(false)
}

// ReadAt makes a window an io.ReaderAt of its file.
func (w *window) ReadAt(p []byte, off int64) (int, error) { return w.readAt(p, off) }
