package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"unicode"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// Magic is the first line of every backup file (format 1).
const Magic = "FENCE-BACKUP 1\n"

// FormatVersion is the backup file format this package writes and reads.
const FormatVersion = 1

// MaxFrame bounds one frame of state bytes (Write writes at most
// FrameSize); a longer frame is refused as corrupt, before anything is
// allocated for it.
const (
	FrameSize = 64 << 10
	MaxFrame  = 1 << 20
)

// maxLine bounds the header and trailer lines.
const maxLine = 64 << 10

// Header is what a backup records about where and when it was taken: the
// file's second line.
type Header struct {
	Format       int         `json:"format"`         // FormatVersion
	ClusterID    string      `json:"cluster_id"`     // the state's cluster id ("" before one was recorded)
	NodeID       string      `json:"node_id"`        // the node that took it
	Role         string      `json:"role"`           // its raft role then (leader, follower)
	AppliedIndex uint64      `json:"applied_index"`  // the raft index of the state backed up
	Term         uint64      `json:"term"`           // the raft term then
	LastToken    fence.Token `json:"last_token"`     // the token counter: the last token issued in the state
	ServerTimeNS int64       `json:"server_time_ns"` // the state's server time
	WallUnixMS   int64       `json:"wall_unix_ms"`   // the node's wall clock when the state was copied
	Version      string      `json:"version"`        // the fence version that wrote it
	StateFormat  string      `json:"state_format"`   // the state snapshot format (fence-state/2; fence-state/1 is read)
}

// Trailer is the file's last line.
type Trailer struct {
	StateBytes int64  `json:"state_bytes"` // bytes of state, without the framing
	SHA256     string `json:"sha256"`      // hex SHA-256 of every byte before the trailer
}

// ErrCorrupt and ErrTruncated are wrapped by the *FileError of a refused
// file; ErrFormat by one of a format this package does not read.
var (
	ErrCorrupt   = errors.New("backup file is corrupt")
	ErrTruncated = errors.New("backup file is truncated")
	ErrFormat    = errors.New("backup file format not supported")
)

// FileError is a refused backup file: Kind (ErrCorrupt, ErrTruncated or
// ErrFormat) at byte Offset, and what is wrong.
type FileError struct {
	Kind   error
	Offset int64
	Detail string
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%v: at byte %d: %s", e.Kind, e.Offset, e.Detail)
}

func (e *FileError) Unwrap() error { return e.Kind }

// HeaderError is a header value no backup this fence reads can have, found
// even when the checksum matches (it covers what the writer wrote, not
// whether that was sane): Field is its JSON name, Got the value, Want what
// it must be. Kind is ErrFormat (a state_format this fence does not read)
// or ErrCorrupt. A *FileError's Kind is the *HeaderError, which unwraps to
// Kind.
type HeaderError struct {
	Kind  error
	Field string
	Got   string
	Want  string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("%v: header field %s is %s, want %s", e.Kind, e.Field, e.Got, e.Want)
}

func (e *HeaderError) Unwrap() error { return e.Kind }

// Bounds of header values (checkHeader).
const (
	MaxIndex        = 1 << 53 // applied_index and term
	MaxServerTimeNS = 1 << 62 // server_time_ns
)

func knownRole(r string) bool { return r == "leader" || r == "follower" || r == "candidate" }

// validNodeID: a node id as fence serve takes one (cluster.ValidateID).
func validNodeID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool {
		return r == ',' || r == '=' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	})
}

