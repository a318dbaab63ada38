package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// machine returns a machine with n locks held (half through request_ids),
// a session holding one, and resources written with op_ids: about 200
// bytes of snapshot per lock.
func machine(t testing.TB, n int) *state.Machine {
	t.Helper()
	m := state.NewWithConfig(state.DefaultConfig())
	now := int64(time.Second)
	apply := func(c state.Command) state.Result {
		c.Now = now
		r := m.Apply(c)
		if r.Err != nil {
			t.Fatalf("%+v: %v", c, r.Err)
		}
		return r
	}
	apply(state.Command{Op: state.OpConfig, Config: state.DefaultConfig(), ClusterID: "test-cluster"})
	s := apply(state.Command{Op: state.OpSessionOpen, TTL: time.Minute, RequestID: "open-1"}).Session.ID
	apply(state.Command{Op: state.OpAcquire, Name: "sess-lock", Owner: "s", Session: s, Seq: 1})
	for i := range n {
		name := "lock/" + strconv.Itoa(i)
		c := state.Command{Op: state.OpAcquire, Name: name, Owner: "owner-" + strconv.Itoa(i%7), TTL: time.Hour}
		if i%2 == 0 {
			c.RequestID = "req-" + strconv.Itoa(i)
		}
		l := apply(c).Lease
		if i%3 == 0 {
			apply(state.Command{Op: state.OpWrite, Name: "res/" + strconv.Itoa(i), Token: l.Token, Value: []byte("value " + strconv.Itoa(i)), OpID: "op-" + strconv.Itoa(i)})
		}
	}
	return m
}

func header(m *state.Machine) Header {
	return Header{ClusterID: m.ClusterID(), NodeID: "n1", Role: "leader", AppliedIndex: 42, Term: 3, LastToken: m.LastToken(),
		ServerTimeNS: m.Now(), WallUnixMS: 1_700_000_000_000, Version: "test"}
}

