package state

import (
	"bytes"
	"encoding/json"
	"errors"
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
	c, _ := json.Marshal(snapConfigOf(busyMachine(t).Config()))
	cfg := string(c)
	for name, in := range map[string]string{
		"empty":           "",
		"not json":        "garbage",
		"trailing data":   string(good) + "{}",
		"wrong format":    strings.Replace(string(good), "fence-state/1", "fence-state/9", 1),
		"no config":       strings.Replace(string(good), `"config":`+cfg+`,`, ``, 1),
		"unknown field":   strings.Replace(string(good), `"now"`, `"nope":1,"now"`, 1),
		"truncated":       string(good[:len(good)/2]),
		"token > counter": strings.Replace(string(good), `"counter":3`, `"counter":1`, 1),
		"bad payload":     `{"format":"fence-state/1","now":0,"counter":0,"config":` + cfg + `,"locks":null,"idle":null,"requests":null,"ops":[{"resource":"s","op_id":"AA==","at":0,"payload":"AA==","token":1,"version":1}],"resources":null}`,
		"idle not listed": strings.Replace(string(good), `"idle":["idle"]`, `"idle":[]`, 1),
		"idle not a lock": `{"format":"fence-state/1","now":0,"counter":0,"config":` + cfg + `,"locks":null,"idle":["x"],"requests":null,"ops":null,"resources":null}`,
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
