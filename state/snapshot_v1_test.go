package state

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// A snapshot of format fence-state/1 (written before the compact id
// memory: testdata/v1, the goldens of that release) restores on this
// binary to the state the same log gives it: the restored machine writes,
// byte for byte, the fence-state/2 snapshot of the machine that applied the
// log (R1 across formats), and answers a retried op_id from the old
// snapshot as a replay, a changed payload as a conflict.
func TestFormatV1SnapshotsRestoreToTheSameState(t *testing.T) {
	auth := New()
	applyAll(t, auth, authLog())
	keys := New()
	applyAll(t, keys, keyLog())
	if err := keys.SetRestoredClusterID("c2"); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.AddRestoredKey(seed(9)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		m   *Machine
		raw func(string) []byte
	}{
		"v1/snapshot.golden":      {goldenMachine(t), func(s string) []byte { return snapFromHex(t, s) }},
		"v1/snapshot_auth.golden": {auth, hexBytes(t)},
		"v1/snapshot_keys.golden": {keys, hexBytes(t)},
	} {
		old := c.raw(readGolden(t, name))
		if !bytes.Contains(old, []byte(snapshotFormatV1)) {
			t.Fatalf("%s is not a %s snapshot", name, snapshotFormatV1)
		}
		n := New()
		if err := n.Restore(bytes.NewReader(old)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := snapshotBytes(t, n), snapshotBytes(t, c.m); !bytes.Equal(got, want) {
			t.Fatalf("%s restored writes\n%s\nwant (the log's machine)\n%s", name, snapHex(t, got), snapHex(t, want))
		}
	}

	n := New()
	if err := n.Restore(bytes.NewReader(snapFromHex(t, readGolden(t, "v1/snapshot.golden")))); err != nil {
		t.Fatal(err)
	}
	retry := Command{Op: OpWrite, Now: 5 * sec, Name: "s", Token: 1, Value: []byte("9"), OpID: "w"}
	if r := n.Apply(retry); r.Err != nil || !r.Replayed || r.Resource.LastToken != 1 || r.Resource.Version != 1 {
		t.Fatalf("retry of op_id w from a v1 snapshot: %s, want replayed with token 1, version 1", describe(r))
	}
	retry.Value = []byte("8")
	var conflict *fence.OpConflictError
	if r := n.Apply(retry); !errors.As(r.Err, &conflict) {
		t.Fatalf("op_id w with another value: %s, want OpConflict", describe(r))
	}
	add := Command{Op: OpAdd, Now: 5 * sec, Name: "n", Token: 1, Delta: 2, OpID: "a"}
	if r := n.Apply(add); r.Err != nil || !r.Replayed || r.AddValue != 2 {
		t.Fatalf("retry of add a from a v1 snapshot: %s, want replayed with value 2", describe(r))
	}
}

func hexBytes(t *testing.T) func(string) []byte {
	return func(s string) []byte {
		b, err := hex.DecodeString(strings.TrimSpace(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}