func backupBytes(t testing.TB, m *state.Machine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, header(m), m.SnapshotView()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// largestWrite records the size of every Write.
type largestWrite struct {
	bytes.Buffer
	largest, writes int
}

func (w *largestWrite) Write(p []byte) (int, error) {
	w.largest = max(w.largest, len(p))
	w.writes++
	return w.Buffer.Write(p)
}

// liveHeap discards what is written and records the largest live heap
// (after a GC) seen at a write.
type liveHeap struct {
	ms     runtime.MemStats
	peak   uint64
	writes int
}

func (l *liveHeap) Write(p []byte) (int, error) {
	if l.writes++; l.writes%4 != 1 {
		return len(p), nil
	}
	runtime.GC()
	runtime.ReadMemStats(&l.ms)
	l.peak = max(l.peak, l.ms.HeapAlloc)
	return len(p), nil
}

// A big state round-trips through a backup file: the header as written
// (format and state format filled in), the state's exact snapshot bytes,
// a trailer that counts them; the file is written in pieces of at most a
// frame (streamed, never the whole state in one buffer), and a machine
// restored from it snapshots identically.
func TestRoundTripBigStateStreamed(t *testing.T) {
	m := machine(t, 12000) // over 16 frames of records
	var snap bytes.Buffer
	if err := m.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if snap.Len() < 16*FrameSize {
		t.Fatalf("state of %d bytes: want more than 16 frames", snap.Len())
	}
	var w largestWrite
	h := header(m)
	if err := Write(&w, h, m.SnapshotView()); err != nil {
		t.Fatal(err)
	}
	if w.largest > FrameSize+4+64 {
		t.Fatalf("a %d-byte state was written with a %d-byte write: not streamed", snap.Len(), w.largest)
	}
	// Memory: while the file is written, what is live besides the view is
	// a frame or so of the encoding, not a buffer of it all (measured after
	// a GC at every write, so garbage does not count).
	view := m.SnapshotView()
	peak := &liveHeap{}
	runtime.GC()
	runtime.ReadMemStats(&peak.ms)
	base := peak.ms.HeapAlloc
	if err := Write(peak, h, view); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(view)
	// Streamed: ~150 KB (a frame in the bufio writer, one in the
	// snapshot's encoder); buffered whole: about twice the state.
	if peak.peak > base && peak.peak-base > uint64(snap.Len())/2 {
		t.Fatalf("while a %d-byte state was written, %d more bytes were live: more than half of it, not streamed", snap.Len(), peak.peak-base)
	}
	file := w.Bytes()
	if !bytes.HasPrefix(file, []byte(Magic)) {
		t.Fatalf("file starts %q", file[:20])
	}
	r, err := Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want := h
	want.Format, want.StateFormat = FormatVersion, state.SnapshotFormat
	if r.Header() != want {
		t.Fatalf("header %+v, want %+v", r.Header(), want)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, snap.Bytes()) {
		t.Fatalf("state read back differs: %d bytes, want %d", len(got), snap.Len())
	}
	tr, err := r.Trailer()
	if err != nil || tr.StateBytes != int64(snap.Len()) || len(tr.SHA256) != 64 {
		t.Fatalf("trailer %+v, %v; want %d state bytes", tr, err, snap.Len())
	}
	r2, err := Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	m2 := state.New()
	if err := m2.Restore(r2); err != nil {
		t.Fatal(err)
	}
	var snap2 bytes.Buffer
	m2.Snapshot(&snap2)
	if !bytes.Equal(snap2.Bytes(), snap.Bytes()) || m2.LastToken() != m.LastToken() || m2.ClusterID() != "test-cluster" {
		t.Fatal("the restored machine differs")
	}
	h2, tr2, err := Verify(bytes.NewReader(file))
	if err != nil || h2 != want || tr2 != tr {
		t.Fatalf("Verify = %+v %+v %v", h2, tr2, err)
	}
}

// region is a named byte range of a backup file.
type region struct {
	name       string
	start, end int // [start, end)
}

// regions splits a backup file into its parts: magic, header, each
// frame's length and data, the end frame, the trailer (and its newline).
func regions(t testing.TB, file []byte) []region {
	t.Helper()
	var out []region
	off := len(Magic)
	out = append(out, region{"magic", 0, off})
	nl := bytes.IndexByte(file[off:], '\n')
	out = append(out, region{"header", off, off + nl}, region{"header newline", off + nl, off + nl + 1})
	off += nl + 1
	for i := 0; ; i++ {
		size := int(binary.BigEndian.Uint32(file[off:]))
		if size == 0 {
			out = append(out, region{"end frame", off, off + 4})
			off += 4
			break
		}
		out = append(out, region{fmt.Sprintf("frame %d length", i), off, off + 4}, region{fmt.Sprintf("frame %d data", i), off + 4, off + 4 + size})
		off += 4 + size
	}
	out = append(out, region{"trailer", off, len(file) - 1}, region{"trailer newline", len(file) - 1, len(file)})
	return out
}

// positions are the offsets tested in r: every byte of a small region,
// else its first, second, middle, last two bytes.
func (r region) positions() []int {
	if r.end-r.start <= 64 {
		var out []int
		for i := r.start; i < r.end; i++ {
			out = append(out, i)
		}
		return out
	}
	return []int{r.start, r.start + 1, (r.start + r.end) / 2, r.end - 2, r.end - 1}
}

func fileErr(err error) *FileError {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}

// Every byte flipped, in every region of a file (all bytes of a small
// file; the edges and middle of every region of a big one), is refused
// by Verify and by reading the state through a Reader: a *FileError that
// names an offset, never a file accepted.
func TestFlippedByteRefusedInEveryRegion(t *testing.T) {
	for _, size := range []int{3, 2000} {
		file := backupBytes(t, machine(t, size))
		regs := regions(t, file)
		if size > 3 && len(regs) < 10 {
			t.Fatalf("want several frames, got regions %v", regs)
		}
		for _, reg := range regs {
			for _, pos := range reg.positions() {
				masks := []byte{0x01, 0x80, 0xff}
				if size > 3 {
					masks = masks[:1] // the small file tries every mask at every byte
				}
				for _, mask := range masks {
					bad := bytes.Clone(file)
					bad[pos] ^= mask
					_, _, err := Verify(bytes.NewReader(bad))
					fe := fileErr(err)
					if fe == nil {
						t.Fatalf("state of %d locks, %s, byte %d ^%#x: Verify = %v, want a *FileError", size, reg.name, pos, mask, err)
					}
					if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrFormat) {
						t.Fatalf("%s byte %d: %v", reg.name, pos, err)
					}
					if r, err := Read(bytes.NewReader(bad)); err == nil {
						if _, err := io.Copy(io.Discard, r); fileErr(err) == nil {
							t.Fatalf("%s byte %d ^%#x: reading the state ended with %v, want a *FileError", reg.name, pos, mask, err)
						}
					}
				}
			}
		}
	}
}

