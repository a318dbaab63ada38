package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withHeader is file (a backup Write wrote) with its header rewritten by
// edit and the trailer's checksum recomputed: a file whose checksum
// matches, as one written by a writer that wrote those values.
func withHeader(t *testing.T, file []byte, edit func(*Header)) []byte {
	t.Helper()
	start := len(Magic)
	end := start + bytes.IndexByte(file[start:], '\n')
	var h Header
	if err := json.Unmarshal(file[start:end], &h); err != nil {
		t.Fatal(err)
	}
	edit(&h)
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	ts := bytes.LastIndex(file, []byte(`{"state_bytes":`))
	var tr Trailer
	if err := json.Unmarshal(bytes.TrimSuffix(file[ts:], []byte("\n")), &tr); err != nil {
		t.Fatal(err)
	}
	body := append(append(append([]byte{}, file[:start]...), append(hb, '\n')...), file[end+1:ts]...)
	sum := sha256.Sum256(body)
	tb, _ := json.Marshal(Trailer{StateBytes: tr.StateBytes, SHA256: hex.EncodeToString(sum[:])})
	return append(body, append(tb, '\n')...)
}

// F4: a header whose values no backup of this fence can have is refused
// even with the checksum recomputed over it (a *HeaderError naming the
// field, wrapping ErrFormat for a state_format this fence does not read,
// else ErrCorrupt), and a restore from it writes nothing — in particular
// wall_unix_ms 0 no longer slips past the "clock is behind" check. A server
// time below the state's is refused by Restore (the header disagrees with
// the state). Planted, each seen red: checkHeader returning nil (every case
// but server_time_ns below the state's), the server-time cross-check in
// loadState removed (that case). Header values no backup can have (an
// applied_index or term of 2^64-1, a server time of 2^63-1 ns, an unknown
// role, an empty node id) were restored, after which fence serve panicked
// or granted one lock to two owners (the outside attack).
func TestHeaderValuesChecked(t *testing.T) {
	m := machine(t, 3)
	if m.Now() <= 0 {
		t.Fatalf("the state's server time is %d: want above 0 for the cross-check", m.Now())
	}
	file := backupBytes(t, m)
	if _, _, err := Verify(bytes.NewReader(withHeader(t, file, func(*Header) {}))); err != nil {
		t.Fatalf("the file rebuilt unchanged: %v", err)
	}
	for _, c := range []struct {
		field string
		kind  error
		edit  func(*Header)
		read  bool // Verify refuses it (else only Restore, against the state)
	}{
		{"state_format", ErrFormat, func(h *Header) { h.StateFormat = "json/1" }, true},
		{"state_format", ErrFormat, func(h *Header) { h.StateFormat = "fence-state/9" }, true},
		{"applied_index", ErrCorrupt, func(h *Header) { h.AppliedIndex = 0 }, true},
		{"term", ErrCorrupt, func(h *Header) { h.Term = 0 }, true},
		{"server_time_ns", ErrCorrupt, func(h *Header) { h.ServerTimeNS = -5 }, true},
		{"applied_index", ErrCorrupt, func(h *Header) { h.AppliedIndex = 1<<64 - 1 }, true},
		{"applied_index", ErrCorrupt, func(h *Header) { h.AppliedIndex = MaxIndex + 1 }, true},
		{"term", ErrCorrupt, func(h *Header) { h.Term = 1<<64 - 1 }, true},
		{"server_time_ns", ErrCorrupt, func(h *Header) { h.ServerTimeNS = 1<<63 - 1 }, true},
		{"server_time_ns", ErrCorrupt, func(h *Header) { h.ServerTimeNS = MaxServerTimeNS + 1 }, true},
		{"role", ErrCorrupt, func(h *Header) { h.Role = "evil" }, true},
		{"node_id", ErrCorrupt, func(h *Header) { h.NodeID = "" }, true},
		{"node_id", ErrCorrupt, func(h *Header) { h.NodeID = "a,b" }, true},
		{"wall_unix_ms", ErrCorrupt, func(h *Header) { h.WallUnixMS = 0 }, true},
		{"wall_unix_ms", ErrCorrupt, func(h *Header) { h.WallUnixMS = -1 }, true},
		{"server_time_ns", ErrCorrupt, func(h *Header) { h.ServerTimeNS = m.Now() - 1 }, false},
	} {
		bad := withHeader(t, file, c.edit)
		check := func(what string, err error) {
			t.Helper()
			var he *HeaderError
			if !errors.Is(err, c.kind) || !errors.As(err, &he) || he.Field != c.field || !strings.Contains(err.Error(), c.field) || fileErr(err) == nil {
				t.Errorf("%s %s: %v; want a *HeaderError naming %s, kind %v", what, c.field, err, c.field, c.kind)
			}
		}
		if _, _, err := Verify(bytes.NewReader(bad)); c.read {
			check("Verify", err)
		} else if err != nil {
			t.Errorf("Verify %s: %v, want it read (only the state disagrees)", c.field, err)
		}
		path := filepath.Join(t.TempDir(), "b.fence")
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		_, err := Restore(context.Background(), path, RestoreOptions{DataDir: dir, Now: time.UnixMilli(1_700_000_000_000).Add(time.Hour)})
		check("Restore", err)
		for _, p := range []string{dir, dir + ".restoring"} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Restore %s refused, but %s is there (%v)", c.field, p, err)
			}
		}
	}
}
