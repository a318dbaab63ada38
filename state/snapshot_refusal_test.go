package state

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fenceworks/fence"
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
		t.Fatalf("%s: the encoding changed (a v1 format must not change):\ngot  %s\nwant %s", path, got, want)
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
		&fence.InvalidError{Field: "name"}, // empty fields are written too
	}
}

// TestRefusalRecordsGolden: the saved-refusal records are pinned byte for
// byte in testdata/refusals.json, and that file decodes to the refusals
// with every field where it was. Reordering, renaming or retyping a field
// of a public error struct leaves both unchanged; a change of the records
// fails here.
func TestRefusalRecordsGolden(t *testing.T) {
	want := goldenRefusals()
	recs := make([]*snapError, len(want))
	for i, err := range want {
		recs[i] = snapErrorOf(err)
	}
	b, err := json.MarshalIndent(recs, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "refusals.json", append(b, '\n'))

	raw, err := readTestdata("refusals.json")
	if err != nil {
		t.Fatal(err)
	}
	var back []*snapError
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if len(back) != len(want) {
		t.Fatalf("%d records, want %d", len(back), len(want))
	}
	for i, rec := range back {
		got, bad := rec.error()
		if bad != nil || !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("record %d decodes to %#v (%v), want %#v", i, got, bad, want[i])
		}
	}
}

func readTestdata(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", name)) }