// A flipped byte of the state (or the header) is a checksum mismatch,
// reported as such.
func TestFlippedStateByteIsChecksumMismatch(t *testing.T) {
	file := backupBytes(t, machine(t, 10))
	for _, reg := range regions(t, file) {
		if reg.name != "frame 0 data" && reg.name != "header" {
			continue
		}
		bad := bytes.Clone(file)
		bad[(reg.start+reg.end)/2] ^= 0x01 // stays valid JSON text in most places; the checksum still catches it
		_, _, err := Verify(bytes.NewReader(bad))
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", reg.name, err)
		}
		if reg.name == "frame 0 data" && !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("%s: %v, want a checksum mismatch", reg.name, err)
		}
	}
}

// A file cut at any byte (every byte of a small file; in every region of a
// big one) is refused as truncated: never accepted, never another error.
func TestTruncatedAtEveryRegion(t *testing.T) {
	for _, size := range []int{3, 2000} {
		file := backupBytes(t, machine(t, size))
		cuts := []int{}
		if size == 3 {
			for i := range len(file) {
				cuts = append(cuts, i)
			}
		} else {
			for _, reg := range regions(t, file) {
				cuts = append(cuts, reg.positions()...)
			}
		}
		for _, cut := range cuts {
			_, _, err := Verify(bytes.NewReader(file[:cut]))
			if !errors.Is(err, ErrTruncated) || fileErr(err) == nil {
				t.Fatalf("state of %d locks cut at byte %d of %d: Verify = %v, want ErrTruncated", size, cut, len(file), err)
			}
		}
	}
}

// Bytes after the trailer are refused (a file concatenated with another,
// or a partial overwrite).
func TestBytesAfterTrailerRefused(t *testing.T) {
	file := backupBytes(t, machine(t, 3))
	for _, extra := range []string{"x", "\n", string(file)} {
		_, _, err := Verify(bytes.NewReader(append(bytes.Clone(file), extra...)))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "after the trailer") {
			t.Fatalf("%d extra bytes: %v, want ErrCorrupt naming bytes after the trailer", len(extra), err)
		}
	}
	if _, _, err := Verify(bytes.NewReader(file)); err != nil {
		t.Fatal(err)
	}
}

// The refusals name what is wrong: not a backup, another format, an
// oversized frame.
func TestRefusalsNameTheProblem(t *testing.T) {
	file := backupBytes(t, machine(t, 3))
	cases := map[string]struct {
		data []byte
		kind error
		msg  string
	}{
		"not a backup":  {[]byte("{\"format\":\"fence-state/1\"}"), ErrCorrupt, "not a Fence backup file"},
		"format 2":      {append([]byte("FENCE-BACKUP 2\n"), file[len(Magic):]...), ErrFormat, "FENCE-BACKUP 2"},
		"empty":         {nil, ErrTruncated, "magic"},
		"huge frame":    {hugeFrame(file), ErrCorrupt, "frame of"},
		"header format": {bytes.Replace(file, []byte(`"format":1`), []byte(`"format":9`), 1), ErrFormat, "header format 9"},
	}
	for name, c := range cases {
		_, _, err := Verify(bytes.NewReader(c.data))
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v naming %q", name, err, c.kind, c.msg)
		}
	}
}

