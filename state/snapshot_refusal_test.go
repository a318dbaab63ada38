package state

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state/internal/statepb"
)

// update rewrites the golden files under testdata/ from the current
// encoders: go test ./state/ -run Golden -update.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name byte for byte (or rewrites the
// file under -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := readTestdata(name)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: the encoding changed (a format must not change once released: a new one gets a new name):\ngot  %s\nwant %s", path, got, want)
	}
}

// goldenRefusals is one refusal of every type, each field set to a
// distinct value, built by field name.
func goldenRefusals() []error {
	return []error{
		&fence.BusyError{Name: "lock", Holder: "h\xff", Token: 1 << 60, Remaining: 1500 * time.Millisecond, Delayed: true, Waited: true},
		&fence.StaleTokenError{Resource: "res", Token: 2, LastAccepted: 3},
		&fence.NotHolderError{Name: "held", Token: 4},
		&fence.LeaseExpiredError{Name: "gone", Token: 5},
		&fence.UnknownTokenError{Token: 9, LastIssued: 1<<64 - 1},
		&fence.OpConflictError{Field: "op_id", ID: "\x00\xfe"},
		&fence.InvalidError{Field: "ttl", Bound: "at least 1s", Value: "0s"},
		&fence.ResourceExhaustedError{Limit: "max_locks", Bound: "at most 10", Got: "11"},
		&fence.SessionExpiredError{Session: 7},
		&fence.PermitsMismatchError{Name: "exchange", Permits: 3, Current: 4},
		&fence.InvalidError{Field: "name"}, // empty fields are written too
		&fence.BusyError{Name: "free", Waited: true, Queued: 3},
	}
}

// TestRefusalRecordsGolden: the saved-refusal records are pinned byte for
// byte in testdata/refusals.golden (one "type<TAB>hex" line each), and
// each line decodes to its refusal with every field where it was.
// Reordering, renaming or retyping a field of a public error struct leaves
// both unchanged; a change of the records fails here.
func TestRefusalRecordsGolden(t *testing.T) {
	want := goldenRefusals()
	var b strings.Builder
	for _, err := range want {
		rec := snapErrorOf(err)
		enc, merr := deterministic.Marshal(rec)
		if merr != nil {
			t.Fatal(merr)
		}
		fmt.Fprintf(&b, "%s\t%s\n", rec.ProtoReflect().WhichOneof(rec.ProtoReflect().Descriptor().Oneofs().Get(0)).Name(), hex.EncodeToString(enc))
	}
	golden(t, "refusals.golden", []byte(b.String()))

	lines := strings.Split(strings.TrimSuffix(readGolden(t, "refusals.golden"), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d records, want %d", len(lines), len(want))
	}
	for i, line := range lines {
		_, h, _ := strings.Cut(line, "\t")
		enc, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		var rec statepb.Refusal
		if err := proto.Unmarshal(enc, &rec); err != nil {
			t.Fatal(err)
		}
		got, bad := refusalError(&rec)
		if bad != nil || !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("record %d decodes to %#v (%v), want %#v", i, got, bad, want[i])
		}
	}
}

// A refusal record with two members (protobuf would keep the last) is not
// canonical and is refused; with one it decodes.
func TestRefusalTwoMembersRefused(t *testing.T) {
	snap := func(refusal []byte) []byte {
		saved := append([]byte{0x08, 1, 0x10, byte(OpAcquire)}, protowire.AppendTag(nil, 7, protowire.BytesType)...)
		saved = protowire.AppendBytes(saved, refusal)
		sess := append([]byte{0x08, 1, 0x10, 2}, protowire.AppendTag(nil, 8, protowire.BytesType)...)
		sess = protowire.AppendBytes(sess, saved)
		rec := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), sess)
		cfg := DefaultConfig()
		h := emptySnapHeader(&cfg)
		h.SessionCounter = 1
		hb, _ := deterministic.Marshal(h)
		return encodeSnapRaw(hb, rec)
	}
	one := []byte{0x4a, 0x02, 0x08, 0x07}                 // session_expired{session: 7}
	two := append([]byte{0x0a, 0x02, 0x18, 0x01}, one...) // busy{token: 1}, then session_expired
	if _, err := decodeSnapshot(snap(one)); err != nil {
		t.Fatalf("one member: %v", err)
	}
	if _, err := decodeSnapshot(snap(two)); err == nil || !strings.Contains(err.Error(), "canonical") {
		t.Fatalf("two members: %v, want refused as not canonical", err)
	}
}

func readTestdata(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", name)) }
