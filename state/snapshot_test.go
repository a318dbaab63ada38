package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// busyMachine has every kind of state: held, queued, delayed and idle locks,
// remembered outcomes, op_ids and resources.
func busyMachine(t *testing.T) *Machine {
	t.Helper()
	m := New()
	mustOK(t, m, Command{Op: OpAcquire, Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"})
	mustOK(t, m, waitAcq(0, "held", "B", time.Second, time.Minute, "r-wait"))
	mustOK(t, m, Command{Op: OpAcquire, Name: "delayed", Owner: "A", TTL: time.Second, LockDelay: time.Hour})
	mustOK(t, m, Command{Op: OpAcquire, Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"})
	mustOK(t, m, rel(0, "idle", 3))
	mustOK(t, m, write(0, "s", 3, "\xff binary", "op\xfe"))
	mustOK(t, m, add(0, "n", 3, 7, "op2"))
	mustOK(t, m, tick(at(2)))
	return m
}

func snapshotBytes(t *testing.T, m *Machine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotRestore(t *testing.T) {
	a := busyMachine(t)
	snap := snapshotBytes(t, a)
	if again := snapshotBytes(t, busyMachine(t)); !bytes.Equal(snap, again) {
		t.Fatal("the same state gave different snapshot bytes")
	}
	b := New()
	if err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, snapshotBytes(t, b)) {
		t.Fatal("restore then snapshot differs")
	}
	if b.Now() != a.Now() || b.LastToken() != a.LastToken() {
		t.Fatal("time or counter lost")
	}
	da, _ := a.NextDeadline()
	db, _ := b.NextDeadline()
	if da != db {
		t.Fatalf("deadlines %d vs %d", da, db)
	}
	// Both machines must now behave the same.
	for _, c := range []Command{
		{Op: OpAcquire, Now: at(3), Name: "held", Owner: "A", TTL: 10 * time.Second, RequestID: "r-held"},
		{Op: OpAcquire, Now: at(3), Name: "idle", Owner: "A", TTL: time.Second, RequestID: "r-idle"},
		write(at(3), "s", 3, "\xff binary", "op\xfe"),
		rel(at(3), "idle", 3),
		acq(at(3), "delayed", "C", time.Second),
		tick(at(12)),
		tick(at(4000)),
	} {
		ra, rb := a.Apply(c), b.Apply(c)
		if describe(ra) != describe(rb) {
			t.Fatalf("%+v: original %s, restored %s", c, describe(ra), describe(rb))
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("states diverged after the same commands")
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	good := snapshotBytes(t, busyMachine(t))
	for name, in := range map[string]string{
		"empty":           "",
		"not json":        "garbage",
		"trailing data":   string(good) + "{}",
		"wrong format":    strings.Replace(string(good), "fence-state/3", "fence-state/9", 1),
		"unknown field":   strings.Replace(string(good), `"now"`, `"nope":1,"now"`, 1),
		"truncated":       string(good[:len(good)/2]),
		"token > counter": strings.Replace(string(good), `"counter":3`, `"counter":1`, 1),
		"bad payload":     `{"format":"fence-state/1","now":0,"counter":0,"locks":null,"idle":null,"requests":null,"ops":[{"resource":"s","op_id":"AA==","at":0,"payload":"AA==","token":1,"version":1}],"resources":null}`,
		"idle not listed": strings.Replace(string(good), `"idle":["idle"]`, `"idle":[]`, 1),
		"idle not a lock": `{"format":"fence-state/1","now":0,"counter":0,"locks":null,"idle":["x"],"requests":null,"ops":null,"resources":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			m := busyMachine(t)
			before := snapshotBytes(t, m)
			err := m.Restore(strings.NewReader(in))
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err %v, want ErrBadSnapshot", err)
			}
			if !bytes.Equal(before, snapshotBytes(t, m)) {
				t.Fatal("failed restore changed the machine")
			}
		})
	}
}

// A format-1 snapshot kept the whole SHA-256 of an op's payload; it restores
// (the record keeps its first bytes) and a retry is still replayed.
func TestFormat1SnapshotOpReplays(t *testing.T) {
	c := add(0, "n", 1, 5, "op")
	h := sha256.New()
	var b [1 + 2*binary.MaxVarintLen64]byte
	k := copy(b[:], []byte{byte(OpAdd)})
	k += binary.PutUvarint(b[k:], 1)
	k += binary.PutVarint(b[k:], 5)
	h.Write(b[:k])
	doc := fmt.Sprintf(`{"format":"fence-state/1","now":0,"decided":0,"counter":1,"locks":null,"idle":null,"requests":null,`+
		`"ops":[{"resource":"n","op_id":"b3A=","at":0,"payload":%q,"token":1,"version":1,"add_value":5}],`+
		`"resources":[{"name":"n","value":"NQ==","last_token":1,"version":1}]}`, base64.StdEncoding.EncodeToString(h.Sum(nil)))
	m := New()
	if err := m.Restore(strings.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	if r := m.Apply(c); !r.Replayed || r.AddValue != 5 {
		t.Fatalf("retry after a format-1 restore: %s", describe(r))
	}
	wantConflict("op_id", "op")(t, m, m.Apply(add(0, "n", 1, 6, "op")))
}