func hugeFrame(file []byte) []byte {
	bad := bytes.Clone(file)
	off := len(Magic) + bytes.IndexByte(file[len(Magic):], '\n') + 1
	binary.BigEndian.PutUint32(bad[off:], MaxFrame+1)
	return bad
}

var _ = fence.Token(0)

// F3: the header and trailer lines are accepted only as Write writes them,
// byte for byte. Every letter of the trailer in the other case (a key
// name: encoding/json matches keys case-insensitively; the hex digest), a
// "\r\n" line end, spacing and a duplicate key are refused; so is a header
// whose key changed case even with the checksum recomputed over it.
func TestHeaderAndTrailerExactBytes(t *testing.T) {
	file := backupBytes(t, machine(t, 3))
	ts := bytes.LastIndex(file, []byte(`{"state_bytes":`))
	if ts < 0 {
		t.Fatal("no trailer found")
	}
	refused := func(what string, bad []byte) {
		t.Helper()
		_, _, err := Verify(bytes.NewReader(bad))
		if !errors.Is(err, ErrCorrupt) || fileErr(err) == nil {
			t.Errorf("%s: Verify = %v, want ErrCorrupt", what, err)
		}
	}
	letters := 0
	for pos := ts; pos < len(file)-1; pos++ {
		c := file[pos] | 0x20
		if c < 'a' || c > 'z' {
			continue
		}
		letters++
		bad := bytes.Clone(file)
		bad[pos] ^= 0x20
		refused(fmt.Sprintf("trailer byte %d %q -> %q", pos-ts, file[pos], bad[pos]), bad)
	}
	if letters < len("state_bytes")+len("sha256") {
		t.Fatalf("only %d letters in the trailer %q", letters, file[ts:])
	}
	trailer := file[ts : len(file)-1]
	for what, line := range map[string]string{
		"CRLF":          string(trailer) + "\r",
		"space":         strings.Replace(string(trailer), `:`, `: `, 1),
		"duplicate key": strings.Replace(string(trailer), `{`, `{"state_bytes":0,`, 1),
		"uppercase key": strings.Replace(string(trailer), `"sha256"`, `"SHA256"`, 1),
	} {
		refused("trailer "+what, append(bytes.Clone(file[:ts]), line+"\n"...))
	}

	// The header's key in another case, the checksum recomputed: refused
	// by the header check itself.
	var tr Trailer
	if err := json.Unmarshal(trailer, &tr); err != nil {
		t.Fatal(err)
	}
	body := bytes.Replace(file[:ts], []byte(`"node_id":`), []byte(`"NODE_ID":`), 1)
	if bytes.Equal(body, file[:ts]) {
		t.Fatal("no node_id key in the header")
	}
	sum := sha256.Sum256(body)
	tb, _ := json.Marshal(Trailer{StateBytes: tr.StateBytes, SHA256: hex.EncodeToString(sum[:])})
	bad := append(body, append(tb, '\n')...)
	_, _, err := Verify(bytes.NewReader(bad))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bad header") {
		t.Errorf("header key NODE_ID with the checksum recomputed: Verify = %v, want ErrCorrupt naming the header", err)
	}
	// the same rebuild without the change is accepted (the rebuild is right)
	sum = sha256.Sum256(file[:ts])
	tb, _ = json.Marshal(Trailer{StateBytes: tr.StateBytes, SHA256: hex.EncodeToString(sum[:])})
	if _, _, err := Verify(bytes.NewReader(append(bytes.Clone(file[:ts]), append(tb, '\n')...))); err != nil {
		t.Fatalf("the file rebuilt unchanged: %v", err)
	}
}