// checkHeader refuses header values a backup written by fence backup
// cannot have.
func checkHeader(h Header) *HeaderError {
	bad := func(kind error, field string, got any, want string) *HeaderError {
		return &HeaderError{Kind: kind, Field: field, Got: fmt.Sprint(got), Want: want}
	}
	switch {
	case !state.ReadsSnapshotFormat(h.StateFormat):
		return bad(ErrFormat, "state_format", fmt.Sprintf("%q", h.StateFormat), fmt.Sprintf("%q or \"fence-state/1\" (the state formats this fence reads)", state.SnapshotFormat))
	case h.AppliedIndex == 0:
		return bad(ErrCorrupt, "applied_index", h.AppliedIndex, "at least 1 (a node's state has applied its first raft entry)")
	case h.Term == 0:
		return bad(ErrCorrupt, "term", h.Term, "at least 1 (raft terms start at 1)")
	case h.AppliedIndex > MaxIndex:
		return bad(ErrCorrupt, "applied_index", h.AppliedIndex, "at most 2^53 (no raft log reaches it; a restore starts its log after it)")
	case h.Term > MaxIndex:
		return bad(ErrCorrupt, "term", h.Term, "at most 2^53")
	case h.ServerTimeNS < 0:
		return bad(ErrCorrupt, "server_time_ns", h.ServerTimeNS, "at least 0 (server time starts at 0)")
	case h.ServerTimeNS > MaxServerTimeNS:
		return bad(ErrCorrupt, "server_time_ns", h.ServerTimeNS, "at most 2^62 ns, 146 years (leases are timed by adding to it)")
	case !knownRole(h.Role):
		return bad(ErrCorrupt, "role", fmt.Sprintf("%q", h.Role), `"leader", "follower" or "candidate"`)
	case !validNodeID(h.NodeID):
		return bad(ErrCorrupt, "node_id", fmt.Sprintf("%q", h.NodeID), "1 to 128 bytes, no spaces, control characters, ',' or '='")
	case h.WallUnixMS <= 0:
		return bad(ErrCorrupt, "wall_unix_ms", h.WallUnixMS, "above 0 (the backing-up node's wall clock, unix ms)")
	}
	return nil
}

// Write writes a backup file of view to w: magic, h (Format and, when
// empty, StateFormat are filled in), the state streamed in frames, and the
// trailer. It buffers one frame, never the whole state; the view may be
// written while the machine it was copied from goes on applying.
func Write(w io.Writer, h Header, view *state.SnapshotView) error {
	if view == nil {
		return fence.Invalid("view", "not nil", "nil")
	}
	h.Format = FormatVersion
	if h.StateFormat == "" {
		h.StateFormat = view.Format()
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("backup: header: %w", err)
	}
	sum := sha256.New()
	bw := bufio.NewWriterSize(w, FrameSize+4)
	out := io.MultiWriter(bw, sum)
	if _, err := io.WriteString(out, Magic); err != nil {
		return err
	}
	if _, err := out.Write(append(hb, '\n')); err != nil {
		return err
	}
	fw := &frameWriter{w: out}
	n, err := view.WriteTo(fw)
	if err != nil {
		return fmt.Errorf("backup: state: %w", err)
	}
	if err := fw.end(); err != nil {
		return err
	}
	tb, _ := json.Marshal(Trailer{StateBytes: n, SHA256: hex.EncodeToString(sum.Sum(nil))})
	if _, err := bw.Write(append(tb, '\n')); err != nil {
		return err
	}
	return bw.Flush()
}

// frameWriter frames what is written to it: each Write becomes frames of
// at most FrameSize bytes.
type frameWriter struct {
	w   io.Writer
	hdr [4]byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), FrameSize)
		binary.BigEndian.PutUint32(f.hdr[:], uint32(c))
		if _, err := f.w.Write(f.hdr[:]); err != nil {
			return n, err
		}
		if _, err := f.w.Write(p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}

func (f *frameWriter) end() error {
	_, err := f.w.Write([]byte{0, 0, 0, 0})
	return err
}

// Reader reads a backup file: Read checks the magic and the header, Reader's
// Read returns the state bytes, and Trailer checks the rest.
type Reader struct {
	r       *bufio.Reader
	sum     hash.Hash
	off     int64 // bytes of the file consumed
	header  Header
	left    uint32 // bytes left in the current frame
	state   int64  // state bytes returned
	ended   bool   // the zero frame was read
	trailer Trailer
	err     error // sticky: io.EOF once the trailer matched
}

