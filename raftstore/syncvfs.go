package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// countingVFS is raft-wal's file system with every successful fsync of a
// segment file counted: a test (and Status.LogSyncs) can see that each
// acknowledged command was synced before its reply (G6). Its files also
// undo the bytes of a failed write (countingFile.WriteAt).
type countingVFS struct {
	*walfs.FS
	syncs *atomic.Uint64
}

func (v countingVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	// raft-wal creates segments with its own mode; the log holds the
	// signing key seeds: the node's user only (node.DataFileMode).
	if err := os.Chmod(filepath.Join(dir, name), 0o600); err != nil {
		f.Close()
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

// WriteAt writes p at off. A write that fails after n > 0 bytes landed has
// those bytes overwritten with zeros (and synced) before the error is
// returned.
//
// Why: raft-wal (v0.4.0 and v0.4.1: checked) writes a segment only here
// (segment.Writer.flush, one WriteAt per batch, at the end of the last
// commit; v0.4.1's ForceSeal on a suffix truncation too). It seals a segment
// by putting the index frame in the batch that crosses the segment's
// preallocated size, so on a full disk that write is partial: the bytes
// inside the preallocated area land, the rest fails with ENOSPC. On reopen
// recoverTail ignores the uncommitted entries but still takes the start of
// the index frame for a seal, and every Append then fails with "segment is
// sealed": the node fail-stops at every restart, forever. With the bytes
// zeroed, recovery stops at a zero frame header right after the last
// commit, as if the write had never started. The zeroed range lies after
// the last commit frame: nothing in it was acknowledged, and its pages were
// just written, so rewriting them needs no new space.
//
// If zeroing fails too, both errors are returned; openLogStore's repair
// (repairWALTail) handles what is left then (and a crash between the two
// writes).
func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.WritableFile.WriteAt(p, off)
	if err == nil && n < len(p) {
		// io.WriterAt requires an error for a short write; raft-wal would
		// take the whole batch as written.
		err = fmt.Errorf("raftstore: short write to segment file: %d of %d bytes at offset %d: %w", n, len(p), off, io.ErrShortWrite)
	}
	if err == nil || n <= 0 || (err == io.EOF && n == len(p)) {
		// raft-wal takes io.EOF with every byte written as a success.
		return n, err
	}
	if zerr := zeroFileRange(f.WritableFile, off, off+int64(n), false); zerr != nil {
		return n, errors.Join(err, fmt.Errorf("raftstore: zeroing the %d bytes a failed segment write left at offset %d: %w", n, off, zerr))
	}
	if serr := f.WritableFile.Sync(); serr != nil { // not counted: it acknowledges nothing
		return n, errors.Join(err, fmt.Errorf("raftstore: sync after zeroing the %d bytes a failed segment write left at offset %d: %w", n, off, serr))
	}
	return n, err
}

// zeroChunk bounds the buffer zeroFileRange writes from.
const zeroChunk = 1 << 20

// zeroFileRange writes zeros over [from, to) of f, front first (the frame
// header at from is zeroed by the first write). With skipZero, a chunk
// that already reads as zeros is left alone (no write: on a preallocated
// file it would convert unwritten extents for nothing).
func zeroFileRange(f interface {
	io.ReaderAt
	io.WriterAt
}, from, to int64, skipZero bool) error {
	zeros := make([]byte, min(to-from, zeroChunk))
	var buf []byte
	if skipZero {
		buf = make([]byte, len(zeros))
	}
	for off := from; off < to; {
		c := min(to-off, int64(len(zeros)))
		if skipZero {
			n, err := f.ReadAt(buf[:c], off)
			if err != nil && !(errors.Is(err, io.EOF) && int64(n) == c) {
				return err
			}
			if allZero(buf[:c]) {
				off += c
				continue
			}
		}
		if _, err := f.WriteAt(zeros[:c], off); err != nil {
			return err
		}
		off += c
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// raft-wal v0.4.0's segment format, unchanged in v0.4.1 (segment/format.go): a 32-byte file
// header, then 8-byte-aligned frames, each with an 8-byte header: type
// (byte 0), three reserved bytes, then the payload length (entry and index
// frames; the payload follows, padded to 8 bytes) or, for a commit frame,
// the Castagnoli CRC32 of every byte since the end of the previous commit
// frame (from offset 0 for the first one; a commit frame has no payload).
// A frame header of type 0 or an unknown type ends the frames.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

var walCRCTable = crc32.MakeTable(crc32.Castagnoli)

// walTailScan is what raft-wal's recovery of a tail segment
// (segment.Writer.recoverTail) decides about a file.
type walTailScan struct {
	// keep is where recovery puts the write offset: the end of the last
	// complete commit frame (0 if none). Every byte after it is from a
	// batch whose fsync never returned: never acknowledged.
	keep int64
	// indexes are the offsets of the index frame headers the scan met;
	// recoverTail takes the segment for sealed if there is any.
	indexes []int64
	// entriesAtIndex is the number of entry frames before the first index
	// frame; committed, the number before the commit frame keep ends.
	entriesAtIndex, committed int
}

// scanWALTail reads a segment file the way raft-wal v0.4.0's (and v0.4.1's)
// readThroughSegment and recoverTail do (checked against their code; the
// tests check the outcome against raft-wal itself).
func scanWALTail(f io.ReaderAt) (walTailScan, error) {
	type commit struct {
		off     int64
		crc     uint32
		entries int
	}
	var (
		s           walTailScan
		prev, final *commit
		entries     int
		hdr         [walFrameHeaderLen]byte
	)
scan:
	for off := int64(walFileHeaderLen); ; {
		n, err := f.ReadAt(hdr[:], off)
		if errors.Is(err, io.EOF) {
			if n < walFrameHeaderLen {
				break
			}
			err = nil
		}
		if err != nil {
			return s, fmt.Errorf("read frame header at offset %d: %w", off, err)
		}
		l := binary.LittleEndian.Uint32(hdr[4:8])
		size := int64(walFrameHeaderLen)
		switch hdr[0] {
		case walFrameEntry:
			entries++
			size += int64(l) + int64(-l&7)
		case walFrameIndex:
			if len(s.indexes) == 0 {
				s.entriesAtIndex = entries
			}
			s.indexes = append(s.indexes, off)
			size += int64(l) + int64(-l&7)
		case walFrameCommit:
			prev, final = final, &commit{off: off, crc: l, entries: entries}
		default: // zeros, a torn header, or not a frame: the end
			break scan
		}
		off += size
	}
	switch {
	case final == nil:
		s.keep = 0
	case final.entries < entries:
		// Entries after the last commit: that commit's batch was complete
		// (recoverTail does not check its CRC then).
		s.keep, s.committed = final.off+walFrameHeaderLen, final.entries
	default:
		var start int64
		if prev != nil {
			start = prev.off + walFrameHeaderLen
		}
		h := crc32.New(walCRCTable)
		if _, err := io.Copy(h, io.NewSectionReader(f, start, final.off-start)); err != nil {
			return s, fmt.Errorf("read the last batch (offsets %d to %d): %w", start, final.off, err)
		}
		switch {
		case h.Sum32() == final.crc:
			s.keep, s.committed = final.off+walFrameHeaderLen, final.entries
		case prev != nil:
			s.keep, s.committed = prev.off+walFrameHeaderLen, prev.entries
		}
	}
	return s, nil
}

// repairWALTail makes the tail segment of the WAL in dir appendable again
// when a partial seal left it looking sealed: an index frame after the
// last complete commit frame and no index frame before it (the
// countingFile.WriteAt case, written by an older binary or by a crash
// between the failed write and its zeroing). raft-wal would keep the
// entries up to that commit, discard the rest, yet refuse every append
// ("segment is sealed"). The repair zeroes the segment from the end of
// that commit to the end of the file: only bytes raft-wal's own recovery
// discards, none of them acknowledged. Recovery then keeps the same
// entries and the segment takes appends.
//
// A tail whose seal did commit (its last batch ends with the index frame
// and a valid commit) but whose meta data still says unsealed is the other
// case: the process stopped (kill -9, power) after that batch's fsync and
// before raft-wal's rotation, which runs after StoreLogs returns, recorded
// the seal and the next segment. raft-wal's open does not finish that
// rotation, so every append failed ("segment is sealed"). The repair
// records in the meta data what the rotation would have (completeRotation);
// no segment byte changes.
//
// It runs before raft-wal opens dir, with the data dir locked, and changes
// nothing in any other case (see the log lines).
func repairWALTail(dir string, log *slog.Logger) error {
	if !exists(filepath.Join(dir, metadb.FileName)) {
		return nil // a new WAL
	}
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	if cerr := meta.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftstore: read wal meta in %s: %w", dir, err)
	}
	if len(st.Segments) == 0 {
		return nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return nil // raft-wal starts a new segment
	}
	name := segment.FileName(tail)
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // raft-wal creates it
	}
	if err != nil {
		return fmt.Errorf("raftstore: wal tail repair: %w", err)
	}
	defer f.Close()
	ahead := new(atomic.Bool)
	ahead.Store(true)
	s, err := scanWALTail(&window{f: f, on: ahead}) // frame by frame: 8-byte reads from a window
	if err != nil {
		return fmt.Errorf("raftstore: wal tail repair: %s: %w", path, err)
	}
	if len(s.indexes) == 0 {
		return nil
	}
	if s.indexes[0] < s.keep {
		if len(s.indexes) != 1 || s.entriesAtIndex != s.committed || s.committed == 0 {
			log.Warn("wal: the tail segment is sealed by a committed index frame but the meta data does not say so, and not as a rotation leaves it; raft-wal will refuse appends to it",
				"segment", name, "index_frames", s.indexes, "committed_end", s.keep, "entries_before_index", s.entriesAtIndex, "committed_entries", s.committed)
			return nil
		}
		return completeRotation(dir, tail, s, log)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("raftstore: wal tail repair: %w", err)
	}
	if err := zeroFileRange(f, s.keep, fi.Size(), true); err != nil {
		return fmt.Errorf("raftstore: wal tail repair: zero %s from offset %d: %w", path, s.keep, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("raftstore: wal tail repair: sync %s: %w", path, err)
	}
	log.Warn("wal: repaired the tail segment: a partial seal (an index frame with no commit after it, e.g. a write cut short by a full disk) had left it refusing appends; zeroed the unacknowledged bytes after its last commit",
		"segment", name, "zeroed_from", s.keep, "zeroed_to", fi.Size(), "index_frame", s.indexes[len(s.indexes)-1])
	return nil
}

// completeRotation records in dir's meta data the rotation raft-wal did not
// get to after the tail segment's sealing batch committed: the tail sealed
// (its index block at the committed index frame, its last entry), and a
// new empty tail after it, which raft-wal creates when it opens dir (as it
// does when a crash comes between recording a segment and creating its
// file). This is what raft-wal's rotateSegmentLocked commits.
func completeRotation(dir string, tail types.SegmentInfo, s walTailScan, log *slog.Logger) error {
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	if err != nil {
		meta.Close()
		return fmt.Errorf("raftstore: wal tail repair: read meta: %w", err)
	}
	last := len(st.Segments) - 1
	if last < 0 || st.Segments[last].ID != tail.ID {
		meta.Close()
		return fmt.Errorf("raftstore: wal tail repair: the meta data changed under the repair")
	}
	now := time.Now()
	sealed := st.Segments[last]
	sealed.SealTime = now
	sealed.IndexStart = uint64(s.indexes[0]) + walFrameHeaderLen
	sealed.MaxIndex = sealed.BaseIndex + uint64(s.committed) - 1
	next := types.SegmentInfo{
		ID:         st.NextSegmentID,
		BaseIndex:  sealed.MaxIndex + 1,
		MinIndex:   sealed.MaxIndex + 1,
		Codec:      sealed.Codec,
		SizeLimit:  sealed.SizeLimit,
		CreateTime: now,
	}
	st.Segments[last] = sealed
	st.Segments = append(st.Segments, next)
	st.NextSegmentID++
	err = meta.CommitState(st)
	if cerr := meta.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftstore: wal tail repair: record the seal: %w", err)
	}
	log.Warn("wal: repaired the tail segment: its seal had committed but the rotation after it had not been recorded (the process stopped in between), so raft-wal refused appends; recorded the seal and a new tail segment (no segment data changed)",
		"segment", segment.FileName(sealed), "last_index", sealed.MaxIndex, "index_start", sealed.IndexStart, "new_segment", segment.FileName(next))
	return nil
}