// Read reads the magic line and the header from r. The header is not
// trusted until the trailer has been checked (Reader.Trailer, or the state
// read to io.EOF).
func Read(r io.Reader) (*Reader, error) {
	br := &Reader{r: bufio.NewReaderSize(r, FrameSize+4), sum: sha256.New()}
	magic := make([]byte, len(Magic))
	n, err := io.ReadFull(br.r, magic)
	br.consume(magic[:n])
	if err != nil {
		if bytes.HasPrefix([]byte(Magic), magic[:n]) {
			return nil, br.fail(ErrTruncated, 0, fmt.Sprintf("the file ends in the magic line (%d bytes)", n))
		}
		return nil, br.fail(ErrCorrupt, 0, fmt.Sprintf("not a Fence backup file: it starts with %q, want %q", magic[:n], Magic))
	}
	if string(magic) != Magic {
		if bytes.HasPrefix(magic, []byte("FENCE-BACKUP ")) {
			return nil, br.fail(ErrFormat, 0, fmt.Sprintf("magic line %q: this fence reads %q", magic, Magic))
		}
		return nil, br.fail(ErrCorrupt, 0, fmt.Sprintf("not a Fence backup file: it starts with %q, want %q", magic, Magic))
	}
	start := br.off
	line, err := br.line("header")
	if err != nil {
		return nil, err
	}
	var h Header
	if err := decodeExact(line, &h); err != nil {
		return nil, br.fail(ErrCorrupt, start, fmt.Sprintf("bad header: %v", err))
	}
	switch {
	case h.Format != FormatVersion:
		return nil, br.fail(ErrFormat, start, fmt.Sprintf("header format %d: this fence reads format %d", h.Format, FormatVersion))
	case h.StateFormat == "":
		return nil, br.fail(ErrCorrupt, start, "bad header: no state_format")
	case h.LastToken > fence.MaxTokenJSONInt:
		return nil, br.fail(ErrCorrupt, start, fmt.Sprintf("bad header: last_token %d above the largest token %d", h.LastToken, uint64(fence.MaxTokenJSONInt)))
	}
	if he := checkHeader(h); he != nil {
		return nil, br.fail(he, start, "bad header")
	}
	br.header = h
	return br, nil
}

// Header is the file's header.
func (r *Reader) Header() Header { return r.header }

func (r *Reader) consume(b []byte) {
	r.sum.Write(b)
	r.off += int64(len(b))
}

func (r *Reader) fail(kind error, off int64, detail string) error {
	r.err = &FileError{Kind: kind, Offset: off, Detail: detail}
	return r.err
}

// decodeExact decodes line (a header or trailer line, without its "\n")
// into v and accepts it only if it is byte for byte what Write writes for
// the values read (json.Marshal of v): encoding/json alone would accept
// keys in another case, duplicate keys, other spacing or escaping, and a
// "\r" before the "\n" — bytes the checksum does not cover (the trailer)
// or that would change without changing what is read.
func decodeExact(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	want, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(line, want) {
		return fmt.Errorf("the line %q is not the one its values encode to, %q (key case, spacing, escaping or line end changed)", clip(line), clip(want))
	}
	return nil
}

// clip shortens b for a message.
func clip(b []byte) []byte {
	if len(b) > 300 {
		return append(b[:300:300], "..."...)
	}
	return b
}

// line reads one line of at most maxLine bytes, without its "\n", hashing it.
func (r *Reader) line(what string) ([]byte, error) {
	start := r.off
	var b []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxLine {
			return nil, r.fail(ErrCorrupt, start, fmt.Sprintf("the %s line is longer than %d bytes", what, maxLine))
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		r.off += int64(len(b))
		if err == io.EOF && len(b) == 0 {
			return nil, r.fail(ErrTruncated, start, fmt.Sprintf("the file ends before the %s line", what))
		}
		if err == io.EOF {
			return nil, r.fail(ErrTruncated, start, fmt.Sprintf("the file ends in the %s line (%d bytes, no end of line)", what, len(b)))
		}
		return nil, r.fail(err, start, fmt.Sprintf("reading the %s", what))
	}
	if what != "trailer" {
		r.consume(b)
	} else {
		r.off += int64(len(b))
	}
	return b[:len(b)-1], nil
}

// Read reads state bytes. It returns io.EOF only once the whole file has
// been read and the trailer matched; a bad file ends in a *FileError.
func (r *Reader) Read(p []byte) (int, error) {
	for r.left == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.ended {
			r.finish()
			continue
		}
		var hdr [4]byte
		start := r.off
		n, err := io.ReadFull(r.r, hdr[:])
		r.consume(hdr[:n])
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return 0, r.fail(ErrTruncated, start, fmt.Sprintf("the file ends in the state, after %d state bytes (no end frame)", r.state))
			}
			return 0, r.fail(err, start, "reading the state")
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > MaxFrame {
			return 0, r.fail(ErrCorrupt, start, fmt.Sprintf("frame of %d bytes, more than %d", size, MaxFrame))
		}
		if size == 0 {
			r.ended = true
			continue
		}
		r.left = size
	}
	if len(p) > int(r.left) {
		p = p[:r.left]
	}
	start := r.off
	n, err := r.r.Read(p)
	r.consume(p[:n])
	r.left -= uint32(n)
	r.state += int64(n)
	if err != nil && n == 0 {
		if err == io.EOF {
			return 0, r.fail(ErrTruncated, start, fmt.Sprintf("the file ends inside a frame, %d bytes short (truncated, or the frame's length is corrupt)", r.left))
		}
		return 0, r.fail(err, start, "reading the state")
	}
	return n, nil
}

// finish reads and checks the trailer and that nothing follows it; r.err
// becomes io.EOF (all good) or the refusal.
func (r *Reader) finish() {
	want := hex.EncodeToString(r.sum.Sum(nil))
	start := r.off
	line, err := r.line("trailer")
	if err != nil {
		return
	}
	var t Trailer
	if err := decodeExact(line, &t); err != nil {
		r.fail(ErrCorrupt, start, fmt.Sprintf("bad trailer: %v", err))
		return
	}
	if t.SHA256 != want {
		r.fail(ErrCorrupt, start, fmt.Sprintf("checksum mismatch: the file's bytes hash to sha256 %s, the trailer records %s", want, t.SHA256))
		return
	}
	if t.StateBytes != r.state {
		r.fail(ErrCorrupt, start, fmt.Sprintf("the trailer records %d state bytes, the file holds %d", t.StateBytes, r.state))
		return
	}
	var extra [512]byte
	n, _ := io.ReadFull(r.r, extra[:])
	if n > 0 {
		more, _ := io.Copy(io.Discard, r.r)
		r.fail(ErrCorrupt, r.off, fmt.Sprintf("%d bytes after the trailer", int64(n)+more))
		return
	}
	r.trailer = t
	r.err = io.EOF
}

// Trailer reads what is left of the state (discarding it) and checks the
// trailer; it returns the trailer, or the file's refusal.
func (r *Reader) Trailer() (Trailer, error) {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return Trailer{}, err
	}
	return r.trailer, nil
}

// Verify reads a whole backup file and checks it: its header and trailer,
// or the refusal (*FileError).
func Verify(r io.Reader) (Header, Trailer, error) {
	br, err := Read(r)
	if err != nil {
		return Header{}, Trailer{}, err
	}
	t, err := br.Trailer()
	if err != nil {
		return br.header, Trailer{}, err
	}
	return br.header, t, nil
}
